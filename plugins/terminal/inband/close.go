package inband

import (
	"context"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Close hangs up: it closes the link, whose far end then closes the
// terminal (an SSH server at logout, a container runtime when the exec's
// stream ends), and the shell gets SIGHUP and passes it on to its jobs. It
// returns once every goroutine of the session, and the link's Close, have
// ended. What happens to processes that ignore SIGHUP or left the shell's
// session is the link's to say.
//
// Close is idempotent and concurrent calls share one close; if ctx ends
// before the goroutines have, a later call waits again.
func (s *Session) Close(ctx context.Context, reason string) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		if !s.status.Exited {
			s.status = termapi.Status{Exited: true, ExitCode: -1, Signal: "SIGHUP"}
		}
		if sn := s.Live; sn != nil {
			s.settleLocked(sn, termapi.WaitSessionExit)
		}
		// No prober is started again from now on (restartProofLocked);
		// one being started is closed by its starter.
		s.restartWait = s.restartDone
		s.mu.Unlock()
		s.log.Debug("closing the session", "reason", reason)
		close(s.quit)
		s.closeLink()
		s.mu.Lock()
		prober := s.prober
		s.mu.Unlock()
		if prober != nil {
			if err := prober.Close(); err != nil {
				s.log.Debug("closing the stdin probe", "err", err)
			}
		}
	})
	s.mu.Lock()
	waits := []chan struct{}{s.readDone, s.waitDone, s.clockDone, s.writeDone}
	if s.restartWait != nil {
		waits = append(waits, s.restartWait)
	}
	s.mu.Unlock()
	for _, done := range waits {
		select {
		case <-done:
		case <-ctx.Done():
			return s.Errorf("close: %w", context.Cause(ctx))
		}
	}
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	s.mu.Unlock()
	if first && s.opts.Forget != nil {
		s.opts.Forget(s)
	}
	return nil
}
