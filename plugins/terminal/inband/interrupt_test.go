package inband

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// An interrupt that comes after a command's line was typed, before the
// shell took it, is typed at the begin marker. The shell is still the
// terminal's foreground then, for a moment, and a character that lands in
// that moment never reaches the command. The shell must come back with the
// command abandoned every time, and not after the send's timeout.
func TestInterruptAtBegin(t *testing.T) {
	s := spawn(t)
	for range 60 {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		send, err := s.Exec(ctx, termapi.ExecRequest{Command: "sleep 1000", Stream: true, Timeout: waitLong})
		if err != nil {
			t.Fatal(err)
		}
		awaitWritten(t, s)
		send.Cancel()
		_, res := drain(t, ctx, send)
		cancel()
		if !res.Prompt || res.Exec.State != termapi.ExecAbandoned {
			t.Fatalf("an interrupted command settled %s (prompt %v) with %+v", res.Reason, res.Prompt, *res.Exec)
		}
	}
}

// awaitWritten waits until the writer has typed the current command's
// whole line. The writer leaves no other trace of it, so this polls.
func awaitWritten(t *testing.T, s *Session) {
	deadline := time.Now().Add(waitLong)
	for {
		s.mu.Lock()
		written := s.cur != nil && s.cur.written
		s.mu.Unlock()
		if written {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the command's line was never written")
		}
		runtime.Gosched()
	}
}

// An interrupt typed again (the retype of a character that may have been
// lost) is for the command it interrupted: once that command is over, it
// must not reach the next one, even one started at once.
func TestRetypeEndsWithItsCommand(t *testing.T) {
	s := spawn(t)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		send, err := s.Exec(ctx, termapi.ExecRequest{Command: "cat", Stream: true, Timeout: waitLong})
		if err != nil {
			t.Fatal(err)
		}
		awaitBegun(t, s)
		send.Cancel()
		if _, res := drain(t, ctx, send); !res.Prompt {
			t.Fatalf("an interrupted cat settled %s", res.Reason)
		}
		cancel()
		// The retype would land within its first 250 ms.
		mustComplete(t, s, "sleep 0.6; echo done", 0)
	}
}

// awaitBegun waits until the shell has taken the current command's line
// (its begin marker). Nothing else shows it, so this polls.
func awaitBegun(t *testing.T, s *Session) {
	deadline := time.Now().Add(waitLong)
	for {
		s.mu.Lock()
		begun := s.cur != nil && s.cur.begun
		s.mu.Unlock()
		if begun {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell never took the command's line")
		}
		runtime.Gosched()
	}
}

// slowSignals is a link whose typed signal characters take a while to
// arrive, as over a slow network: the stdin proof, which comes by another
// path, sees the program still waiting after the character was written.
type slowSignals struct{ *ptyLink }

func (l slowSignals) Write(p []byte) (int, error) {
	if len(p) == 1 && (p[0] == ctrlC || p[0] == ctrlZ) {
		time.Sleep(300 * time.Millisecond)
	}
	return l.ptyLink.Write(p)
}

// TestProofWaitsForTheSignal: after an interrupt, the wait is not proven
// again until the terminal has answered the signal: otherwise a program
// that the signal ends in a moment is taken for one that ignored it, and a
// caller escalates (over SSH, where nothing else can reach it, by
// resetting the shell).
func TestProofWaitsForTheSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	o := options("pty-slow-signals")
	o.StartProof = localProof(t, false)
	s, err := Start(ctx, slowSignals{newPTYLink(t)}, "", o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx, "test over")
	for range 3 {
		send, err := s.Exec(ctx, termapi.ExecRequest{Command: "read x", Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, res := drain(t, ctx, send); res.Reason != termapi.WaitStdinRead || res.Prompt {
			t.Fatalf("read x settled %s (prompt %v), want stdin_read", res.Reason, res.Prompt)
		}
		if _, err := s.Signal(ctx, termapi.SIGINT); err != nil {
			t.Fatal(err)
		}
		send, err = s.StartSend(ctx, termapi.SendRequest{Stream: true, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, res := drain(t, ctx, send); !res.Prompt {
			t.Fatalf("after SIGINT the send settled %s (prompt %v), want the prompt", res.Reason, res.Prompt)
		}
	}
}
