package bashtool

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestANSICRoundTrip runs the quoted form through a real bash and checks
// that it gives back the exact bytes, for the inputs that break naive
// quoting, and that the typed form is printable ASCII only.
func TestANSICRoundTrip(t *testing.T) {
	inputs := []string{
		"plain",
		"it's",
		`back\slash \n not a newline`,
		"tab\there",
		"multi\nline\n",
		"cr\r\n",
		"bang! !! !$",
		"ctrl \x03 \x1a \x04 \x1b[31m",
		"unicode 中文 ✓ é",
		"$HOME `x` $(y) \"q\"",
		"\x7f del",
		"hex-looking \x01" + "f after", // \x01 then a literal f
		"invalid utf-8 \xff\xfe",
	}
	for _, in := range inputs {
		var b strings.Builder
		writeANSIC(&b, in)
		typed := b.String()
		for i := 0; i < len(typed); i++ {
			if c := typed[i]; c < 0x20 || c >= 0x7f || c == '!' {
				t.Fatalf("%q: typed form %q has byte %#x", in, typed, c)
			}
		}
		out, err := exec.Command("bash", "--noprofile", "--norc", "-c", "printf '%s' "+typed).Output()
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if string(out) != in {
			t.Fatalf("round trip of %q gave %q", in, out)
		}
	}
}

func TestWrapRunsInCurrentShellAndPrintsMarkers(t *testing.T) {
	m := markers{id: "0123abcd"}
	line, ok := m.wrap("X=1; f() { echo f$X; }; declare -A map=([k]=v); f; false")
	if !ok {
		t.Fatal("short command not typed inline")
	}
	file := filepath.Join(t.TempDir(), "cmd")
	if err := os.WriteFile(file, []byte("echo from-file $X ${map[k]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := initScript + "\n" + line + "\n" + newMarkers().wrapFile(file) + "\necho after=$X"
	// Without a terminal, stty fails (harmlessly) and /dev/tty cannot be
	// opened: send what would go to the terminal to stdout.
	script = strings.ReplaceAll(script, "/dev/tty", "/dev/stdout")
	out, err := exec.Command("bash", "--noprofile", "--norc", "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := regexp.MustCompile(`__dsh_[0-9a-f]{8}_`).ReplaceAllString(string(out), "__dsh_ID_")
	want := "__dsh_ID_start__\nf1\n__dsh_ID_jobs__\n__dsh_ID_end_1__\n" +
		"__dsh_ID_start__\nfrom-file 1 v\n__dsh_ID_jobs__\n__dsh_ID_end_0__\nafter=1\n"
	if got != want {
		t.Fatalf("output\n%q\nwant\n%q", got, want)
	}
	for _, typed := range []string{line, initScript} {
		if strings.Contains(typed, m.start()) || strings.Contains(typed, m.endPrefix()) {
			t.Fatal("typed text contains a whole marker: an echo of it would match")
		}
	}
	if _, ok := m.wrap(strings.Repeat("x", typedLimit+1)); ok {
		t.Fatal("a long command is typed inline")
	}
}

func TestParseEnd(t *testing.T) {
	m := markers{id: "abc"}
	end := m.endPrefix()

	tests := []struct {
		text       string
		at, status int
		ok         bool
	}{
		{end + "0__\n", 0, 0, true},
		{"out" + end + "127__", 3, 127, true},
		{end + "__", 0, 0, false},                           // no digits
		{end + "12", 0, 0, false},                           // torn: no closing underscores
		{end + "x__ " + end + "5__", len(end) + 4, 5, true}, // first is not a marker
		{"__dsh_other_end_0__", 0, 0, false},
	}
	for _, tt := range tests {
		at, _, status, ok := m.parseEnd(tt.text)
		if ok != tt.ok || ok && (at != tt.at || status != tt.status) {
			t.Errorf("parseEnd(%q) = %d, %d, %v; want %d, %d, %v", tt.text, at, status, ok, tt.at, tt.status, tt.ok)
		}
	}
}
