//go:build linux

package terminalbash

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRecordParser(t *testing.T) {
	end := record{kind: recordEnd, nonce: "0123456789abcdef", status: 3, read: true, pid: 42, flags: "himBs"}
	tests := []struct {
		name   string
		chunks []string
		want   []record
	}{
		{"one record", []string{"\x00E 0123456789abcdef 3 1 42 himBs\n"}, []record{end}},
		{"job notices come first", []string{"[1]+  Done  sleep 1\n\x00E 0123456789abcdef 3 1 42 himBs\n"},
			[]record{{kind: recordEnd, nonce: end.nonce, status: 3, read: true, pid: 42, flags: "himBs", notices: "[1]+  Done  sleep 1\n"}}},
		{"torn across reads", []string{"\x00E 0123456789ab", "cdef 3 1 42 himBs", "\n"}, []record{end}},
		{"two in one read", []string{"\x00A - 130 0 42 hB\n\x00R - 0 0 42 hB\n"},
			[]record{{kind: recordPrompt, nonce: "-", status: 130, pid: 42, flags: "hB"}, {kind: recordReady, nonce: "-", pid: 42, flags: "hB"}}},
		{"no flags", []string{"\x00R - 0 0 7\n"}, []record{{kind: recordReady, nonce: "-", pid: 7}}},
		{"garbage is skipped", []string{"\x00X 1 2 3 4\n\x00E short\n\x00E n x 1 42 f\n\x00E n 0 1 42 f g h\n\x00R - 0 0 9 f\n"},
			[]record{{kind: recordReady, nonce: "-", pid: 9, flags: "f"}}},
		{"no NUL, no record", []string{"E 0123456789abcdef 0 1 42 himBs\n"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p recordParser
			var got []record
			for _, c := range tt.chunks {
				got = p.feed([]byte(c), got)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDropRunning(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"none", "", ""},
		{"done kept", "[1]+  Done                    sleep 1\n", "[1]+  Done                    sleep 1\n"},
		{"running dropped", "[1]+  Running                 sleep 100 &\n", ""},
		{"multi-line running dropped with its lines",
			"[1]-  Running                 for i in 1 2; do\n    sleep 9;\ndone &\n[2]+  Exit 3                  false\n",
			"[2]+  Exit 3                  false\n"},
		{"a command that says Running stays", "[1]+  Done                    echo Running \n", "[1]+  Done                    echo Running \n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dropRunning(tt.in); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// The parser holds at most maxPendingRecord bytes of a record that never
// ends.
func TestRecordParserBound(t *testing.T) {
	var p recordParser
	chunk := []byte(strings.Repeat("x", 1<<16))
	for range 40 {
		p.feed(chunk, nil)
	}
	if len(p.buf) > maxPendingRecord {
		t.Fatalf("holds %d bytes, bound %d", len(p.buf), maxPendingRecord)
	}
	if got := p.feed([]byte("\x00R - 0 0 1\n"), nil); len(got) != 1 {
		t.Fatalf("after the flood: %+v", got)
	}
}

func TestCommandLine(t *testing.T) {
	const end = `;{ \__dsh_e N;} 2>/dev/null >>"$__dsh_O"` + "\n"
	long := strings.Repeat("x", maxInlineCommand+1)
	for _, tt := range []struct {
		command, flags, want string
		inline               bool
	}{
		{"true", "himBH", `\builtin eval -- 'true'` + end, true},
		{"echo 'a b'", "himBH", `\builtin eval -- 'echo '\''a b'\'''` + end, true},
		{"echo hi", "himuxBH", `\builtin set -u;\builtin eval -- 'builtin set -x;echo hi'` + end, true},
		{"echo hi", "himvBH", `\builtin set -v;\builtin eval -- 'echo hi'` + end, true},
		{"echo 中文", "himBH", `\__dsh_bc 11;\builtin eval -- "$__dsh_c"` + end, false},
		{"cat <<E\nx\nE", "himBH", `\__dsh_b 11;\builtin eval -- "$__dsh_c"` + end, false},
		{"a\tb", "himBH", `\__dsh_b 3;\builtin eval -- "$__dsh_c"` + end, false},
		{"echo 中", "himuvxBH", `\__dsh_bc 8;\builtin set -uv;\builtin eval -- "builtin set -x;$__dsh_c"` + end, false},
		{long, "himBH", `\__dsh_b 2049;\builtin eval -- "$__dsh_c"` + end, false},
	} {
		line, inline := appendCommandLine(nil, tt.command, "N", tt.flags, "")
		got := string(line)
		if got != tt.want || inline != tt.inline {
			t.Errorf("%q %s:\n got %q inline %v\nwant %q inline %v", tt.command, tt.flags, got, inline, tt.want, tt.inline)
		}
		for _, c := range []byte(strings.TrimSuffix(got, "\n")) {
			if c < 0x20 || c >= 0x7f {
				t.Errorf("%q: the typed line holds byte %#x", tt.command, c)
			}
		}
	}
}

// The plumbing installs itself whatever its paths hold: bash sources it,
// keeps the hook exactly, and reports ready into the out channel.
func TestPlumbingInstalls(t *testing.T) {
	dir := filepath.Join(t.TempDir(), `it's "odd" $dir`)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	in, out, init := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "init")
	hook := promptHook(1, init)
	if err := os.WriteFile(init, []byte(plumbing(hook, in, out)), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command("bash", "--norc", "--noprofile", "-c", `. "$1" && printf '%s' "$__dsh_g"`, "bash", init).CombinedOutput()
	if err != nil || string(got) != hook {
		t.Fatalf("sourcing the plumbing: %v\n got %q\nwant %q", err, got, hook)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var p recordParser
	if recs := p.feed(data, nil); len(recs) != 1 || recs[0].kind != recordReady {
		t.Fatalf("out holds %q, want one ready record", data)
	}
}
