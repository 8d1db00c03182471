package terminalssh

import (
	"context"
	"fmt"

	"github.com/dshdev/dsh/plugins/terminal"
)

// Close hangs up: it closes the SSH session and connection, which makes
// the server close the remote terminal, and the kernel there sends SIGHUP
// to the shell, which passes it on to its jobs. It returns once every
// goroutine of the session, and of its connection, has ended. Processes
// on the remote host that ignore SIGHUP or left the shell's session
// survive it, as they survive any SSH logout: nothing on this side can
// see them.
//
// Close is idempotent and concurrent calls share one close; if ctx ends
// before the goroutines have, a later call waits again.
func (s *session) Close(ctx context.Context, reason string) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		if !s.status.Exited {
			s.status = terminal.Status{Exited: true, ExitCode: -1, Signal: "SIGHUP"}
		}
		if sn := s.live; sn != nil {
			s.settleLocked(sn, terminal.WaitSessionExit)
		}
		s.mu.Unlock()
		s.log.Debug("closing the session", "reason", reason)
		close(s.quit)
		s.remote.Close()
		s.client.Close()
	})
	for _, done := range []chan struct{}{s.readDone, s.waitDone, s.clockDone, s.writeDone, s.aliveDone} {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("terminal-ssh: session %s: close: %w", s.id, context.Cause(ctx))
		}
	}
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	s.mu.Unlock()
	if first && s.forget != nil {
		s.forget(s)
	}
	return nil
}
