//go:build linux

package terminalbash

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// TestCommandTerminals: each command writes to a terminal of its own, so
// what a job prints after the command that started it has ended is
// background output (the next Exec's, or the running command's result's),
// never the output of the command running then; stdout and stderr keep
// their order; a terminal no job holds serves the next command, and one a
// job holds is closed once the job has let go.
func TestCommandTerminals(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	own := func() string {
		out, _ := mustExec(t, s, "readlink /proc/$$/fd/1")
		return strings.TrimSpace(out)
	}
	first := own()
	if !strings.HasPrefix(first, "/dev/pts/") || first == s.term.slavePath {
		t.Fatalf("a command writes to %q; the session's terminal is %q", first, s.term.slavePath)
	}
	if again := own(); again != first {
		t.Fatalf("a terminal no job holds is not reused: %q, then %q", first, again)
	}
	if out, _ := mustExec(t, s, "echo a; echo b >&2; echo c"); out != "a\nb\nc\n" {
		t.Fatalf("stdout and stderr: %q", out)
	}

	// A job that prints when told to, on the terminal of its command.
	dir := t.TempDir()
	gate, said := filepath.Join(dir, "gate"), filepath.Join(dir, "said")
	for _, p := range []string{gate, said} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, s, fmt.Sprintf(`(while read -r word < %q; do echo "job-$word"; echo > %q; done) &`, gate, said))
	if next := own(); next == first {
		t.Fatalf("the job's terminal %q serves the next command too", next)
	}
	// Between commands: the next Exec's background output.
	if err := os.WriteFile(gate, []byte("between\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(said); err != nil {
		t.Fatal(err)
	}
	out, res := mustExec(t, s, "echo own-1")
	if out != "own-1\n" || !strings.Contains(res.Exec.Background, "job-between\n") {
		t.Fatalf("after a job printed between commands: output %q, background %q", out, res.Exec.Background)
	}
	// During a command: that command's background output.
	out, res = mustExec(t, s, fmt.Sprintf(`echo own-2; echo during > %q; read < %q; echo own-3`, gate, said))
	if out != "own-2\nown-3\n" || res.Exec.Background != "job-during\n" {
		t.Fatalf("while a job printed during a command: output %q, background %q", out, res.Exec.Background)
	}

	mustExec(t, s, "kill %1; wait %1")
	s.mu.Lock()
	n := len(s.cmdTerms)
	s.mu.Unlock()
	// The job's terminal closes once nothing holds it: the next commands
	// run on the one the session keeps.
	for n > 1 {
		mustExec(t, s, "true")
		s.mu.Lock()
		n = len(s.cmdTerms)
		s.mu.Unlock()
	}
}

// TestCommandTerminalSize: a command's terminal has the session's size,
// and follows a resize.
func TestCommandTerminalSize(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	size := `python3 -c 'import os; s = os.get_terminal_size(1); print(s.lines, s.columns)'`
	if out, _ := mustExec(t, s, size); out != "40 160\n" {
		t.Fatalf("size %q", out)
	}
	if err := s.Resize(context.Background(), termapi.Size{Rows: 30, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	if out, _ := mustExec(t, s, size); out != "30 100\n" {
		t.Fatalf("size after the resize %q", out)
	}
}

// TestStdinWaitProofOnCommandTerminal: a command's program that waits for
// input is proven to wait when it runs on a terminal of its own, whether
// it reads the session's terminal (stdin, /dev/tty) or its own (opened
// anew through its stdout's name); the silence bound (600 s) plays no
// part. A signal then brings the shell back.
func TestStdinWaitProofOnCommandTerminal(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.txt")
	if err := os.WriteFile(long, []byte(strings.Repeat("a line\n", 500)), 0o644); err != nil {
		t.Fatal(err)
	}
	be := newTestBackend(t, nil)
	for _, tt := range []struct {
		name, cmd string
		sig       termapi.Signal
	}{
		{"read builtin", "read x", termapi.SIGINT},
		{"cat", "cat", termapi.SIGINT},
		{"tty", "head -1 /dev/tty", termapi.SIGINT},
		{"own terminal", "head -1 </dev/fd/1", termapi.SIGINT},
		{"python", "python3 -i", termapi.SIGTERM},
		{"pager", "less " + long, termapi.SIGTERM},
	} {
		t.Run(tt.name, func(t *testing.T) {
			program, _, _ := strings.Cut(tt.cmd, " ")
			if _, err := exec.LookPath(program); err != nil && program != "read" {
				t.Skipf("%s is not installed: %v", program, err)
			}
			s := spawn(t, be, dir)
			first, _ := mustExec(t, s, "readlink /proc/$$/fd/1")
			if strings.TrimSpace(first) == s.term.slavePath {
				t.Fatalf("commands write to the session's terminal %q", first)
			}
			_, res := execute(t, s, tt.cmd)
			if res.Reason != termapi.WaitStdinRead || res.Prompt {
				t.Fatalf("settled %s (prompt %v), want stdin_read on a waiting program: %q", res.Reason, res.Prompt, res.Viewport)
			}
			if _, err := s.Signal(context.Background(), tt.sig); err != nil {
				t.Fatal(err)
			}
			awaitPrompt(t, s)
			if out, _ := mustExec(t, s, "echo back"); out != "back\n" {
				t.Errorf("after %s: %q", tt.sig, out)
			}
		})
	}
}
