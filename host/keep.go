package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Keeping asks the plugins of a host to keep what they can (a shell, its
// state, what runs in it) past the host's process: a crash, a kill -9, an
// upgrade. A later host with the same Scope takes it back. The host itself
// keeps nothing; it carries the request (WithKeeping, Context.Keeping),
// and tells an owner's cleanups when it is let go rather than ended
// (Owner.Detach, Detaching).
type Keeping struct {
	// Scope names what the kept things belong to: one server on one
	// address, or one named session ("http-127.0.0.1-8080",
	// "session-build"). A plain name: letters, digits, '.', '-', '_'.
	Scope string
	// Keep bounds how long a kept thing waits for a host to take it back.
	Keep time.Duration
}

// WithKeeping asks the host's plugins to keep what they can (see
// Keeping).
func WithKeeping(k Keeping) Option { return func(o *options) { o.keeping = &k } }

// Keeping is what the host asks of its plugins: whether to keep what they
// can past the host's process, and for whom.
func (c *Context) Keeping() (Keeping, bool) {
	if c.host.keeping == nil {
		return Keeping{}, false
	}
	return *c.host.keeping, true
}

type detachingKey struct{}

// Detaching reports whether the cleanup that got ctx runs because its
// owner is let go rather than ended (Owner.Detach): the agent may come
// back, as an owner of the same id, to a later host.
func Detaching(ctx context.Context) bool {
	d, _ := ctx.Value(detachingKey{}).(bool)
	return d
}

// Detach closes the owner as Close does, but its cleanups see
// Detaching(ctx): what can outlive the owner for a later owner with the
// same id (a kept shell, its saved outputs) is let go to whatever keeps
// it, not ended. A front detaches the owners of clients that went away
// without ending their session, and every owner when it stops with its
// shells kept.
//
// The OnDetach hooks run first, while the owner is still live and its
// calls still run: what is kept is let go before those calls are
// cancelled, so that a command running then goes on in its keeper rather
// than being interrupted.
func (o *Owner) Detach(ctx context.Context) error {
	o.mu.Lock()
	// The first Detach runs the hooks; Close (a concurrent Detach's
	// included) waits for them.
	var hooks []func(context.Context) error
	first := o.hooksDone == nil && !o.closing
	if first {
		hooks = o.detachHooks
		o.detachHooks = nil
		o.hooksDone = make(chan struct{})
	}
	o.mu.Unlock()
	var errs []error
	for _, fn := range slices.Backward(hooks) {
		if err := fn(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if first {
		o.mu.Lock()
		close(o.hooksDone)
		o.mu.Unlock()
	}
	if err := o.Close(context.WithValue(ctx, detachingKey{}, true)); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("detach owner %q: %w", o.id, errors.Join(errs...))
	}
	return nil
}

// OnDetach registers fn to run when the owner is let go (Detach), before
// its calls are cancelled and its cleanups run. Hooks of an owner that is
// closed instead never run.
func (o *Owner) OnDetach(fn func(ctx context.Context) error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.detachHooks = append(o.detachHooks, fn)
}
