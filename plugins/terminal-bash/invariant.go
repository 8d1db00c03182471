//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// reapBound is how long a session may show a running shell that is gone:
// the reaper learns of the exit through a pidfd at once, so this only
// tells a lost exit from a slow machine.
var reapBound = 10 * time.Second

// Invariants are the backend's runtime invariants, over its sessions (a
// host finds them on the plugin's instance; see host.Checker).
func (b *Backend) Invariants() map[string]func(context.Context) error {
	var mu sync.Mutex
	exited := make(map[*session]bool) // sessions seen exited
	return map[string]func(context.Context) error{
		"scrollback-within-bounds": func(context.Context) error {
			return b.eachSession(func(s *session) error {
				s.mu.Lock()
				defer s.mu.Unlock()
				if err := s.Scr.Scroll.Check(); err != nil {
					return fmt.Errorf("session %s: %w", s.id, err)
				}
				// A partial line counts as one more.
				if n, b := s.Scr.Scroll.TotalLines(), s.Scr.Scroll.Bytes(); n > s.cfg.scrollLines+1 || b > s.cfg.scrollBytes {
					return fmt.Errorf("session %s: scrollback holds %d lines and %d bytes; the config allows %d and %d", s.id, n, b, s.cfg.scrollLines, s.cfg.scrollBytes)
				}
				return nil
			})
		},
		"running-shells-exist": func(ctx context.Context) error {
			return b.eachSession(func(s *session) error { return s.checkShellExists(ctx) })
		},
		"exited-stays-exited": func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			return b.eachSession(func(s *session) error {
				s.mu.Lock()
				st := s.status
				s.mu.Unlock()
				if exited[s] && !st.Exited {
					return fmt.Errorf("session %s reported its shell exited, and now running", s.id)
				}
				if st.Exited {
					exited[s] = true
				}
				return nil
			})
		},
	}
}

// eachSession runs check on every session of the backend.
func (b *Backend) eachSession(check func(*session) error) error {
	var errs []error
	for _, s := range b.sessions.List() {
		if err := check(s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkShellExists: a session that says its shell runs has a shell. A
// shell that is gone while the session still says running is one whose
// exit the reaper has not processed yet; it must within reapBound.
func (s *session) checkShellExists(ctx context.Context) error {
	s.mu.Lock()
	running := !s.status.Exited && s.phase == sessionOpen
	shell := s.target.Shell
	s.mu.Unlock()
	if !running || shell.Alive() {
		return nil
	}
	t := time.NewTimer(reapBound)
	defer t.Stop()
	select {
	case <-s.waitDone:
		return nil
	case <-ctx.Done():
		return nil
	case <-t.C:
		return fmt.Errorf("session %s says its shell %d runs, but it has been gone for %v", s.id, s.pid, reapBound)
	}
}
