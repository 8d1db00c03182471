package screen

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestScrollbackReadErrors(t *testing.T) {
	s := NewScrollback(10, 100)
	s.Append([]byte("a\n"))
	tests := []struct {
		offset, count int
		want          error
		msg           string
	}{
		{-1, 1, ErrBadOffset, "read offset must be a non-negative integer (got -1)"},
		{math.MinInt, 0, ErrBadOffset, fmt.Sprintf("read offset must be a non-negative integer (got %d)", math.MinInt)},
		{0, 0, ErrBadCount, "read count must be a positive integer (got 0)"},
		{5, -3, ErrBadCount, "read count must be a positive integer (got -3)"},
	}
	for _, tt := range tests {
		_, err := s.Read(tt.offset, tt.count, 0)
		if !errors.Is(err, tt.want) || err.Error() != tt.msg {
			t.Errorf("Read(%d, %d) error = %v, want %q", tt.offset, tt.count, err, tt.msg)
		}
	}
}

func TestScrollbackRead(t *testing.T) {
	type read struct{ offset, count, maxBytes int }
	tests := []struct {
		name               string
		maxLines, maxBytes int
		appends            []string // committed text, then the partial line
		partial            string
		read               read
		want               Page
	}{
		{"empty", 10, 100, nil, "", read{0, 10, 0}, Page{}},
		{"empty offset", 10, 100, nil, "", read{3, 10, 0}, Page{LineBegin: 3, LineEnd: 3}},
		{"newest lines", 10, 100, []string{"a\nb\nc\n"}, "d", read{0, 2, 0},
			Page{Text: "c\nd", TotalLines: 4, LineBegin: 0, LineEnd: 2}},
		{"older page", 10, 100, []string{"a\nb\nc\n"}, "d", read{2, 2, 0},
			Page{Text: "a\nb", TotalLines: 4, LineBegin: 2, LineEnd: 4}},
		{"page past oldest", 10, 100, []string{"a\nb\nc\n"}, "d", read{3, 5, 0},
			Page{Text: "a", TotalLines: 4, LineBegin: 3, LineEnd: 4}},
		{"offset at end", 10, 100, []string{"a\nb\nc\n"}, "d", read{4, 1, 0},
			Page{TotalLines: 4, LineBegin: 4, LineEnd: 4}},
		{"huge count", 10, 100, []string{"a\nb\n"}, "", read{0, math.MaxInt, 0},
			Page{Text: "a\nb", TotalLines: 2, LineEnd: 2}},
		{"empty partial is no line", 10, 100, []string{"a\nb\n"}, "", read{0, 1, 0},
			Page{Text: "b", TotalLines: 2, LineEnd: 1}},
		{"empty lines count", 10, 100, []string{"a\n\nb\n"}, "", read{1, 1, 0},
			Page{Text: "", TotalLines: 3, LineBegin: 1, LineEnd: 2}},
		{"several empty lines", 10, 100, []string{"\n\n\n"}, "", read{0, 2, 0},
			Page{Text: "\n", TotalLines: 3, LineEnd: 2}},
		{"appends across calls", 10, 100, []string{"a\n", "b\nc\n", "d\n"}, "", read{0, 10, 0},
			Page{Text: "a\nb\nc\nd", TotalLines: 4, LineEnd: 4}},
		{"missing final newline", 10, 100, []string{"a\nb", "c\n"}, "", read{0, 10, 0},
			Page{Text: "a\nb\nc", TotalLines: 3, LineEnd: 3}},

		// Byte limit on the page.
		{"cut partial first line", 10, 100, []string{"héllo\nwörld\n"}, "", read{0, 2, 8},
			Page{Text: "o\nwörld", TotalLines: 2, LineEnd: 2, Truncated: true}},
		{"cut at line start", 10, 100, []string{"héllo\nwörld\n"}, "", read{0, 2, 6},
			Page{Text: "wörld", TotalLines: 2, LineEnd: 1, Truncated: true}},
		{"cut on separator skips it", 10, 100, []string{"héllo\nwörld\n"}, "", read{0, 2, 7},
			Page{Text: "wörld", TotalLines: 2, LineEnd: 1, Truncated: true}},
		{"cut at rune start", 10, 100, []string{"wörld\n"}, "", read{0, 1, 5},
			Page{Text: "örld", TotalLines: 1, LineEnd: 1, Truncated: true}},
		{"cut inside rune", 10, 100, []string{"wörld\n"}, "", read{0, 1, 4},
			Page{Text: "rld", TotalLines: 1, LineEnd: 1, Truncated: true}},
		{"rune wider than limit", 10, 100, []string{"€\n"}, "", read{0, 1, 2},
			Page{Text: "", TotalLines: 1, LineEnd: 0, Truncated: true}},
		{"limit exactly fits", 10, 100, []string{"ab\ncd\n"}, "", read{0, 2, 5},
			Page{Text: "ab\ncd", TotalLines: 2, LineEnd: 2}},
		{"cut leaves empty last line", 10, 100, []string{"abc\n\n"}, "", read{0, 2, 1},
			Page{Text: "", TotalLines: 2, LineEnd: 1, Truncated: true}},
		{"cut in partial", 10, 100, []string{"abc\n"}, "xyz", read{0, 2, 2},
			Page{Text: "yz", TotalLines: 2, LineEnd: 1, Truncated: true}},

		// Retention and Truncated.
		{"line bound keeps newest", 2, 100, []string{"a\nb\nc\n"}, "", read{0, 10, 0},
			Page{Text: "b\nc", TotalLines: 2, LineEnd: 2, Truncated: true}},
		{"page short of oldest not truncated", 2, 100, []string{"a\nb\nc\n"}, "", read{0, 1, 0},
			Page{Text: "c", TotalLines: 2, LineEnd: 1}},
		{"page reaching oldest truncated", 2, 100, []string{"a\nb\nc\n"}, "", read{1, 1, 0},
			Page{Text: "b", TotalLines: 2, LineBegin: 1, LineEnd: 2, Truncated: true}},
		{"past end after drops truncated", 2, 100, []string{"a\nb\nc\n"}, "", read{5, 1, 0},
			Page{TotalLines: 2, LineBegin: 5, LineEnd: 5, Truncated: true}},
		{"partial beyond maxLines", 2, 100, []string{"a\nb\n"}, "p", read{0, 10, 0},
			Page{Text: "a\nb\np", TotalLines: 3, LineEnd: 3}},
		{"byte bound", 100, 10, []string{"aaa\nbbb\nccc\n"}, "", read{0, 10, 0},
			Page{Text: "bbb\nccc", TotalLines: 2, LineEnd: 2, Truncated: true}},
		{"byte bound counts partial", 100, 10, []string{"aaa\nbbb\n"}, "xyz", read{0, 10, 0},
			Page{Text: "bbb\nxyz", TotalLines: 2, LineEnd: 2, Truncated: true}},
		{"long line keeps tail", 100, 5, []string{"a\nabcdefgh\n"}, "", read{0, 10, 0},
			Page{Text: "efgh", TotalLines: 1, LineEnd: 1, Truncated: true}},
		{"long line rune boundary", 100, 5, []string{"ab€€\n"}, "", read{0, 10, 0},
			Page{Text: "€", TotalLines: 1, LineEnd: 1, Truncated: true}},
		{"long partial keeps tail", 100, 5, []string{"a\n"}, "abcdefgh", read{0, 10, 0},
			Page{Text: "defgh", TotalLines: 1, LineEnd: 1, Truncated: true}},
		{"one byte bound", 100, 1, []string{"abc\n"}, "", read{0, 10, 0},
			Page{Text: "", TotalLines: 1, LineEnd: 1, Truncated: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScrollback(tt.maxLines, tt.maxBytes)
			for _, a := range tt.appends {
				s.Append([]byte(a))
			}
			s.SetPartial(tt.partial)
			got, err := s.Read(tt.read.offset, tt.read.count, tt.read.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Read%v\n got %+v\nwant %+v", tt.read, got, tt.want)
			}
		})
	}
}

func TestScrollbackAppendClearsPartial(t *testing.T) {
	s := NewScrollback(10, 8)
	s.Append([]byte("aa\n"))
	s.SetPartial("bbbb")
	if s.Bytes() != 7 || s.TotalLines() != 2 {
		t.Fatalf("bytes %d lines %d", s.Bytes(), s.TotalLines())
	}
	// "bbbb" is committed: counting the stale partial too would be 12
	// bytes and push "aa" out.
	s.Append([]byte("bbbb\n"))
	if s.Bytes() != 8 || s.TotalLines() != 2 || s.Dropped() != 0 {
		t.Fatalf("bytes %d lines %d dropped %d", s.Bytes(), s.TotalLines(), s.Dropped())
	}
	s.SetPartial("")
	s.Append(nil) // nothing committed: nothing changes
	if s.TotalLines() != 2 {
		t.Fatalf("lines %d", s.TotalLines())
	}
}

func TestScrollbackDropped(t *testing.T) {
	s := NewScrollback(3, 20)
	steps := []struct {
		append  string
		partial string
		dropped uint64
	}{
		{"1\n2\n3\n", "", 0},
		{"4\n", "", 1},                   // line bound
		{"5\n6\n", "", 3},                // two more
		{"", strings.Repeat("p", 17), 5}, // the partial squeezes out 2 lines (6\n stays: 2+17=19)
		{"", "", 5},
		{strings.Repeat("x", 30) + "\n", "", 7}, // cut line counts, and it pushes out 6
	}
	for i, st := range steps {
		s.Append([]byte(st.append))
		s.SetPartial(st.partial)
		if s.Dropped() != st.dropped {
			t.Fatalf("step %d: Dropped = %d, want %d", i, s.Dropped(), st.dropped)
		}
	}
}

// TestScrollbackSeq100k is the reference load: 100k lines into the default
// bounds keep exactly the newest 10 000 without growing storage.
func TestScrollbackSeq100k(t *testing.T) {
	s := NewScrollback(10000, 4<<20)
	var b []byte
	for i := 1; i <= 100000; i++ {
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, '\n')
		if len(b) > 4000 {
			s.Append(b)
			b = b[:0]
		}
	}
	s.Append(b)
	if s.TotalLines() != 10000 || s.Dropped() != 90000 {
		t.Fatalf("lines %d dropped %d", s.TotalLines(), s.Dropped())
	}
	p, err := s.Read(0, 1, 0)
	if err != nil || p.Text != "100000" {
		t.Fatalf("newest %q %v", p.Text, err)
	}
	p, _ = s.Read(9999, 5, 0)
	if p.Text != "90001" || !p.Truncated || p.LineEnd != 10000 {
		t.Fatalf("oldest %+v", p)
	}
	if len(s.chunks) > 3 {
		t.Fatalf("%d chunks retained for %d bytes", len(s.chunks), s.Bytes())
	}
}

func TestNewScrollbackClamps(t *testing.T) {
	s := NewScrollback(0, -1)
	s.Append([]byte("a\nb\n"))
	if s.TotalLines() != 1 || s.Bytes() != 1 {
		t.Fatalf("lines %d bytes %d", s.TotalLines(), s.Bytes())
	}
}
