package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
)

// Host runs the plugins of a deployment and the owners that use them.
type Host struct {
	plan    *Plan
	logger  *slog.Logger
	tools   *Tools
	keeping *Keeping // see WithKeeping

	mu       sync.Mutex
	services map[serviceRef]any
	loaded   []*Context // in load order
	owners   map[string]*Owner
	closing  bool
	closed   chan struct{}
	closeErr error
}

// Option configures Load.
type Option func(*options)

type options struct {
	logger   *slog.Logger
	registry *Registry
	workdir  string
	keeping  *Keeping
}

// WithWorkdir names the directory sessions start in by default (the
// owners' workspace), which Load's trust check takes as writable to the
// shells of a backend that confines them to their workspace. Default: the
// working directory.
func WithWorkdir(dir string) Option { return func(o *options) { o.workdir = dir } }

// WithLogger sets the logger plugins derive theirs from.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithRegistry resolves plugin names in reg instead of the default registry.
func WithRegistry(reg *Registry) Option { return func(o *options) { o.registry = reg } }

// Load resolves a deployment and starts its plugins in dependency order. If
// a plugin fails to start, the ones already started are unloaded in reverse
// order and the error (joined with any cleanup failure) is returned.
func Load(ctx context.Context, d *Deployment, opts ...Option) (*Host, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	plan, err := Resolve(d, o.registry)
	if err != nil {
		return nil, err
	}
	if err := CheckTrust(plan, d.File, o.workdir); err != nil {
		return nil, err
	}
	return Start(ctx, plan, opts...)
}

// Start starts the plugins of a resolved plan.
func Start(ctx context.Context, plan *Plan, opts ...Option) (*Host, error) {
	o := options{logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	h := &Host{
		plan:     plan,
		keeping:  o.keeping,
		logger:   o.logger,
		services: make(map[serviceRef]any),
		owners:   make(map[string]*Owner),
		closed:   make(chan struct{}),
	}
	h.tools = newTools(o.logger.With("service", ToolsKey))
	h.services[serviceRef{ToolsKey, Realm{}}] = h.tools
	fail := func(err error) (*Host, error) {
		if cerr := h.unloadAll(context.WithoutCancel(ctx)); cerr != nil {
			err = errors.Join(err, cerr)
		}
		close(h.closed)
		return nil, err
	}
	for _, s := range plan.Steps {
		if err := h.apply(ctx, s); err != nil {
			return fail(err)
		}
	}
	if err := h.runChecks(ctx); err != nil {
		return fail(err)
	}
	return h, nil
}

func (h *Host) apply(ctx context.Context, s *Step) error {
	lifetime, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	pctx := &Context{
		host:     h,
		step:     s,
		lifetime: lifetime,
		cancel:   cancel,
		logger:   h.logger.With("entry", s.Entry.Path, "plugin", s.Plugin.Name),
		services: make(map[Key]any, len(s.Plugin.Inject)),
		provided: make(map[Key]bool),
	}
	h.mu.Lock()
	for _, key := range s.Plugin.Inject {
		pctx.services[key] = h.services[serviceRef{key, s.Realm(key)}]
	}
	h.loaded = append(h.loaded, pctx)
	h.mu.Unlock()

	fail := func(err error) error {
		return &DeploymentError{File: h.plan.Source, Line: s.Entry.Line, Entry: s.Entry.Path, Plugin: s.Plugin.Name, Err: err}
	}
	instance, err := safeApply(pctx, s)
	pctx.mu.Lock()
	pctx.instance = instance // closed at unload even when Apply failed
	pctx.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	pctx.mu.Lock()
	provided := maps.Clone(pctx.provided)
	pctx.mu.Unlock()
	for _, key := range s.Plugin.Provides {
		if !provided[key] {
			return fail(fmt.Errorf("plugin %s declares service %q but did not provide it", s.Plugin.Name, key))
		}
	}
	pctx.logger.Debug("plugin loaded")
	return nil
}

func safeApply(pctx *Context, s *Step) (instance any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plugin %s panicked while starting: %v", s.Plugin.Name, r)
		}
	}()
	return s.Plugin.Apply(pctx, s.Config)
}

// Instances returns the instances of the plugins loaded now, in load
// order; a plugin whose Apply returned nil has none.
func (h *Host) Instances() []Instance {
	h.mu.Lock()
	loaded := slices.Clone(h.loaded)
	h.mu.Unlock()
	var out []Instance
	for _, c := range loaded {
		if inst, ok := c.Instance(); ok {
			out = append(out, inst)
		}
	}
	return out
}

// Plan returns the plan the host was started from.
func (h *Host) Plan() *Plan { return h.plan }

// Lookup returns the service a plugin of h provides under key in the root
// realm: for fronts and test harnesses that reach a service from outside
// every plugin (the invariants service, say). ErrNotInjected when no
// plugin provides it.
func Lookup[T any](h *Host, key Key) (T, error) {
	var zero T
	h.mu.Lock()
	svc, ok := h.services[serviceRef{key, Realm{}}]
	h.mu.Unlock()
	if !ok {
		return zero, errorf(ErrNotInjected, "no plugin provides %q in the root realm", key)
	}
	t, ok := svc.(T)
	if !ok {
		return zero, fmt.Errorf("host: service %q is %T, not %T", key, svc, zero)
	}
	return t, nil
}

// Tools returns the host's tools service (the one in the root realm).
func (h *Host) Tools() *Tools { return h.tools }

// Logger returns the host's logger.
func (h *Host) Logger() *slog.Logger { return h.logger }

// NewOwner creates an owner. The id must not belong to a live owner; the
// workdir is made absolute.
func (h *Host) NewOwner(id, workdir string) (*Owner, error) {
	if id == "" {
		return nil, errors.New("host: owner id must be non-empty")
	}
	abs, err := filepath.Abs(workdir)
	if err != nil {
		return nil, fmt.Errorf("host: owner %q workdir: %w", id, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return nil, ErrClosed
	}
	if _, dup := h.owners[id]; dup {
		return nil, fmt.Errorf("owner %q: %w", id, ErrOwnerExists)
	}
	o := &Owner{
		id:       id,
		workdir:  abs,
		host:     h,
		cleanups: make(map[uint64]func(context.Context) error),
		done:     make(chan struct{}),
		closed:   make(chan struct{}),
	}
	h.owners[id] = o
	return o, nil
}

func (h *Host) forgetOwner(o *Owner) {
	h.mu.Lock()
	if h.owners[o.id] == o {
		delete(h.owners, o.id)
	}
	h.mu.Unlock()
}

// Close closes every owner (concurrently, waiting for all), then unloads the
// plugins in reverse load order, and returns every failure joined. It is
// idempotent: later calls wait for the first and return its result.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		select {
		case <-h.closed:
			return h.closeErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.closing = true
	owners := make([]*Owner, 0, len(h.owners))
	for _, o := range h.owners {
		owners = append(owners, o)
	}
	h.mu.Unlock()

	errs := make([]error, len(owners))
	var wg sync.WaitGroup
	for i, o := range owners {
		wg.Go(func() { errs[i] = o.Close(ctx) })
	}
	wg.Wait()
	errs = append(errs, h.unloadAll(ctx))
	h.closeErr = errors.Join(errs...)
	close(h.closed)
	return h.closeErr
}

func (h *Host) unloadAll(ctx context.Context) error {
	h.mu.Lock()
	loaded := h.loaded
	h.loaded = nil
	h.mu.Unlock()
	var errs []error
	for i := len(loaded) - 1; i >= 0; i-- {
		if err := loaded[i].unload(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
