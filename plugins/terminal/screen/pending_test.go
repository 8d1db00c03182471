package screen

import (
	"strings"
	"testing"
)

func TestPendingBounded(t *testing.T) {
	tests := []struct {
		name    string
		limit   int
		appends []string
		want    string
		dropped bool
	}{
		{"fits", 10, []string{"ab\n", "cd\n"}, "ab\ncd\n", false},
		{"keeps whole newest lines", 6, []string{"one\n", "two\n", "three\n"}, "three\n", true},
		{"a line longer than the limit keeps its end", 4, []string{"abcdefghij\n"}, "hij\n", true},
		{"cut at a rune start", 4, []string{"ééééé\n"}, "é\n", true},
		{"exactly the limit", 4, []string{"abc\n"}, "abc\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewPending(tt.limit, false)
			for _, a := range tt.appends {
				b.Append([]byte(a))
			}
			if got := string(b.Bytes()); got != tt.want {
				t.Errorf("Bytes = %q, want %q", got, tt.want)
			}
			if b.Dropped() != tt.dropped {
				t.Errorf("Dropped = %v, want %v", b.Dropped(), tt.dropped)
			}
			if got := b.Take(); got != tt.want || b.Len() != 0 {
				t.Errorf("Take = %q (then %d left), want %q", got, b.Len(), tt.want)
			}
			if b.TakeDropped() != tt.dropped || b.Dropped() {
				t.Error("TakeDropped did not report and clear the flag")
			}
		})
	}
}

func TestPendingUnboundedKeepsAll(t *testing.T) {
	b := NewPending(4, true)
	line := strings.Repeat("x", 100) + "\n"
	for range 10 {
		b.Append([]byte(line))
	}
	if b.Len() != 1010 || b.Dropped() || b.Take() != strings.Repeat(line, 10) {
		t.Fatalf("an unbounded buffer lost output")
	}
}

func TestPendingMoveTo(t *testing.T) {
	src, dst := NewPending(6, false), NewPending(100, true)
	src.Append([]byte("old\nnewer\n"))
	dst.Append([]byte("first\n"))
	src.MoveTo(&dst)
	if got := dst.Take(); got != "first\nnewer\n" {
		t.Errorf("moved %q", got)
	}
	if !dst.Dropped() || src.Dropped() || src.Len() != 0 {
		t.Errorf("dropped flags: dst %v, src %v; src left %d", dst.Dropped(), src.Dropped(), src.Len())
	}
}

func TestTail(t *testing.T) {
	for _, tt := range []struct {
		s     string
		limit int
		want  string
	}{
		{"hello", 10, "hello"},
		{"hello", 3, "llo"},
		{"aé", 1, ""},
		{"aéb", 2, "b"},
		{"aéb", 3, "éb"},
	} {
		if got := Tail(tt.s, tt.limit); got != tt.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tt.s, tt.limit, got, tt.want)
		}
	}
}

func TestViewport(t *testing.T) {
	tests := []struct {
		name              string
		unpulled, partial string
		limit             int
		want              string
	}{
		{"lines and a partial", "a\nb\n", "pro", 100, "a\nb\npro"},
		{"a piece, then the partial", "a\nxxxx", "yy", 100, "a\nxxxx\nyy"},
		{"a piece, no partial", "xxxx", "", 100, "xxxx\n"},
		{"only a partial", "", "yy", 100, "yy"},
		{"cut to the limit", "a\nxxxx", "yy", 4, "x\nyy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Viewport(tt.unpulled, tt.partial, tt.limit)
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if last := got[strings.LastIndexByte(got, '\n')+1:]; last != tt.partial {
				t.Fatalf("last line %q is not the partial %q", last, tt.partial)
			}
		})
	}
}
