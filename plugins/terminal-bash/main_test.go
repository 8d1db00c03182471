//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

func TestMain(m *testing.M) { terminaltest.Main(m) }

const waitLong = terminaltest.WaitLong

// testConfig is the default config with the silence tier pushed out of
// reach, so only a prompt or a proof can settle a send quickly, and short
// grace periods, so cleanup of stubborn processes does not drag.
func testConfig() *Config {
	cfg := DefaultConfig()
	cfg.IdleSilenceMs = 600000
	cfg.TimeoutMs = 60000
	cfg.DisposeGraceMs = 500
	return cfg
}

func newTestBackend(t testing.TB, edit func(*Config)) *Backend {
	t.Helper()
	cfg := testConfig()
	if edit != nil {
		edit(cfg)
	}
	b, err := NewBackend(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := b.Invariants()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("backend close: %v", err)
		}
	})
	// The runtime invariants hold at every test's end, before the close.
	t.Cleanup(func() {
		for name, check := range checks {
			if err := check(context.Background()); err != nil {
				t.Errorf("invariant %s: %v", name, err)
			}
		}
	})
	return b
}

// spawn starts a session whose close the test checks at its end: no
// error, and the shell is gone.
func spawn(t testing.TB, b *Backend, cwd string) *session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	ts, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-test", OwnerID: "owner-test", Cwd: cwd})
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	s := ts.(*session)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := s.Close(ctx, "test over"); err != nil {
			t.Errorf("close: %v", err)
		}
		if s.target.Shell.Alive() {
			t.Errorf("shell %d still alive after close", s.pid)
		}
	})
	return s
}

// sendOpts tunes one send.
type sendOpts struct {
	noSubmit bool
	timeout  time.Duration
	stream   bool
}

// run sends text and waits for the send to settle.
func run(t testing.TB, s *session, text string, o sendOpts) termapi.SendResult {
	t.Helper()
	sn := start(t, s, text, o)
	return wait(t, sn)
}

func start(t testing.TB, s *session, text string, o sendOpts) termapi.Send {
	t.Helper()
	sn, err := s.StartSend(context.Background(), termapi.SendRequest{
		Text: text, Submit: !o.noSubmit, Timeout: o.timeout, Stream: o.stream,
	})
	if err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
	return sn
}

func wait(t testing.TB, sn termapi.Send) termapi.SendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	res, err := sn.Wait(ctx)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return res
}

// mustExec runs command through Exec, streaming, and requires it to
// complete; it returns the output (with the line being written last) and
// the result.
func mustExec(t testing.TB, s *session, command string) (string, termapi.SendResult) {
	t.Helper()
	out, res := execute(t, s, command)
	if res.Exec == nil || res.Exec.State != termapi.ExecCompleted || !res.Prompt {
		t.Fatalf("%q: settled %s (prompt %v) with %+v, want completed", command, res.Reason, res.Prompt, res.Exec)
	}
	return out, res
}

// execute runs command through Exec, streaming, until its first settle.
func execute(t testing.TB, s *session, command string) (string, termapi.SendResult) {
	t.Helper()
	sn, err := s.Exec(context.Background(), termapi.ExecRequest{Command: command, Stream: true, Captured: true})
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	out := drainOutput(t, sn)
	res := wait(t, sn)
	return out + res.Viewport[strings.LastIndexByte(res.Viewport, '\n')+1:], res
}

// mustPrompt types text and requires the send to settle with the shell
// back at its prompt.
func mustPrompt(t testing.TB, s *session, text string) termapi.SendResult {
	t.Helper()
	res := run(t, s, text, sendOpts{})
	if res.Reason != termapi.WaitStdinRead || !res.Prompt {
		t.Fatalf("%q settled %s (prompt %v) with viewport %q, want stdin_read at the prompt", text, res.Reason, res.Prompt, res.Viewport)
	}
	return res
}

// awaitPrompt waits, with an empty send, for the shell to be back at its
// prompt, as a caller must after a signal before typing: the signal's
// effect (a job dying, bash reaching its prompt) takes a moment, and text
// typed meanwhile would go to whoever still reads the terminal.
func awaitPrompt(t testing.TB, s *session) {
	t.Helper()
	res := run(t, s, "", sendOpts{noSubmit: true})
	if res.Reason != termapi.WaitStdinRead || !res.Prompt {
		t.Fatalf("waiting for the prompt: %s (prompt %v) %q", res.Reason, res.Prompt, res.Viewport)
	}
}

// outputLines is the output of a settled send, line by line. Nothing
// typed is echoed and the prompt is empty, so that is all the viewport
// holds.
func outputLines(vp string) []string {
	if vp == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(vp, "\n"), "\n")
}

// awaitLine pulls output until a line equal to want arrives.
func awaitLine(t testing.TB, sn termapi.Send, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	for {
		text, err := sn.Output(ctx)
		if err != nil {
			t.Fatalf("waiting for line %q: %v", want, err)
		}
		for line := range strings.Lines(text) {
			if strings.TrimSuffix(line, "\n") == want {
				return
			}
		}
	}
}

// drainOutput pulls every line of a send until io.EOF.
func drainOutput(t testing.TB, sn termapi.Send) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	var b strings.Builder
	for {
		text, err := sn.Output(ctx)
		if errors.Is(err, io.EOF) {
			return b.String()
		}
		if err != nil {
			t.Fatalf("output: %v", err)
		}
		b.WriteString(text)
	}
}

// reportedPID finds the pid a command printed on a line of its own (bash
// adds job notices such as "[1] 123" around it) and identifies that
// process, so the test can tell later whether that very process is alive.
func reportedPID(t testing.TB, viewport string) proc.Identity {
	t.Helper()
	lines := outputLines(viewport)
	for i := len(lines) - 1; i >= 0; i-- {
		pid, err := strconv.Atoi(lines[i])
		if err != nil || pid <= 0 {
			continue
		}
		id, err := proc.IdentityOf(pid)
		if err != nil {
			t.Fatalf("identify %d: %v", pid, err)
		}
		return id
	}
	t.Fatalf("no pid in %q", viewport)
	return proc.Identity{}
}

// openFDs counts this process's open descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}
