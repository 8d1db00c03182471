package terminal

import (
	"context"
	"fmt"
	"sync"
)

// Invariants are the service's runtime invariants (host.Checker). They
// keep what they saw between runs.
func (s *Service) Invariants() map[string]func(context.Context) error {
	w := &watch{seen: make(map[string]*record), orphans: make(map[*record]bool)}
	return map[string]func(context.Context) error{
		"sessions-have-live-owners":    func(context.Context) error { return s.checkOwners(w) },
		"session-ids-are-never-reused": func(context.Context) error { return s.checkIDs(w) },
	}
}

// watch is what the invariants remember between runs.
type watch struct {
	mu      sync.Mutex
	seen    map[string]*record // every session id published, and its record
	orphans map[*record]bool   // sessions of a dead owner at the last run
}

// checkOwners: a published session whose owner is no longer live is being
// disposed of with it. One seen so at two runs in a row, with no close in
// progress and the owner's cleanup not started, was left behind: nothing
// will ever close it. (Two runs, because an owner stops being live an
// instant before its cleanup starts.)
func (s *Service) checkOwners(w *watch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := make(map[*record]bool)
	var err error
	for _, r := range s.sessions {
		if r.state.owner.Live() || r.state.disposed || r.closing != nil {
			continue
		}
		now[r] = true
		if w.orphans[r] && err == nil {
			err = fmt.Errorf("session %s of owner %q outlives its owner, and nothing is closing it", r.id, r.state.owner.ID())
		}
	}
	w.orphans = now
	return err
}

// checkIDs: a session id names one session for the life of the service:
// an id published again, for another session, would let a caller reach a
// shell it never spawned.
func (s *Service) checkIDs(w *watch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, r := range s.sessions {
		// A session an owner took back from its keeper (Adopt) is the same
		// shell under the same id, for the same owner key.
		if old, ok := w.seen[id]; ok && old != r && !(r.adopted && old.state.owner.ID() == r.state.owner.ID()) {
			return fmt.Errorf("session id %s was published twice, for two sessions", id)
		}
		w.seen[id] = r
		if r.gone {
			return fmt.Errorf("session %s is closed and removed, yet still listed", id)
		}
	}
	return nil
}
