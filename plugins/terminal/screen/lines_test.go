package screen

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// render writes the segments to a fresh Lines and returns what it committed
// and the partial line.
func render(maxLine int, in ...Segment) (committed, partial string) {
	l := Lines{MaxLineBytes: maxLine}
	var out []byte
	for _, s := range in {
		out = l.Write(out, s)
	}
	return string(out), l.Partial()
}

func TestLines(t *testing.T) {
	tests := []struct {
		name      string
		maxLine   int
		in        []Segment
		committed string
		partial   string
	}{
		{"empty", 0, nil, "", ""},
		{"plain", 0, segs(tx("hello")), "", "hello"},
		{"lines", 0, segs(tx("l1\nl2\r\nl3")), "l1\nl2\n", "l3"},
		{"empty lines", 0, segs(tx("\n\r\n\n")), "\n\n\n", ""},
		{"CRLF", 0, segs(tx("a\r\nb")), "a\n", "b"},
		{"CRLF split", 0, segs(tx("a\r"), tx("\nb")), "a\n", "b"},
		{"progress collapses", 0, segs(tx("10%\r20%\r30%\n")), "30%\n", ""},
		{"overwrite keeps rest", 0, segs(tx("abc\rX\n")), "Xbc\n", ""},
		{"CR EL redraw", 0, segs(tx("downloading\r"), el(0), tx("done\n")), "done\n", ""},
		{"CR at end keeps line", 0, segs(tx("abc\r")), "", "abc"},
		{"CR then LF later", 0, segs(tx("abc\r"), tx("xy"), tx("\n")), "xyc\n", ""},
		{"overwrite past end appends", 0, segs(tx("ab\rxyz")), "", "xyz"},
		{"overwrite then append", 0, segs(tx("abc\rX"), tx("Y"), tx("Z"), tx("W")), "", "XYZW"},
		{"utf8 overwrite", 0, segs(tx("héllo\rHE")), "", "HEllo"},
		{"wider rune over narrow", 0, segs(tx("abc\r€")), "", "€bc"},
		{"narrow rune over wide", 0, segs(tx("€€€\rab")), "", "ab€"},
		{"tab is a column", 0, segs(tx("a\tb\rX")), "", "X\tb"},
		{"tab overwritten", 0, segs(tx("a\tb\r12")), "", "12b"},

		{"backspace moves left", 0, segs(tx("abc\b\bX\n")), "aXc\n", ""},
		{"backspace stops at 0", 0, segs(tx("ab\b\b\b\bX")), "", "Xb"},
		{"backspace on empty line", 0, segs(tx("\b\bab")), "", "ab"},
		{"backspace does not erase", 0, segs(tx("abc\b")), "", "abc"},
		{"backspace then EL", 0, segs(tx("abc\b"), el(0)), "", "ab"},
		{"long CRLF lines", 0, segs(tx("0123456789abcdef\r\n0123456\r\n01234567\r\n")),
			"0123456789abcdef\n0123456\n01234567\n", ""},
		{"lone CR after plain lines", 0, segs(tx("first line here\r\nsecond 50%\rsecond 99%\r\nthird\n")),
			"first line here\nsecond 99%\nthird\n", ""},
		{"CR at word edge", 0, segs(tx("1234567\r\n1234567\rX\n")), "1234567\nX234567\n", ""},
		{"spinner", 0, segs(tx("wait |\b/\b-\b\\\b|\n")), "wait |\n", ""},

		{"EL0 at end is no-op", 0, segs(tx("abc"), el(0)), "", "abc"},
		{"EL0 mid line", 0, segs(tx("abcdef\r12"), el(0)), "", "12"},
		{"EL0 at 0 then text", 0, segs(tx("abc\r"), el(0), tx("x")), "", "x"},
		{"EL1 includes cursor cell", 0, segs(tx("abcdef\rxy"), el(1)), "", "   def"},
		{"EL1 at end", 0, segs(tx("abc"), el(1)), "", "   "},
		{"EL1 wide runes", 0, segs(tx("€€€\r€"), el(1), tx("\n")), "  €\n", ""},
		{"EL1 then write", 0, segs(tx("abcdef\rxy"), el(1), tx("Z")), "", "  Zdef"},
		{"EL2 clears", 0, segs(tx("abc"), el(2)), "", ""},
		{"EL2 cursor stays", 0, segs(tx("abc"), el(2), tx("d")), "", "   d"},
		{"EL2 after CR", 0, segs(tx("abc\r"), el(2), tx("x")), "", "x"},
		{"EL2 then CR", 0, segs(tx("abc"), el(2), tx("\rx")), "", "x"},
		{"EL2 then BS", 0, segs(tx("abc"), el(2), tx("\bX")), "", "  X"},
		{"EL2 then commit", 0, segs(tx("abc"), el(2), tx("\n")), "\n", ""},
		{"EL2 mid line", 0, segs(tx("abcdef\rab"), el(2), tx("X")), "", "  X"},
		{"unknown EL ignored", 0, segs(tx("abc\r"), el(7), tx("\n")), "abc\n", ""},

		{"invalid utf8 repaired", 0, segs(tx("a\xffb\xe2\n")), "a\uFFFDb\uFFFD\n", ""},
		{"controls dropped", 0, segs(tx("a\x00\x1b[b\x7f\n")), "a[b\n", ""},
		{"C1 dropped", 0, segs(tx("a\u0085b\u009bc")), "", "abc"},

		{"cap hands out pieces", 4, segs(tx("abcdefghij")), "abcdefgh", "ij"},
		{"cap exact stays partial", 4, segs(tx("abcd")), "", "abcd"},
		{"cap exact then newline", 4, segs(tx("abcd\n")), "abcd\n", ""},
		{"cap across segments", 4, segs(tx("ab"), tx("cd"), tx("e")), "abcd", "e"},
		{"cap at rune boundary", 4, segs(tx("aé€")), "aé", "€"},
		{"rune wider than cap", 2, segs(tx("€")), "", "€"},
		{"rune wider than cap then more", 2, segs(tx("€x")), "€", "x"},
		{"cap on the fast path", 4, segs(tx("abcd\nabcde\nabc\r\nabcd\r\n")), "abcd\nabcde\nabc\nabcd\n", ""},
		{"cap in edit mode", 4, segs(tx("abcd\r€")), "abcd", "€"},
		{"cap in edit mode append", 4, segs(tx("ab\rxyzw")), "", "xyzw"},
		{"cap in edit mode append more", 4, segs(tx("ab\rxyzwv")), "xyzw", "v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			committed, partial := render(tt.maxLine, tt.in...)
			if committed != tt.committed || partial != tt.partial {
				t.Fatalf("committed %q partial %q, want %q %q", committed, partial, tt.committed, tt.partial)
			}
			// The same text split into single runes renders the same.
			c2, p2 := render(tt.maxLine, splitRunes(tt.in)...)
			if c2 != committed || p2 != partial {
				t.Fatalf("rune by rune: committed %q partial %q, want %q %q", c2, p2, committed, partial)
			}
		})
	}
}

// splitRunes splits every Text segment into one segment per rune (or per
// invalid byte).
func splitRunes(in []Segment) []Segment {
	var out []Segment
	for _, s := range in {
		if s.Kind != Text {
			out = append(out, s)
			continue
		}
		for t := s.Text; t != ""; {
			_, n := utf8.DecodeRuneInString(t)
			out = append(out, tx(t[:n]))
			t = t[n:]
		}
	}
	return out
}

// TestLinesLongLineBounded writes 10 MiB without a newline and checks that
// the default cap hands it out in 1 MiB pieces, without newlines, instead
// of growing.
func TestLinesLongLineBounded(t *testing.T) {
	var l Lines
	chunk := tx(strings.Repeat("x", 4096))
	var out []byte
	maxCap := 0
	for range 10 << 8 {
		out = l.Write(out, chunk)
		maxCap = max(maxCap, cap(l.buf), 4*cap(l.runes))
	}
	if strings.Count(string(out), "\n") != 0 || len(out)+len(l.Partial()) != 10<<20 {
		t.Fatalf("handed out %d bytes (%d newlines), partial %d bytes", len(out), strings.Count(string(out), "\n"), len(l.Partial()))
	}
	if len(out) != 9*DefaultMaxLineBytes || len(l.Partial()) != DefaultMaxLineBytes {
		t.Fatalf("handed out %d bytes, partial %d, want pieces of %d", len(out), len(l.Partial()), DefaultMaxLineBytes)
	}
	if maxCap > 2*DefaultMaxLineBytes {
		t.Fatalf("line buffer grew to %d bytes", maxCap)
	}
}

// TestLinesBreakAfterPiece: a line whose pieces were all handed out is
// still open, so Break and a newline end it with one '\n', never two.
func TestLinesBreakAfterPiece(t *testing.T) {
	tests := []struct {
		name string
		in   []Segment
		want string // output of the writes, then of Break
	}{
		{"exactly the cap, then Break", segs(tx("abcd")), "|abcd\n"},
		{"exactly the cap, then newline", segs(tx("abcd"), tx("\n")), "abcd\n|"},
		{"over the cap, then Break", segs(tx("abcdef")), "abcd|ef\n"},
		{"over the cap in the fast path", segs(tx("abcd"), tx("efg\nh")), "abcdefg\n|h\n"},
		{"a CR after a piece", segs(tx("abcdef\rX")), "abcd|Xf\n"},
		{"a cleared rest", segs(tx("abcdef\r"), el(0)), "abcd|\n"},
		{"nothing", nil, "|"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Lines{MaxLineBytes: 4}
			var out []byte
			for _, s := range tt.in {
				out = l.Write(out, s)
			}
			got := string(out) + "|" + string(l.Break(nil))
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if again := l.Break(nil); len(again) != 0 {
				t.Fatalf("a second Break gave %q", again)
			}
		})
	}
}

// TestLinesCRLFFastPathAllocs pins that plain CRLF output does not allocate
// per line.
func TestLinesCRLFFastPathAllocs(t *testing.T) {
	var l Lines
	seg := tx(strings.Repeat("12345\r\n", 500))
	dst := make([]byte, 0, 8192)
	allocs := testing.AllocsPerRun(100, func() {
		dst = l.Write(dst[:0], seg)
	})
	if allocs != 0 || string(dst) != strings.Repeat("12345\n", 500) {
		t.Fatalf("%v allocs, output %q...", allocs, dst[:20])
	}
}
