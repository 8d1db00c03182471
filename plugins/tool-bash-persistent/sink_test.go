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
		s.write(line)
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

// TestSinkLongOutputAllocatesNothing: once its tail has grown, a sink
// takes any amount of output without allocating: its memory is bounded by
// its limit, not by what a command prints, and a long output makes no
// garbage for dsh to collect (issue 26, item 3).
func TestSinkLongOutputAllocatesNothing(t *testing.T) {
	s := newSink(16000, func() (io.WriteCloser, string, error) { return nopFile{}, "/tmp/out-1.txt", nil })
	chunk := strings.Repeat(strings.Repeat("a", 49)+"\n", 80) // a read's worth
	for range 1000 {
		s.write(chunk)
	}
	// Each run writes more than the tail keeps, so it trims at least once.
	writes := (8*s.limit+4096)/len(chunk) + 1
	if n := testing.AllocsPerRun(100, func() {
		for range writes {
			s.write(chunk)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per %d bytes written, want none", n, writes*len(chunk))
	}
	if len(s.tail) > 8*s.limit+4096 || cap(s.tail) > 4*(8*s.limit+4096) {
		t.Fatalf("the tail holds %d bytes (capacity %d) for a limit of %d runes", len(s.tail), cap(s.tail), s.limit)
	}
}

// nopFile is a saved-output file that keeps nothing; like an *os.File, it
// writes a string without copying it.
type nopFile struct{}

func (nopFile) Write(p []byte) (int, error)       { return len(p), nil }
func (nopFile) WriteString(s string) (int, error) { return len(s), nil }
func (nopFile) Close() error                      { return nil }

func TestSinkFitsExactly(t *testing.T) {
	s := newSink(5, func() (io.WriteCloser, string, error) { t.Fatal("no file needed"); return nil, "", nil })
	s.write("中文abc\n")
	if got := s.text(); got != "中文abc" {
		t.Fatalf("got %q", got)
	}
}

func TestSinkFileError(t *testing.T) {
	s := newSink(3, func() (io.WriteCloser, string, error) { return nil, "", errors.New("disk full") })
	s.write("abcdefgh\n")
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
		s.write(tt.in)
		s.dropTrailingLine("exit")
		if got := s.text(); got != tt.want {
			t.Errorf("%q: got %q want %q", tt.in, got, tt.want)
		}
	}
}

// testAccount is an account of saved outputs with room to spare.
func testAccount() *savedAccount { return &savedAccount{limit: 1 << 30, ownerLimit: 1 << 30} }

func TestOpenOutputIsPerOwnerAndRemoved(t *testing.T) {
	base := t.TempDir()
	st := &ownerState{}
	f, path, err := st.openOutput(testAccount(), base, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if filepath.Dir(filepath.Dir(path)) != base {
		t.Fatalf("path %s not under %s", path, base)
	}
	if _, p2, _ := st.openOutput(testAccount(), base, 1<<20); filepath.Dir(p2) != filepath.Dir(path) || p2 == path {
		t.Fatalf("second file %s", p2)
	}
	if err := st.removeOutputs(testAccount()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Fatalf("directory not removed: %v", err)
	}
}

func TestOutputsGoToThePrivateDirectory(t *testing.T) {
	run := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", run)
	st := &ownerState{}
	f, path, err := st.openOutput(testAccount(), "", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer st.removeOutputs(testAccount())
	if got := filepath.Dir(filepath.Dir(path)); got != filepath.Join(run, "dsh") {
		t.Fatalf("output in %s, want in $XDG_RUNTIME_DIR/dsh", got)
	}
}

// TestDeletedOutputDirectoryIsNotReused: a command deletes the owner's
// output directory and something else takes its name (another user, in a
// shared base). The next output goes to a new directory of dsh's own, not
// into the impostor.
func TestDeletedOutputDirectoryIsNotReused(t *testing.T) {
	base := t.TempDir()
	st := &ownerState{}
	f, path, err := st.openOutput(testAccount(), base, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer st.removeOutputs(testAccount())
	old := filepath.Dir(path)
	if err := os.RemoveAll(old); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(old, 0o777); err != nil { // the impostor
		t.Fatal(err)
	}
	f, p2, err := st.openOutput(testAccount(), base, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if filepath.Dir(p2) == old {
		t.Fatalf("the next output went into the re-created %s", old)
	}
	if entries, _ := os.ReadDir(old); len(entries) != 0 {
		t.Fatalf("something was written into the impostor: %v", entries)
	}
}
