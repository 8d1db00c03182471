package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Owner is one agent: an id, a workspace directory, and a cleanup scope for
// what it owns (its shells, its output files). Every tool call carries its
// owner. Fronts create owners: an MCP session, the REPL, `dsh call`.
type Owner struct {
	id      string
	workdir string
	host    *Host

	mu       sync.Mutex
	cleanups map[uint64]func(context.Context) error
	next     uint64
	done     chan struct{}
	closing  bool
	closed   chan struct{} // closed when Close has finished
	err      error
	// detachHooks run first when the owner is let go (OnDetach);
	// hooksDone is closed once they have, and is nil before a Detach.
	detachHooks []func(context.Context) error
	hooksDone   chan struct{}
}

// ID returns the owner's id, unique among the host's live owners.
func (o *Owner) ID() string { return o.id }

// Workdir returns the owner's workspace: where its shell starts.
func (o *Owner) Workdir() string { return o.workdir }

// Done is closed when the owner starts closing. An owner is live until then.
func (o *Owner) Done() <-chan struct{} { return o.done }

// Live reports whether the owner has not started closing.
func (o *Owner) Live() bool {
	select {
	case <-o.done:
		return false
	default:
		return true
	}
}

// Defer adds a cleanup that runs when the owner closes. It returns a
// function that removes the cleanup again (for a plugin that unloads before
// the owner closes), or ErrOwnerClosed if the owner is already closing.
func (o *Owner) Defer(cleanup func(ctx context.Context) error) (remove func(), err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return nil, fmt.Errorf("owner %q: %w", o.id, ErrOwnerClosed)
	}
	id := o.next
	o.next++
	o.cleanups[id] = cleanup
	return func() {
		o.mu.Lock()
		delete(o.cleanups, id)
		o.mu.Unlock()
	}, nil
}

// Close marks the owner closed, runs its cleanups in reverse order and waits
// for them, and returns their errors joined. Concurrent and repeated calls
// wait for the same close and return its result.
func (o *Owner) Close(ctx context.Context) error {
	o.mu.Lock()
	if hooks := o.hooksDone; hooks != nil && !o.closing {
		// A Detach is letting go what is kept: its calls are not
		// cancelled before that is done.
		o.mu.Unlock()
		select {
		case <-hooks:
		case <-ctx.Done():
		}
		o.mu.Lock()
	}
	if o.closing {
		o.mu.Unlock()
		select {
		case <-o.closed:
			return o.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	o.closing = true
	close(o.done)
	ids := make([]uint64, 0, len(o.cleanups))
	for id := range o.cleanups {
		ids = append(ids, id)
	}
	cleanups := o.cleanups
	o.cleanups = nil
	o.mu.Unlock()

	var errs []error
	// Ids grow with registration: descending order is reverse order.
	slices.Sort(ids)
	slices.Reverse(ids)
	for _, id := range ids {
		if err := runCleanup(ctx, cleanups[id]); err != nil {
			errs = append(errs, err)
		}
	}
	o.host.forgetOwner(o)
	o.mu.Lock()
	if err := errors.Join(errs...); err != nil {
		o.err = fmt.Errorf("close owner %q: %w", o.id, err)
	}
	close(o.closed)
	o.mu.Unlock()
	return o.err
}

// NewOwnerID returns a fresh owner id for a front of kind ("mcp", "repl",
// "call"): the kind, a dash and 16 random characters, so that an id names
// one agent only, in this process and any other, and says where it came
// from in logs and listings.
func NewOwnerID(kind string) string {
	return kind + "-" + strings.ToLower(rand.Text()[:16])
}
