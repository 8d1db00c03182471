package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// Context is a running plugin's view of the host: the services it injected,
// a logger, a lifetime, and the cleanups that undo its registrations. It is
// the only way a plugin reaches the outside world.
type Context struct {
	host     *Host
	step     *Step
	lifetime context.Context
	cancel   context.CancelCauseFunc
	logger   *slog.Logger

	mu       sync.Mutex
	services map[Key]any // injected services, resolved before Apply
	provided map[Key]bool
	cleanups []func(context.Context) error
	instance any // what Apply returned
	unloaded bool
	checks   []func(context.Context) error // see CheckLoaded
	probes   []Probe                       // see AddProbe
}

// ErrUnloaded is the cause of a plugin's lifetime context once the plugin
// unloads.
var ErrUnloaded = errors.New("host: plugin unloaded")

// EntryID returns the address of the plugin's deployment entry.
func (c *Context) EntryID() string { return c.step.Entry.Path }

// PluginName returns the registered plugin name.
func (c *Context) PluginName() string { return c.step.Plugin.Name }

// Logger returns the plugin's logger; records carry the entry id.
func (c *Context) Logger() *slog.Logger { return c.logger }

// Lifetime is cancelled (with cause ErrUnloaded) when the plugin starts to
// unload, before its cleanups run. Long-lived work derives from it.
func (c *Context) Lifetime() context.Context { return c.lifetime }

// Provide registers svc under key in the plugin's realm for that key. The
// key must be one the plugin declared in Provides.
func (c *Context) Provide(key Key, svc any) error {
	if !slices.Contains(c.step.Plugin.Provides, key) {
		return fmt.Errorf("host: plugin %s provides %q without declaring it in Provides", c.PluginName(), key)
	}
	if svc == nil {
		return fmt.Errorf("host: plugin %s provides a nil %q", c.PluginName(), key)
	}
	ref := serviceRef{key, c.step.Realm(key)}
	c.host.mu.Lock()
	defer c.host.mu.Unlock()
	if _, dup := c.host.services[ref]; dup {
		return errorf(ErrDuplicateService, "service %q has been registered%s", key, realmNote(ref.realm))
	}
	c.host.services[ref] = svc
	c.mu.Lock()
	c.provided[key] = true
	c.mu.Unlock()
	c.Defer(func(context.Context) error {
		c.host.mu.Lock()
		delete(c.host.services, ref)
		c.host.mu.Unlock()
		return nil
	})
	return nil
}

// Defer adds a cleanup to run when the plugin unloads. Cleanups run in
// reverse order of registration, one after another, each with the context
// of the unload (which carries its deadline); the unload waits for all of
// them and reports their errors joined.
func (c *Context) Defer(cleanup func(ctx context.Context) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cleanups = append(c.cleanups, cleanup)
}

// Service returns the injected service key, typed. It fails for a key the
// plugin did not declare in Inject, or for a service of another type.
func Service[T any](c *Context, key Key) (T, error) {
	var zero T
	c.mu.Lock()
	svc, ok := c.services[key]
	c.mu.Unlock()
	if !ok {
		return zero, errorf(ErrNotInjected, "plugin %s did not inject %q", c.PluginName(), key)
	}
	t, ok := svc.(T)
	if !ok {
		return zero, fmt.Errorf("host: service %q is %T, not %T", key, svc, zero)
	}
	return t, nil
}

// Instance returns the plugin's instance, if its Apply returned one.
func (c *Context) Instance() (Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.instance == nil || c.unloaded {
		return Instance{}, false
	}
	return Instance{Entry: c.EntryID(), Plugin: c.PluginName(), Value: c.instance}, true
}

// Instances returns the instances of every plugin of the host that is
// loaded now (see Host.Instances). A plugin that observes the others, as
// the invariants service does, looks them up when it needs them.
func (c *Context) Instances() []Instance { return c.host.Instances() }

// unload cancels the lifetime and runs the cleanups in reverse order.
func (c *Context) unload(ctx context.Context) error {
	c.mu.Lock()
	if c.unloaded {
		c.mu.Unlock()
		return nil
	}
	c.unloaded = true
	cleanups := c.cleanups
	c.cleanups = nil
	instance := c.instance
	c.mu.Unlock()
	c.cancel(ErrUnloaded)
	var errs []error
	for i := len(cleanups) - 1; i >= 0; i-- {
		if err := runCleanup(ctx, cleanups[i]); err != nil {
			errs = append(errs, err)
		}
	}
	// The instance closes last: its plugin's registrations are undone by
	// then, so nothing new reaches it while it closes.
	if closer, ok := instance.(Closer); ok {
		if err := runCleanup(ctx, closer.Close); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("unload entry %q (%s): %w", c.EntryID(), c.PluginName(), err)
	}
	return nil
}

// runCleanup turns a panicking cleanup into an error, so one bad cleanup
// cannot stop the others from running.
func runCleanup(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cleanup panicked: %v", r)
		}
	}()
	return fn(ctx)
}
