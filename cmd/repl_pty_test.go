//go:build linux

package dshcmd

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyRepl is dsh repl on a real terminal, as a person runs it.
type ptyRepl struct {
	t      *testing.T
	tty    *os.File
	screen *syncBuffer // everything the terminal received
	seen   int         // how much of it waitFor has consumed
	exited chan error
}

func startPtyRepl(t *testing.T, work string) *ptyRepl {
	t.Helper()
	cmd := exec.Command(dshBinary(t), "repl", "--workdir", work)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+home, "HOME="+home, "TERM=xterm")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	r := &ptyRepl{t: t, tty: tty, screen: &syncBuffer{}, exited: make(chan error, 1)}
	go func() {
		io.Copy(r.screen, tty)
	}()
	go func() { r.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-r.exited
		}
		tty.Close()
		if t.Failed() {
			t.Logf("the terminal showed:\n%q", r.screen.String())
		}
	})
	return r
}

// typeKeys writes keys as a person types them.
func (r *ptyRepl) typeKeys(keys string) {
	r.t.Helper()
	if _, err := io.WriteString(r.tty, keys); err != nil {
		r.t.Fatal(err)
	}
}

// waitFor waits until the terminal shows want after what earlier waits
// consumed, and consumes up to it.
func (r *ptyRepl) waitFor(want string) {
	r.t.Helper()
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	for {
		s := r.screen
		s.mu.Lock()
		text := s.b.String()
		if i := strings.Index(text[r.seen:], want); i >= 0 {
			s.mu.Unlock()
			r.seen += i + len(want)
			return
		}
		if s.grew == nil {
			s.grew = make(chan struct{})
		}
		grew := s.grew
		s.mu.Unlock()
		select {
		case <-grew:
		case <-timer.C:
			r.t.Fatalf("the terminal never showed %q after %q", want, text[r.seen:])
		}
	}
}

// TestReplOnATerminal drives dsh repl on a real PTY: line editing and
// history (the arrow keys, Ctrl-R, Ctrl-L), commands over several lines
// sent as one call (a loop, a here-document), output shown while the
// command runs, and Ctrl-C interrupting a command while the shell and its
// state stay.
func TestReplOnATerminal(t *testing.T) {
	work := t.TempDir()
	r := startPtyRepl(t, work)
	r.waitFor("dsh$ ")

	// A command, then the same again from the history (up arrow).
	r.typeKeys("cd /tmp && echo a$((40+2))\r")
	r.waitFor("a42")
	r.waitFor("dsh$ ")
	r.typeKeys("\x1b[A\r")
	r.waitFor("a42")
	r.waitFor("dsh$ ")
	// Editing: left arrow twice, then insert: echo e$((6*9)).
	r.typeKeys("echo e$((6*))\x1b[D\x1b[D9\r")
	r.waitFor("e54")
	r.waitFor("dsh$ ")
	// Ctrl-R finds the earlier command by a part of it.
	r.typeKeys("\x12" + "40+2")
	r.waitFor("40+2")
	r.typeKeys("\r")
	r.typeKeys("\r")
	r.waitFor("a42")
	r.waitFor("dsh$ ")

	// A loop over three lines is one call.
	r.typeKeys("for i in 1 2\r")
	r.waitFor("> ")
	r.typeKeys("do echo n$((i*11))\r")
	r.waitFor("> ")
	r.typeKeys("done\r")
	r.waitFor("n11")
	r.waitFor("n22")
	r.waitFor("]")
	r.waitFor("dsh$ ")
	// A here-document.
	r.typeKeys("cat <<EOF\r")
	r.waitFor("> ")
	r.typeKeys("h$((3*3)) here\r")
	r.waitFor("> ")
	r.typeKeys("EOF\r")
	r.waitFor("h9 here")
	r.waitFor("dsh$ ")

	// Output shows while the command runs: the first line before the
	// command has ended.
	fifo := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r.typeKeys("echo s$((1+1)); cat " + fifo + "; echo e$((2+2))\r")
	r.waitFor("s2")
	if strings.Contains(r.screen.String()[r.seen:], "e4") {
		t.Fatal("the command ended before its gate opened")
	}
	if err := os.WriteFile(fifo, []byte("through\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.waitFor("through")
	r.waitFor("e4")
	r.waitFor("dsh$ ")

	// Ctrl-C interrupts a command; the shell, its directory and its
	// variables stay.
	r.typeKeys("export KEPT=k1; echo g$((5*5)); sleep 600\r")
	r.waitFor("g25")
	r.typeKeys("\x03")
	r.waitFor("cancels the call]")
	r.waitFor("]") // the call's status line: it ended within the wait's deadline, not in 600 s
	r.waitFor("dsh$ ")
	r.typeKeys("echo p:$PWD:$KEPT\r")
	r.waitFor("p:/tmp:k1")
	r.waitFor("dsh$ ")

	// A second Ctrl-C cancels the call: a command that ignores SIGINT is
	// ended with SIGTERM, the shell is kept, and the next result says so.
	r.typeKeys("export KEPT=k2; bash -c 'trap \"\" INT; echo h$((6*6)); sleep 600'\r")
	r.waitFor("h36")
	r.typeKeys("\x03")
	r.waitFor("cancels the call]")
	r.typeKeys("\x03")
	r.waitFor(", error]")
	r.waitFor("dsh$ ")
	r.typeKeys("echo q:$PWD:$KEPT\r")
	r.waitFor("[The previous command was cancelled after ")
	r.waitFor(" seconds and interrupted with SIGTERM. The shell and its state are kept. Its output until then:]")
	r.waitFor("h36")
	r.waitFor("q:/tmp:k2")
	r.waitFor("dsh$ ")

	// Ctrl-L clears the screen, and the prompt is drawn again.
	r.typeKeys("\x0c")
	r.waitFor("\x1b[H")
	r.waitFor("dsh$ ")

	// Ctrl-D exits.
	r.typeKeys("\x04")
	if err := recv(t, r.exited, "dsh repl to exit"); err != nil {
		t.Fatalf("dsh repl: %v", err)
	}
}
