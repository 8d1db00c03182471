package bashtool

import (
	"strings"
	"testing"
)

func TestJobReport(t *testing.T) {
	tests := []struct {
		name, text string
		job        string // "" when none matches
		rest       string
	}{
		{"plain", "[1]+ sleep 100 &\n", "1", ""},
		{"job output after", "[2]+ make -j8 &\ncc -c a.c\n", "2", "cc -c a.c\n"},
		{"words with newlines", "[1]+ python3 -c 'a\nb' &\nout\n", "1", "out\n"},
		{"an error instead", "bash: bg: current: no such job\n", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := jobReport.FindStringSubmatchIndex(tt.text)
			if tt.job == "" {
				if m != nil {
					t.Fatalf("matched %q", tt.text[m[0]:m[1]])
				}
				return
			}
			if m == nil {
				t.Fatalf("no match in %q", tt.text)
			}
			if job, rest := tt.text[m[2]:m[3]], tt.text[:m[0]]+tt.text[m[1]:]; job != tt.job || rest != tt.rest {
				t.Fatalf("job %q rest %q, want %q %q", job, rest, tt.job, tt.rest)
			}
		})
	}
}

func TestDropReports(t *testing.T) {
	split := func(s string) []string { return strings.Split(s, "\n") }
	join := func(l []string) string { return strings.Join(l, "\n") }
	tests := []struct {
		name, in, want string
		drop           func([]string) []string
	}{
		{"killed", "out\nKilled\n", "out\n", func(l []string) []string { return dropReport(l, "Killed") }},
		{"killed, no final newline", "Killed", "", func(l []string) []string { return dropReport(l, "Killed") }},
		{"other last line kept", "Killed\nout\n", "Killed\nout\n", func(l []string) []string { return dropReport(l, "Killed") }},
		{"stop report and its empty line", "out\n\n[1]+  Stopped                 sleep 100\n", "out\n", func(l []string) []string { return dropStopReport(l, 1) }},
		{"another job's report kept", "\n[2]+  Stopped                 vim\n", "\n[2]+  Stopped                 vim\n", func(l []string) []string { return dropStopReport(l, 1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := join(tt.drop(split(tt.in))); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestHeldTail: everything but the last lines passes through at once, and
// nothing is lost or reordered.
func TestHeldTail(t *testing.T) {
	s := newSink(1<<20, nil)
	h := &heldTail{out: s}
	var want strings.Builder
	for _, chunk := range []string{"a\nb\n", "c", "\nd\ne\nf\n", strings.Repeat("x", heldMax+10), "\ng\n"} {
		h.write(chunk)
		want.WriteString(chunk)
		if n := strings.Count(h.buf, "\n"); n > heldLines || len(h.buf) > heldMax+heldLines+1 {
			t.Fatalf("holding %d lines, %d bytes: %q", n, len(h.buf), h.buf)
		}
	}
	s.write(h.buf)
	s.close()
	if got := s.text(); got != strings.TrimSuffix(want.String(), "\n") {
		t.Fatalf("got %q\nwant %q", got, want.String())
	}
}
