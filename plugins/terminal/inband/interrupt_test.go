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
