package inband

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Every typed text is printable ASCII in bounded lines, and bash reads the
// quoted word back as the exact bytes.
func TestAppendQuoted(t *testing.T) {
	all := make([]byte, 0, 255)
	for b := 1; b < 256; b++ {
		all = append(all, byte(b))
	}
	for _, s := range []string{
		"plain text",
		`quotes ' " and \ backslash`,
		"!history !! !$",
		"lines\nand\ttabs\r\n",
		"utf-8: héllo ✓",
		string(all),
		strings.Repeat("x", 3*maxTypedLine+17),
		strings.Repeat("'", maxTypedLine), // each quote is four bytes typed
	} {
		typed := appendQuoted(nil, s)
		for i, line := range bytes.Split(typed, []byte("\n")) {
			if len(line) > maxTypedLine+8 {
				t.Fatalf("typed line %d is %d bytes, over the bound %d", i, len(line), maxTypedLine)
			}
			for _, c := range line {
				if c < 0x20 || c >= 0x7f {
					t.Fatalf("typed line %d holds byte %#x", i, c)
				}
			}
		}
		out, err := exec.Command("bash", "--norc", "--noprofile", "-c", "printf %s "+string(typed)).Output()
		if err != nil {
			t.Fatalf("bash: %v", err)
		}
		if string(out) != s {
			t.Fatalf("bash read back %q, want %q", out, s)
		}
	}
}

// The command's line names its nonce only where the plumbing takes it, never
// as the last word of a command ($_).
func TestCommandLine(t *testing.T) {
	line := string(appendCommandLines(nil, "echo hi", "0123456789abcdef", false))
	want := `\__dsh_b 0123456789abcdef -;\builtin eval -- "$__dsh_x"$'echo hi';{ \__dsh_e 0123456789abcdef -;} 2>/dev/null` + "\n"
	if line != want {
		t.Fatalf("line = %q, want %q", line, want)
	}
}

func TestParseMarker(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    marker
		ok      bool
	}{
		{"B;abc", marker{kind: markBegin, id: "abc", status: -1}, true},
		{"E;abc;0", marker{kind: markEnd, id: "abc", status: 0}, true},
		{"E;abc;130", marker{kind: markEnd, id: "abc", status: 130}, true},
		{"P;tok;2", marker{kind: markPrompt, id: "tok", status: 2}, true},
		{"P;tok;$?", marker{kind: markPrompt, id: "tok", status: -1}, true}, // promptvars off
		{"E;abc;x", marker{}, false},
		{"E;abc", marker{}, false},
		{"B;", marker{}, false},
		{"B;abc;1", marker{}, false},
		{"X;abc", marker{}, false},
		{"", marker{}, false},
		{"EE;abc;0", marker{}, false},
	} {
		got, ok := parseMarker([]byte(tc.payload))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseMarker(%q) = %+v, %v; want %+v, %v", tc.payload, got, ok, tc.want, tc.ok)
		}
	}
}

// The scanner finds the same output and markers however the stream is
// split into reads.
func TestScanner(t *testing.T) {
	long := strings.Repeat("y", maxMarker+1)
	for _, tc := range []struct {
		name, stream, out string
		marks             []string
	}{
		{"plain", "hello\r\nworld", "hello\r\nworld", nil},
		{"markers", "a\x1b]6973;B;n\x07b\x1b]6973;E;n;0\x07c", "abc", []string{"B;n", "E;n;0"}},
		{"other escapes", "\x1b[31mred\x1b]0;title\x07\x1b]69;x\x07", "\x1b[31mred\x1b]0;title\x07\x1b]69;x\x07", nil},
		{"cut by a real marker", "\x1b]6973;E;fake\x1b]6973;E;n;1\x07", "\x1b]6973;E;fake", []string{"E;n;1"}},
		{"cut by CAN", "\x1b]6973;E;\x18x\x1b]6973;P;t;0\x07", "\x1b]6973;E;\x18x", []string{"P;t;0"}},
		{"too long", "\x1b]6973;" + long + "\x07z", "\x1b]6973;" + long + "\x07z", nil},
		{"unfinished at the end", "q\x1b]6973;P;t", "q\x1b]6973;P;t", nil},
		{"prefix at the end", "q\x1b]69", "q\x1b]69", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, split := range splits(tc.stream) {
				var sc scanner
				var out []byte
				var marks []string
				emit := func(p []byte) { out = append(out, p...) }
				for _, chunk := range split {
					sc.feed([]byte(chunk), emit, func(p []byte) { marks = append(marks, string(p)) })
				}
				sc.flush(emit)
				if string(out) != tc.out || !slices.Equal(marks, tc.marks) {
					t.Fatalf("split %q: output %q, markers %q; want %q, %q", split, out, marks, tc.out, tc.marks)
				}
			}
		})
	}
}

// splits returns s whole, cut once at every position, and byte by byte.
func splits(s string) [][]string {
	out := [][]string{{s}}
	for i := 1; i < len(s); i++ {
		out = append(out, []string{s[:i], s[i:]})
	}
	bytewise := make([]string, len(s))
	for i := range s {
		bytewise[i] = s[i : i+1]
	}
	return append(out, bytewise)
}
