//go:build linux

package terminalbash

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// TestShellsLeaveTheHistoryFileAlone: a shell neither reads the user's
// history file, whose lines are not the agent's to see, nor writes it when
// it exits, which bash does by rewriting the file cut to its last 500
// lines; not even a file named by an inherited HISTFILE.
func TestShellsLeaveTheHistoryFileAlone(t *testing.T) {
	home := t.TempDir()
	hist := filepath.Join(home, ".bash_history")
	var lines strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&lines, "the user's line %d\n", i)
	}
	if err := os.WriteFile(hist, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	for _, inherited := range []bool{false, true} {
		t.Run(fmt.Sprintf("HISTFILE inherited %v", inherited), func(t *testing.T) {
			if inherited {
				t.Setenv("HISTFILE", hist)
			} else {
				unsetEnv(t, "HISTFILE")
			}
			s := spawn(t, newTestBackend(t, nil), home)
			out, _ := mustExec(t, s, `history; echo "HISTFILE=${HISTFILE-unset}"; env | grep -c '^HISTFILE=' || true`)
			if strings.Contains(out, "the user's line") {
				t.Errorf("the shell read the user's history:\n%s", out)
			}
			if !strings.Contains(out, "HISTFILE=unset\n0") {
				t.Errorf("the shell, or what it starts, has a HISTFILE:\n%s", out)
			}
			// exit, unlike a kill, is when bash saves its history.
			if _, res := execute(t, s, "exit"); res.Reason != termapi.WaitSessionExit {
				t.Fatalf("exit settled %s", res.Reason)
			}
			got, err := os.ReadFile(hist)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != lines.String() {
				t.Errorf("the history file changed: %d lines, from %q to %q", strings.Count(string(got), "\n"), firstLine(string(got)), lastLine(string(got)))
			}
		})
	}
}

// unsetEnv unsets name for the test, and sets it back after.
func unsetEnv(t *testing.T, name string) {
	t.Helper()
	if v, ok := os.LookupEnv(name); ok {
		t.Setenv(name, v) // restores it at the end
		os.Unsetenv(name)
	}
}

func firstLine(s string) string { return s[:strings.IndexByte(s+"\n", '\n')] }

func lastLine(s string) string {
	s = strings.TrimSuffix(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}
