package inband

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// localProof starts probe.sh on this machine, which is the far end of a
// ptyLink: the same /proc a probe on another machine would read. With
// wchan set, jobs are judged as where the syscall files are closed to it
// (Yama's ptrace_scope 1), which this machine cannot otherwise show.
func localProof(t *testing.T, wchan bool) func(context.Context, int) (Prober, error) {
	return func(ctx context.Context, pid int) (Prober, error) {
		argv := ProbeArgv(pid)
		if wchan {
			argv = append(argv, "wchan")
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p, err := StartRemoteProof(ctx, stdout, stdin, closerFunc(func() error {
			stdin.Close()
			return cmd.Wait()
		}))
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// spawnProven starts a session on a local PTY with the probe beside it,
// and no silence bound within reach: only a proof settles a send early.
func spawnProven(t *testing.T, wchan bool) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	o := options("pty-probe")
	o.StartProof = localProof(t, wchan)
	s, err := Start(ctx, newPTYLink(t), "", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := s.Close(ctx, "test over"); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if !s.Capabilities().InputProof {
		t.Fatal("a session with a probe does not report InputProof")
	}
	return s
}

// TestRemoteProof: the probe proves a program blocked reading the
// terminal (the shell's read builtin, a job, a member of a job's group,
// through /dev/tty), and never a quiet one, one that reads a pipe, or one
// that waits on the terminal and a socket at once (a relay).
func TestRemoteProof(t *testing.T) {
	long := filepath.Join(t.TempDir(), "long")
	if err := os.WriteFile(long, bytes.Repeat([]byte("a line\n"), 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	waiting := []string{
		`read x`,
		`cat`,
		`bash -c 'read -p "Proceed? [y/N] " a'`,
		`sh -c 'sleep 0.1; cat /dev/tty'`,
		`python3 -c 'input("name: ")'`,
		// A REPL waits in select, with nothing else open.
		`python3 -i`,
		// A pager polls the terminal and a signalfd.
		"more " + long,
	}
	quiet := []string{
		`sleep 0.6`,
		`sleep 0.6 | cat`,
		`read -t 0.6 x < <(sleep 1); true`,
		// select as a sleep: no descriptor at all.
		`python3 -c 'import select; select.select([], [], [], 0.6)'`,
		// The terminal and a pipe: the pipe may be what it waits for.
		`python3 -c 'import os, select, sys; r, w = os.pipe(); select.select([sys.stdin, r], [], [], 0.6)'`,
		// The terminal and a socket, with a bound: a relay.
		`python3 -c 'import select, socket, sys; a, b = socket.socketpair(); select.select([sys.stdin, a], [], [], 0.6)'`,
		// A blocking receive on a TCP socket sleeps where a terminal read
		// does (wait_woken): only the socket tells them apart.
		`python3 -c '
import socket, struct
l = socket.create_server(("127.0.0.1", 0)); c = socket.create_connection(l.getsockname()); a, _ = l.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 600000))
try: a.recv(1)
except OSError: pass'`,
	}
	for _, mode := range []struct {
		name  string
		wchan bool
	}{{"syscall", false}, {"wchan", true}} {
		t.Run(mode.name, func(t *testing.T) {
			s := spawnProven(t, mode.wchan)
			for _, command := range waiting {
				if mode.wchan && (command == "python3 -i" || strings.HasPrefix(command, "more ")) {
					continue // select and poll are judged by the syscall file only
				}
				ctx, cancel := context.WithTimeout(context.Background(), waitLong)
				send, err := s.Exec(ctx, termapi.ExecRequest{Command: command, Stream: true})
				if err != nil {
					t.Fatal(err)
				}
				_, res := drain(t, ctx, send)
				if res.Reason != termapi.WaitStdinRead || res.Prompt || res.Exec.State != termapi.ExecRunning {
					t.Fatalf("%s: settled %s (prompt %v) with %+v, want stdin_read with the command running", command, res.Reason, res.Prompt, *res.Exec)
				}
				// SIGINT ends it; a REPL that catches it ends at EOF (^D).
				if _, err := s.Signal(ctx, termapi.SIGINT); err != nil {
					t.Fatal(err)
				}
				req := termapi.SendRequest{Stream: true}
				for range 2 {
					send, err = s.StartSend(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					if _, res = drain(t, ctx, send); res.Prompt {
						break
					}
					req.Text = "\x04"
				}
				if !res.Prompt {
					t.Fatalf("%s: after SIGINT and EOF: %s, want the prompt", command, res.Reason)
				}
				cancel()
			}
			for _, command := range quiet {
				mustComplete(t, s, command, 0)
			}
			mustComplete(t, s, "echo still here", 0)
		})
	}
}

// TestRemoteProofRefused: a far end the probe cannot serve (here: a pid
// that is no process) leaves the session without a proof, and says so in
// its capabilities; the session works as before.
func TestRemoteProofRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	o := options("pty-noproof")
	proof := localProof(t, false)
	o.StartProof = func(ctx context.Context, _ int) (Prober, error) {
		p, err := proof(ctx, 1<<30)
		if !errors.Is(err, ErrNoProof) {
			t.Errorf("a probe for no process: %v, want %v", err, ErrNoProof)
		}
		return p, err
	}
	s, err := Start(ctx, newPTYLink(t), "", o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx, "test over")
	if s.Capabilities().InputProof {
		t.Fatal("a session whose probe failed reports InputProof")
	}
	mustComplete(t, s, "echo "+strconv.Itoa(42), 0)
}

// probes starts probe.sh on this machine as localProof does, and keeps
// each probe's process, for a test that kills one; from the start numbered
// refuse on, it refuses (as a far end that lost the way to start one).
type probes struct {
	t      *testing.T
	refuse int
	mu     sync.Mutex
	procs  []*os.Process
}

func (ps *probes) start(ctx context.Context, pid int) (Prober, error) {
	ps.mu.Lock()
	n := len(ps.procs)
	ps.mu.Unlock()
	if ps.refuse > 0 && n >= ps.refuse {
		return nil, fmt.Errorf("%w: test: no more probes", ErrNoProof)
	}
	argv := ProbeArgv(pid)
	cmd := exec.Command(argv[0], argv[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ps.mu.Lock()
	ps.procs = append(ps.procs, cmd.Process)
	ps.mu.Unlock()
	return StartRemoteProof(ctx, stdout, stdin, closerFunc(func() error {
		stdin.Close()
		return cmd.Wait()
	}))
}

// kill kills the probe started last, as a far end that drops it.
func (ps *probes) kill() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if err := ps.procs[len(ps.procs)-1].Kill(); err != nil {
		ps.t.Fatal(err)
	}
}

func (ps *probes) started() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.procs)
}

// spawnWith starts a session on a local PTY with ps's probes beside it.
func spawnWith(t *testing.T, ps *probes) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	o := options("pty-probes")
	o.StartProof = ps.start
	s, err := Start(ctx, newPTYLink(t), "", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := s.Close(ctx, "test over"); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if !s.Capabilities().InputProof {
		t.Fatal("a session with a probe does not report InputProof")
	}
	return s
}

// TestRemoteProofLost: a probe that is closed answers an error of the
// proof, never a proof.
func TestRemoteProofLost(t *testing.T) {
	s := spawnProven(t, false)
	s.mu.Lock()
	p := s.prober
	s.mu.Unlock()
	if err := p.Close(); err != nil {
		t.Logf("probe close: %v", err)
	}
	if waiting, err := p.WaitingForInput(); waiting || !errors.Is(err, ErrProbeLost) {
		t.Fatalf("a closed probe answered %v, %v; want %v", waiting, err, ErrProbeLost)
	}
}

// TestRemoteProofStartedAgain: when the far end drops the probe, the
// session starts a new one, which proves waits again, the shell's own read
// builtin too (the new probe starts while the shell is in it, and knows the
// prompt's read from the old one), with the silence bound out of reach.
func TestRemoteProofStartedAgain(t *testing.T) {
	ps := &probes{t: t}
	s := spawnWith(t, ps)
	mustComplete(t, s, "export KEEP=kept", 0)
	for round, command := range []string{"read x", "cat", "read y"} {
		ps.kill()
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		send, err := s.Exec(ctx, termapi.ExecRequest{Command: command, Stream: true, Timeout: waitLong / 2})
		if err != nil {
			t.Fatal(err)
		}
		if _, res := drain(t, ctx, send); res.Reason != termapi.WaitStdinRead || res.Prompt {
			t.Fatalf("%s after the probe was dropped: settled %s (prompt %v), want stdin_read", command, res.Reason, res.Prompt)
		}
		if got := ps.started(); got != round+2 {
			t.Fatalf("%d probes started, want %d", got, round+2)
		}
		if _, err := s.Signal(ctx, termapi.SIGINT); err != nil {
			t.Fatal(err)
		}
		send, err = s.StartSend(ctx, termapi.SendRequest{Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, res := drain(t, ctx, send); !res.Prompt {
			t.Fatalf("%s: after SIGINT: %s, want the prompt", command, res.Reason)
		}
		cancel()
	}
	if got := mustComplete(t, s, `echo "$KEEP"`, 0); got != "kept\n" {
		t.Fatalf("the shell's state: %q", got)
	}
}

// TestRemoteProofNotStartedAgain: a far end where a new probe cannot start
// leaves the session without a proof, which its capabilities then say;
// sends settle by silence or their bound, and the session works.
func TestRemoteProofNotStartedAgain(t *testing.T) {
	ps := &probes{t: t, refuse: 1}
	s := spawnWith(t, ps)
	ps.kill()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: "cat", Stream: true, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, res := drain(t, ctx, send); res.Reason != termapi.WaitTimeout {
		t.Fatalf("cat without a probe settled %s, want timeout", res.Reason)
	}
	s.mu.Lock()
	done := s.restartDone
	s.mu.Unlock()
	if done == nil {
		t.Fatal("no new probe was tried")
	}
	<-done
	if s.Capabilities().InputProof {
		t.Fatal("a session whose probe was lost for good reports InputProof")
	}
	if _, err := s.Signal(ctx, termapi.SIGINT); err != nil {
		t.Fatal(err)
	}
	send, err = s.StartSend(ctx, termapi.SendRequest{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, res := drain(t, ctx, send); !res.Prompt {
		t.Fatalf("after SIGINT: %s, want the prompt", res.Reason)
	}
	mustComplete(t, s, "echo still here", 0)
}

// noisy runs argv after printing what a login shell's startup files may
// print to a command's output (a greeting), as over SSH.
func noisy(argv []string) []string {
	return append([]string{"bash", "-c", `echo "Welcome to the far end"; echo; exec "$@"`, "noisy"}, argv...)
}

// TestRemoteProofAfterStartupNoise: what the far end prints before the
// probe starts is not taken for its answer.
func TestRemoteProofAfterStartupNoise(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	o := options("pty-noisy")
	o.StartProof = func(ctx context.Context, pid int) (Prober, error) {
		argv := noisy(ProbeArgv(pid))
		cmd := exec.Command(argv[0], argv[1:]...)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p, err := StartRemoteProof(ctx, stdout, stdin, closerFunc(func() error {
			stdin.Close()
			return cmd.Wait()
		}))
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	s, err := Start(ctx, newPTYLink(t), "", o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx, "test over")
	if !s.Capabilities().InputProof {
		t.Fatal("the probe did not start after the far end's greeting")
	}
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: "cat", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, res := drain(t, ctx, send); res.Reason != termapi.WaitStdinRead || res.Prompt {
		t.Fatalf("cat settled %s (prompt %v), want stdin_read", res.Reason, res.Prompt)
	}
	if _, err := s.Signal(ctx, termapi.SIGINT); err != nil {
		t.Fatal(err)
	}
}
