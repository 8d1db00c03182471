package bashtool

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func feed(t *testing.T, c *capture, chunks ...string) {
	t.Helper()
	for _, ch := range chunks {
		if err := c.push(ch); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCaptureStates(t *testing.T) {
	m := markers{id: "id"}
	start, end := m.start(), m.endPrefix()
	tests := []struct {
		name    string
		chunks  []string
		partial string
		prompt  bool
		out     string
		ended   bool
		status  int
		stray   string
	}{
		{"simple", []string{"dsh> " + start + "\n", "hello\n", end + "0__\n"}, "dsh> ", true, "hello", true, 0, ""},
		{"no trailing newline", []string{start + "\n", "abc" + end + "3__\n"}, "dsh> ", true, "abc", true, 3, ""},
		{"keeps inner blank lines", []string{start + "\na\n\nb\n\n" + end + "0__\n"}, "", true, "a\n\nb\n", true, 0, ""},
		{"stray output, and noise after the end", []string{"dsh> bg line\n", "dsh> " + start + "\n", "x\n", end + "0__\n", "prompt command output\n"}, "dsh> ", true, "x", true, 0, "bg line"},
		{"echoed wrapper is noise", []string{"printf '%s%s\\n' __dsh_ 'id_start__' ...\n", start + "\n", "y\n", end + "0__\n"}, "dsh> ", true, "y", true, 0, ""},
		{"waiting program keeps its prompt", []string{start + "\n", "Python 3\n"}, ">>> ", false, "Python 3\n>>> ", false, 0, ""},
		{"marker-looking output", []string{start + "\n", "__dsh_other_end_0__\n", end + "0__\n"}, "", true, "__dsh_other_end_0__", true, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSink(1000, nil)
			c := newCapture(m, s)
			feed(t, c, tt.chunks...)
			c.finish(tt.partial, tt.prompt)
			c.flush()
			if got := s.text(); got != tt.out {
				t.Errorf("output %q, want %q", got, tt.out)
			}
			if c.ended() != tt.ended || c.status != tt.status {
				t.Errorf("ended %v status %d, want %v %d", c.ended(), c.status, tt.ended, tt.status)
			}
			if got := c.strayNote(); got != tt.stray {
				t.Errorf("stray %q, want %q", got, tt.stray)
			}
		})
	}
}

// A partial line shown at one settle is delivered again, completed, by the
// next send; it must appear once.
func TestCapturePendingLineIsNotDuplicated(t *testing.T) {
	m := markers{id: "id"}
	s := newSink(1000, nil)
	c := newCapture(m, s)
	feed(t, c, m.start()+"\n")
	c.finish("Name: ", false)
	feed(t, c, "Name: bob\n", m.endPrefix()+"0__\n")
	c.finish("dsh> ", true)
	c.flush()
	if got := s.text(); got != "Name: bob" {
		t.Fatalf("output %q", got)
	}
}

type memFile struct {
	strings.Builder
	closed bool
}

func (f *memFile) Close() error { f.closed = true; return nil }

func TestSinkHeadAndTail(t *testing.T) {
	var file memFile
	s := newSink(100, func() (io.WriteCloser, string, error) { return &file, "/tmp/out-1.txt", nil })
	var all strings.Builder
	for i := range 1000 {
		line := strings.Repeat("é", i%7) + "line " + string(rune('a'+i%26)) + "\n"
		all.WriteString(line)
		if err := s.write(line); err != nil {
			t.Fatal(err)
		}
	}
	s.close()
	want := strings.TrimSuffix(all.String(), "\n")
	if file.String() != want+"\n" || !file.closed {
		t.Fatalf("file holds %d bytes, want the whole output (%d bytes)", file.Len(), len(want)+1)
	}
	got := s.text()
	head, rest, ok := strings.Cut(got, "[... ")
	if !ok {
		t.Fatalf("no notice in %q", got)
	}
	notice, tail, _ := strings.Cut(rest, "...]\n")
	if !strings.HasPrefix(want, head) || !strings.HasSuffix(want, tail) {
		t.Fatalf("head or tail is not the output's own:\nhead %q\ntail %q", head, tail)
	}
	if n := utf8.RuneCountInString(head) + utf8.RuneCountInString(tail); n > 100 || n < 60 {
		t.Fatalf("head+tail = %d runes, want close to the limit 100", n)
	}
	if !strings.HasSuffix(head, "\n") || strings.HasPrefix(tail, "\n") {
		t.Fatalf("cuts are not at line boundaries: head %q tail %q", head, tail)
	}
	omitted := utf8.RuneCountInString(want) - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
	if !strings.Contains(notice, "characters") || !strings.Contains(notice, "/tmp/out-1.txt") ||
		!strings.HasPrefix(notice, itoa(omitted)+" characters") {
		t.Fatalf("notice %q (omitted %d)", notice, omitted)
	}
	if !utf8.ValidString(got) {
		t.Fatal("a character was split")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestSinkFitsExactly(t *testing.T) {
	s := newSink(5, func() (io.WriteCloser, string, error) { t.Fatal("no file needed"); return nil, "", nil })
	if err := s.write("中文abc\n"); err != nil {
		t.Fatal(err)
	}
	if got := s.text(); got != "中文abc" {
		t.Fatalf("got %q", got)
	}
}

func TestSinkFileError(t *testing.T) {
	s := newSink(3, func() (io.WriteCloser, string, error) { return nil, "", errors.New("disk full") })
	_ = s.write("abcdefgh\n")
	if got := s.text(); !strings.Contains(got, "could not be saved: disk full") {
		t.Fatalf("got %q", got)
	}
}

func TestSinkDropTrailingLine(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"before\nexit\n", "before"},
		{"exit\n", ""},
		{"exit now\n", "exit now"},
		{"before\n", "before"},
	} {
		s := newSink(100, nil)
		_ = s.write(tt.in)
		s.dropTrailingLine("exit")
		if got := s.text(); got != tt.want {
			t.Errorf("%q: got %q want %q", tt.in, got, tt.want)
		}
	}
}

func TestOpenOutputIsPerOwnerAndRemoved(t *testing.T) {
	base := t.TempDir()
	st := &ownerState{}
	f, path, err := st.openOutput(base)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if filepath.Dir(filepath.Dir(path)) != base {
		t.Fatalf("path %s not under %s", path, base)
	}
	if _, p2, _ := st.openOutput(base); filepath.Dir(p2) != filepath.Dir(path) || p2 == path {
		t.Fatalf("second file %s", p2)
	}
	if err := st.removeOutputs(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Fatalf("directory not removed: %v", err)
	}
}
