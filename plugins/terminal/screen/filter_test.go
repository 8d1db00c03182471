package screen

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Shorthands for expected segments.
func tx(s string) Segment         { return Segment{Kind: Text, Text: s} }
func el(mode int) Segment         { return Segment{Kind: EraseLine, Erase: mode} }
func segs(s ...Segment) []Segment { return s }

// normalize merges adjacent Text segments, which Feed does not coalesce
// across calls, so outputs of different splits can be compared.
func normalize(in []Segment) []Segment {
	var out []Segment
	for _, s := range in {
		if s.Kind == Text {
			if s.Text == "" {
				continue
			}
			if n := len(out); n > 0 && out[n-1].Kind == Text {
				out[n-1].Text += s.Text
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

// filterChunks feeds the chunks to a new Filter, flushes it, and returns
// the normalized output.
func filterChunks(maxPending int, chunks ...[]byte) []Segment {
	f := NewFilter(maxPending)
	var out []Segment
	for _, c := range chunks {
		out = f.Feed(out, c)
	}
	return normalize(f.Flush(out))
}

// checkSplits asserts that in produces want when fed in one piece, in every
// two-way split, and byte by byte.
func checkSplits(t *testing.T, maxPending int, in string, want []Segment) {
	t.Helper()
	want = normalize(want)
	check := func(how string, got []Segment) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: Feed(%q)\n got %s\nwant %s", how, in, dump(got), dump(want))
		}
	}
	b := []byte(in)
	check("one shot", filterChunks(maxPending, b))
	for i := 0; i <= len(b); i++ {
		check(fmt.Sprintf("split at %d", i), filterChunks(maxPending, b[:i], b[i:]))
	}
	bytewise := make([][]byte, len(b))
	for i := range b {
		bytewise[i] = b[i : i+1]
	}
	check("byte by byte", filterChunks(maxPending, bytewise...))
}

func dump(s []Segment) string {
	var b strings.Builder
	b.WriteString("[")
	for i, x := range s {
		if i > 0 {
			b.WriteString(" ")
		}
		switch x.Kind {
		case Text:
			fmt.Fprintf(&b, "Text%q", x.Text)
		case EraseLine:
			fmt.Fprintf(&b, "EraseLine(%d)", x.Erase)
		default:
			fmt.Fprintf(&b, "%v", x)
		}
	}
	b.WriteString("]")
	return b.String()
}

func TestFilter(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Segment
	}{
		{"empty", "", nil},
		{"plain", "hello, world", segs(tx("hello, world"))},
		{"kept controls", "a\r\nb\tc\bd\n", segs(tx("a\r\nb\tc\bd\n"))},
		{"dropped controls", "a\x00b\x01c\x07d\x7fe\x0ef\x1cg", segs(tx("abcdefg"))},
		{"utf8", "héllo €uro 🎉", segs(tx("héllo €uro 🎉"))},
		{"literal U+FFFD", "\uFFFD", segs(tx("\uFFFD"))},

		// Invalid UTF-8: one U+FFFD per byte, as a Go range loop decodes.
		{"invalid byte", "a\xffb", segs(tx("a\uFFFDb"))},
		{"bad continuation", "a\xc3(b", segs(tx("a\uFFFD(b"))},
		{"stray continuation", "\x80\xbf", segs(tx("\uFFFD\uFFFD"))},
		{"overlong slash", "\xc0\xaf", segs(tx("\uFFFD\uFFFD"))},
		{"overlong 3-byte", "\xe0\x80\xaf", segs(tx("\uFFFD\uFFFD\uFFFD"))},
		{"surrogate", "\xed\xa0\x80", segs(tx("\uFFFD\uFFFD\uFFFD"))},
		{"above U+10FFFF", "\xf4\x90\x80\x80", segs(tx("\uFFFD\uFFFD\uFFFD\uFFFD"))},
		{"truncated at flush", "x\xe2", segs(tx("x\uFFFD"))},
		{"truncated 2 of 3 at flush", "x\xe2\x82", segs(tx("x\uFFFD\uFFFD"))},
		{"truncated 3 of 4 at flush", "\xf0\x9f\x8e", segs(tx("\uFFFD\uFFFD\uFFFD"))},
		{"truncated then ASCII", "\xf0\x9fA", segs(tx("\uFFFD\uFFFDA"))},

		// CSI.
		{"SGR", "\x1b[1;31mred\x1b[0m plain", segs(tx("red plain"))},
		{"SGR colon subparams", "\x1b[38:2:255:0:0mX", segs(tx("X"))},
		{"final byte @", "\x1b[2@a\x1b[@b", segs(tx("ab"))},
		{"final byte ~", "\x1b[3~a", segs(tx("a"))},
		{"cursor moves dropped", "a\x1b[2Db\x1b[10;20Hc\x1b[?25ld", segs(tx("abcd"))},
		{"EL default", "a\x1b[Kb", segs(tx("a"), el(0), tx("b"))},
		{"EL 0", "\x1b[0K", segs(el(0))},
		{"EL 1", "\x1b[1K", segs(el(1))},
		{"EL 2", "\x1b[2K", segs(el(2))},
		{"EL leading zeros", "\x1b[002K", segs(el(2))},
		{"EL extra params", "\x1b[1;5K", segs(el(1))},
		{"EL 3 dropped", "\x1b[3K", nil},
		{"EL huge dropped", "\x1b[99999999999999999999K", nil},
		{"DECSEL dropped", "\x1b[?2K", nil},
		{"EL with intermediate dropped", "\x1b[2 K", nil},
		// An EL 0 that cannot erase anything is dropped: after a '\n' and
		// no '\r' or '\b' since, nothing is at or after the cursor.
		{"EL 0 at line end dropped", "line\n\x1b[Kx\x1b[0Ky", segs(tx("line\nxy"))},
		{"EL 0 after CRLF dropped", "a\r\nb\x1b[K", segs(tx("a\r\nb"))},
		{"EL 0 kept at stream start", "a\x1b[K", segs(tx("a"), el(0))},
		{"EL 0 kept after CR", "x\nab\r\x1b[K", segs(tx("x\nab\r"), el(0))},
		{"EL 0 kept after BS", "x\nab\b\x1b[K", segs(tx("x\nab\b"), el(0))},
		{"EL 0 kept after CHA", "x\nab\x1b[G\x1b[K", segs(tx("x\nab\r"), el(0))},
		{"EL 0 kept after CR in CSI", "x\nab\x1b[1\r\x1b[K", segs(tx("x\nab\r"), el(0))},
		{"EL 1 and 2 kept at line end", "x\n\x1b[1K\x1b[2K", segs(tx("x\n"), el(1), el(2))},
		{"EL 0 after EL at line end", "x\n\x1b[2K\x1b[K", segs(tx("x\n"), el(2))},
		{"CHA home is CR", "ab\x1b[Gc\x1b[1Gd\x1b[0Ge", segs(tx("ab\rc\rd\re"))},
		{"CHA elsewhere dropped", "ab\x1b[5Gc", segs(tx("abc"))},
		{"C1 CSI", "\u009b31mX\u009b2K", segs(tx("X"), el(2))},
		{"controls inside CSI run", "\x1b[1\r\n\x07;2m", segs(tx("\r\n"))},
		{"ESC restarts CSI", "\x1b[12\x1b[2K", segs(el(2))},
		{"CAN cancels CSI", "\x1b[12\x18x", segs(tx("x"))},
		{"SUB cancels CSI", "\x1b[12\x1ax", segs(tx("x"))},
		{"DEL ignored in CSI", "\x1b[2\x7fK", segs(el(2))},
		{"non-ASCII abandons CSI", "\x1b[12é", segs(tx("é"))},

		// OSC.
		{"title BEL", "a\x1b]0;title\x07b", segs(tx("ab"))},
		{"title ST", "a\x1b]2;title\x1b\\b", segs(tx("ab"))},
		{"title C1 ST", "a\x1b]2;title\u009cb", segs(tx("ab"))},
		{"C1 OSC", "a\u009d0;t\x07b", segs(tx("ab"))},
		// OSC 133;D was once a private prompt marker; now it is dropped
		// like any other OSC.
		{"133;D BEL dropped", "out\x1b]133;D;0\x07dsh> ", segs(tx("outdsh> "))},
		{"133;D ST dropped", "\x1b]133;D;127\x1b\\x", segs(tx("x"))},
		{"133;D C1 dropped", "\u009d133;D;1\u009cx", segs(tx("x"))},
		{"non-ASCII inside OSC dropped", "\x1b]0;é\xff\u0085\x07x", segs(tx("x"))},
		{"controls inside OSC ignored", "\x1b]0;\x011\x7f\x07x", segs(tx("x"))},
		{"stray ST after OSC", "\x1b]0;t\x07middle\x1b\\", segs(tx("middle"))},
		{"ESC ends unterminated OSC", "\x1b]0;never ends\x1b]133;D;0\x07dsh> ", segs(tx("dsh> "))},
		{"ESC in OSC starts escape", "\x1b]0;t\x1b[2Kx", segs(el(2), tx("x"))},
		{"CAN cancels OSC", "\x1b]133;D;0\x18x\x07", segs(tx("x"))},
		{"newline inside OSC ignored", "\x1b]0;a\nb\x07c", segs(tx("c"))},

		// Other strings.
		{"DCS", "\x1bPq#0;2;0;0;0\x1b\\after", segs(tx("after"))},
		{"DCS BEL", "\x1bP+q\x07after", segs(tx("after"))},
		{"SOS", "\x1bXsos\x1b\\after", segs(tx("after"))},
		{"PM", "\x1b^pm\x1b\\after", segs(tx("after"))},
		{"APC", "\x1b_apc\x07after", segs(tx("after"))},
		{"C1 DCS", "\u0090q\u009cafter", segs(tx("after"))},

		// Two-character and intermediate escapes.
		{"save/restore", "\x1b7a\x1b8", segs(tx("a"))},
		{"keypad modes", "\x1b=a\x1b>", segs(tx("a"))},
		{"charsets", "\x1b(Ba\x1b)0b\x1b*Ac\x1b+Bd", segs(tx("abcd"))},
		{"DEC test", "\x1b#8a", segs(tx("a"))},
		{"UTF-8 select", "\x1b%Ga", segs(tx("a"))},
		{"96-charset G3", "\x1b/Aa", segs(tx("a"))},
		{"multiple intermediates", "\x1b ( Ba", segs(tx("a"))},
		{"controls inside ESC", "\x1b\r\n7a", segs(tx("\r\na"))},
		{"ESC ESC", "\x1b\x1b[2K", segs(el(2))},
		{"ESC non-ASCII", "\x1béa", segs(tx("éa"))},
		{"ESC C1", "\x1b\u009b2K", segs(el(2))},
		{"lone ESC at end", "tail\x1b", segs(tx("tail"))},
		{"other C1 dropped", "a\u0085b\u0080c\u009cd", segs(tx("abcd"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSplits(t, 64, tt.in, tt.want)
		})
	}
}

// TestFilterSanitizerSequence replays the original sanitizer's push
// sequence and checks the per-Feed output, not just the total.
func TestFilterSanitizerSequence(t *testing.T) {
	f := NewFilter(64)
	steps := []struct {
		in   string
		want []Segment
	}{
		{"red\x1b[3", segs(tx("red"))},
		{"1m text\x1b[0m \r\n", segs(tx(" text \r\n"))},
		{"\x1b]133;", nil},
		{"D;0\x07dsh> ", segs(tx("dsh> "))},
		{"a\r", segs(tx("a\r"))},
		{"\nb", segs(tx("\nb"))},
		{"tail\x1b", segs(tx("tail"))},
		{"\\more", segs(tx("more"))}, // the carried ESC made "ESC \"
		{"\xe2\x82", nil},
		{"\xac!", segs(tx("€!"))},
		{"\xe2", nil},
	}
	for i, s := range steps {
		if got := f.Feed(nil, []byte(s.in)); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d Feed(%q) = %s, want %s", i, s.in, dump(got), dump(s.want))
		}
	}
	if got, want := f.Flush(nil), segs(tx("\uFFFD")); !reflect.DeepEqual(got, want) {
		t.Fatalf("Flush = %s, want %s", dump(got), dump(want))
	}
	if got := f.Flush(nil); got != nil {
		t.Fatalf("second Flush = %s, want nothing", dump(got))
	}
}

func TestFilterCoalesces(t *testing.T) {
	f := NewFilter(0)
	got := f.Feed(nil, []byte("\x1b[32mgreen\x1b[0m and \x1b[1mbold\x1b[0m\r\nnext\x00line"))
	want := segs(tx("green and bold\r\nnextline"))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %s, want %s", dump(got), dump(want))
	}
}

func TestFilterReusesDst(t *testing.T) {
	f := NewFilter(0)
	buf := make([]Segment, 0, 8)
	out := f.Feed(buf, []byte("a\x1b[Kb"))
	if &out[0] != &buf[:1][0] {
		t.Fatal("Feed did not append into the caller's slice")
	}
	out = f.Feed(out[:0], []byte("c"))
	if !reflect.DeepEqual(out, segs(tx("c"))) {
		t.Fatalf("got %s", dump(out))
	}
}

// TestFilterOverflow pins discard mode (maxPending 8, as in the original
// sanitizer's tests) and that nothing past the bound is kept.
func TestFilterOverflow(t *testing.T) {
	long := "\x1b]0;" + strings.Repeat("p", 16)
	tests := []struct {
		name   string
		chunks []string
		want   []Segment
	}{
		{"BEL ends discard", []string{long, "more\x07tail"}, segs(tx("tail"))},
		{"ST ends discard", []string{long, "more\x1b\\tail"}, segs(tx("tail"))},
		{"ST split across feeds", []string{long, "more\x1b", "\\tail"}, segs(tx("tail"))},
		{"lone ESC then overflow", []string{"\x1b", "]0;" + strings.Repeat("p", 16), "more", "\x07tail"}, segs(tx("tail"))},
		{"C1 ST ends discard", []string{long, "more\u009ctail"}, segs(tx("tail"))},
		// A deviation from the original sanitizer, which discarded on to
		// the BEL and printed only "tail": ESC x ends the string.
		{"ESC ends discard", []string{long, "more\x1bxmore\x07tail"}, segs(tx("moretail"))},
		{"overflowed OSC is dropped", []string{"\x1b]133;D;" + strings.Repeat("0", 16) + "\x07ok"}, segs(tx("ok"))},
		{"OSC at the bound", []string{"\x1b]133;D;\x07ok"}, segs(tx("ok"))},    // 8 bytes before BEL
		{"OSC past the bound", []string{"\x1b]133;D;0\x07ok"}, segs(tx("ok"))}, // 9 bytes before BEL
		{"CSI discard", []string{"\x1b[" + strings.Repeat("1", 16), "123", "mtext"}, segs(tx("text"))},
		{"overflowed EL is dropped", []string{"\x1b[" + strings.Repeat("0", 16) + "Kx"}, segs(tx("x"))},
		{"intermediates discard", []string{"\x1b" + strings.Repeat("(", 16) + "Bx"}, segs(tx("x"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks := make([][]byte, len(tt.chunks))
			for i, c := range tt.chunks {
				chunks[i] = []byte(c)
			}
			if got := filterChunks(8, chunks...); !reflect.DeepEqual(got, normalize(tt.want)) {
				t.Fatalf("got %s, want %s", dump(got), dump(tt.want))
			}
			checkSplits(t, 8, strings.Join(tt.chunks, ""), tt.want)
		})
	}

	t.Run("flush resets discard", func(t *testing.T) {
		f := NewFilter(8)
		if got := f.Feed(nil, []byte(long)); got != nil {
			t.Fatalf("got %s", dump(got))
		}
		if got := f.Flush(nil); got != nil {
			t.Fatalf("Flush = %s", dump(got))
		}
		if got := f.Feed(nil, []byte("text")); !reflect.DeepEqual(got, segs(tx("text"))) {
			t.Fatalf("after Flush got %s", dump(got))
		}
	})
}

// TestFilterHostileBounded feeds the likes of printf '\e]'; yes and checks
// that memory stays within the bound and output resumes after the
// terminator.
func TestFilterHostileBounded(t *testing.T) {
	tests := []struct{ intro, body, end string }{
		{"\x1b]", "y\n", "\x07"},
		{"\x1bP", "y\n", "\x1b\\"},
		{"\x1b[", "1;", "m"},
		{"\x1b(", "((", "B"},
	}
	for _, tt := range tests {
		f := NewFilter(64)
		out := f.Feed(nil, []byte(tt.intro))
		chunk := []byte(strings.Repeat(tt.body, 2048))
		for range 256 { // 1 MiB
			out = f.Feed(out, chunk)
			if cap(f.pay) > 128 {
				t.Fatalf("%q: payload buffer grew to %d", tt.intro, cap(f.pay))
			}
		}
		if len(out) != 0 {
			t.Fatalf("%q: discarded sequence leaked %s", tt.intro, dump(out[:1]))
		}
		got := normalize(f.Flush(f.Feed(nil, []byte(tt.end+"after"))))
		if want := segs(tx("after")); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: after terminator got %s, want %s", tt.intro, dump(got), dump(want))
		}
	}
}

func TestFilterFlushForgetsLineEnd(t *testing.T) {
	f := NewFilter(0)
	f.Flush(f.Feed(nil, []byte("x\n")))
	// A new stream may meet a renderer mid-line: the EL must go through.
	if got, want := f.Feed(nil, []byte("\x1b[K")), segs(el(0)); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %s, want %s", dump(got), dump(want))
	}
}

func TestFilterDefaultMaxPending(t *testing.T) {
	if f := NewFilter(0); f.maxPending != DefaultMaxPending {
		t.Fatalf("maxPending = %d", f.maxPending)
	}
	if f := NewFilter(-5); f.maxPending != DefaultMaxPending {
		t.Fatalf("maxPending = %d", f.maxPending)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Text: "Text", EraseLine: "EraseLine", 7: "Kind(7)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
