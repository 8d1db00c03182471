package backendkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Closer is a session as Sessions keeps it.
type Closer interface {
	comparable
	Close(ctx context.Context, reason string) error
}

// Sessions is a backend's set of live sessions. Its Close ends them all
// and refuses every session added after it, so that a backend being
// unloaded leaves no shell behind, even one whose spawn was still under
// way. The zero value is ready to use.
type Sessions[S Closer] struct {
	mu       sync.Mutex
	live     map[S]struct{}
	shutdown bool
}

// Closed reports whether Close has begun: a spawn can fail early, before
// it starts anything.
func (r *Sessions[S]) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.shutdown
}

// Add keeps s, which a spawn has just started. It keeps nothing and
// reports false after Close: the spawn must close s again (see Refuse).
func (r *Sessions[S]) Add(s S) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shutdown {
		return false
	}
	if r.live == nil {
		r.live = make(map[S]struct{})
	}
	r.live[s] = struct{}{}
	return true
}

// Refuse closes s, a session Add refused, within budget, and returns
// errClosed, the backend's error for a spawn after shutdown; a
// *termapi.CleanupError carries it when the close fails too.
func Refuse[S Closer](ctx context.Context, s S, budget time.Duration, errClosed error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	if err := s.Close(cctx, "backend closed"); err != nil {
		return &termapi.CleanupError{StartErr: errClosed, CleanupErr: err}
	}
	return errClosed
}

// Remove forgets s, once it has closed.
func (r *Sessions[S]) Remove(s S) {
	r.mu.Lock()
	delete(r.live, s)
	r.mu.Unlock()
}

// List returns the live sessions, in no order.
func (r *Sessions[S]) List() []S {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]S, 0, len(r.live))
	for s := range r.live {
		out = append(out, s)
	}
	return out
}

// Close refuses later sessions and closes the live ones concurrently with
// reason. It returns when they are all gone, or joins the errors of those
// that did not close within ctx.
func (r *Sessions[S]) Close(ctx context.Context, reason string) error {
	r.mu.Lock()
	r.shutdown = true
	r.mu.Unlock()
	sessions := r.List()
	errs := make([]error, len(sessions))
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Go(func() { errs[i] = s.Close(ctx, reason) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Described is a session that describes itself for Backend.List.
type Described interface {
	Closer
	Info() termapi.Info
}

// List describes the live sessions of r: a backend's List.
func List[S Described](r *Sessions[S]) []termapi.Info {
	live := r.List()
	infos := make([]termapi.Info, len(live))
	for i, s := range live {
		infos[i] = s.Info()
	}
	return infos
}

// Find returns the live session of r with id: a backend's Attach, where
// handing a session over means handing out the same session. The error
// wraps termapi.ErrNoSession.
func Find[S Described](r *Sessions[S], id string) (S, error) {
	for _, s := range r.List() {
		if s.Info().ID == id {
			return s, nil
		}
	}
	var none S
	return none, fmt.Errorf("%w %s", termapi.ErrNoSession, id)
}
