package terminal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Close reasons the service passes to Session.Close.
const (
	reasonRollback        = "PTY spawn rolled back"
	reasonOwnerDisposed   = "PTY owner disposed"
	reasonServiceDisposed = "PTY service disposed"
	reasonKill            = "model request"
)

// Service is the terminals service: a registry of backends by type and of
// the sessions they started, fenced by owner. Create it with NewService; all
// methods are safe for concurrent use. See the package doc for the model.
type Service struct {
	mu       sync.Mutex
	backends []*backendEntry // registration order
	owners   map[*host.Owner]*ownerState
	sessions map[string]*record
	closing  bool
	done     chan struct{} // closed when Close starts: aborts pending spawns
	closed   chan struct{} // closed when Close has finished
	closeErr error
	// durable: backends keep their sessions in keepers when the host asks
	// for it (Config.Durable; see KeeperFor).
	durable bool
	// pool holds the sessions keepers keep for owners that have not come
	// back yet (Adopt, Reattach).
	pool keptPool
}

type backendEntry struct {
	typ     string
	backend termapi.Backend
}

// ownerState is what the service keeps per owner that ever passed the
// owner check of Spawn.
type ownerState struct {
	owner      *host.Owner
	removeHook func() // removes the cleanup installed on the owner
	disposed   bool   // the owner's cleanup has started
	sessions   []*record
	pending    map[*pendingSpawn]struct{}
	// retained are cleanup failures of spawns that did not publish: until a
	// disposal reports them, something may still be running.
	retained []error
	// policy is what the owner's spawns ask for (SetPolicy); its zero
	// value asks for each backend's own.
	policy termapi.Policy
}

// pendingSpawn is a spawn between its id being minted and its outcome
// (publication, or failure and rollback) being final.
type pendingSpawn struct {
	name    string
	policy  termapi.Policy // what the spawn asked for
	settled chan struct{}
}

// testHookSkipOwnerCleanup breaks the service on purpose, for the test
// that shows the invariants catch an owner's sessions left behind.
var testHookSkipOwnerCleanup atomic.Bool

// record is a published session.
type record struct {
	id, name, typ string
	state         *ownerState
	session       termapi.Session
	pid           int
	motd          string
	caps          termapi.Capabilities // what the session can do, and runs under

	// adopted: a keeper kept the session, and this service took it back
	// (Adopt): its id was published before, by this dsh or another.
	adopted bool

	// Guarded by Service.mu.
	send    *liveSend // the send holding the service's slot, if any
	closing *closeOp  // the close in progress, if any
	gone    bool      // closed and removed
}

// closeOp is one backend Close that concurrent closers share.
type closeOp struct {
	done chan struct{}
	err  error // set before done is closed
}

// NewService returns an empty service.
func NewService() *Service {
	return &Service{
		owners:   make(map[*host.Owner]*ownerState),
		sessions: make(map[string]*record),
		done:     make(chan struct{}),
		closed:   make(chan struct{}),
	}
}

// AddBackend registers b with the terminals service the plugin injected
// (ServiceKey) for as long as the plugin is loaded. Its unload unregisters
// b before it runs the cleanups the plugin deferred earlier, so a plugin
// that defers closing its backend first, then calls AddBackend, has no
// session start while the backend closes.
func AddBackend(pctx *host.Context, b termapi.Backend) error {
	reg, err := host.Service[interface {
		RegisterBackend(termapi.Backend) (func(), error)
	}](pctx, ServiceKey)
	if err != nil {
		return err
	}
	unregister, err := reg.RegisterBackend(b)
	if err != nil {
		return fmt.Errorf("register backend %q: %w", b.Type(), err)
	}
	pctx.Defer(func(context.Context) error { unregister(); return nil })
	if svc, ok := reg.(*Service); ok {
		pctx.AddProbe(host.Probe{Name: fmt.Sprintf("backend %q", b.Type()), Run: func(ctx context.Context, owner *host.Owner) (string, error) {
			return svc.probe(ctx, owner, b)
		}})
	}
	return nil
}

// Describer is implemented by backends that can say what their sessions
// are (the shell, the sandbox): dsh check --probe prints it.
type Describer interface {
	Describe() string
}

// probe starts a session of b for owner, as an owner's first call does,
// and closes it: for a remote backend that is the connection, the host
// key and the login; for a container backend, the daemon, the image and
// the container; for a sandbox, the namespaces and Landlock.
func (s *Service) probe(ctx context.Context, owner *host.Owner, b termapi.Backend) (string, error) {
	info, err := s.Spawn(ctx, owner, SpawnRequest{Type: b.Type()})
	if err != nil {
		return "", err
	}
	note := "a session started"
	if info.PID > 0 {
		note += fmt.Sprintf(" (pid %d)", info.PID)
	}
	if d, ok := b.(Describer); ok {
		note += ": " + d.Describe()
	}
	_, err = s.Kill(ctx, owner, info.ID, "probe")
	return note, err
}

// RegisterBackend adds a backend under its type. The returned function
// removes that registration again, and only that one: if the type has since
// been registered anew, the newer registration stays. Unregistering does not
// close the sessions the backend started; they stay in the service until
// they are killed or disposed.
func (s *Service) RegisterBackend(b termapi.Backend) (unregister func(), err error) {
	typ := b.Type()
	if typ == "" {
		return nil, errors.New("PTY backend type must be non-empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, errServiceClosing()
	}
	if s.backendLocked(typ) != nil {
		return nil, errorf(ErrDuplicateBackend, "a PTY backend named %q is already registered", typ)
	}
	e := &backendEntry{typ: typ, backend: b}
	s.backends = append(s.backends, e)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.backends = slices.DeleteFunc(s.backends, func(x *backendEntry) bool { return x == e })
	}, nil
}

// Backends returns the registered backend types in registration order.
func (s *Service) Backends() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	types := make([]string, len(s.backends))
	for i, e := range s.backends {
		types[i] = e.typ
	}
	return types
}

func (s *Service) backendLocked(typ string) termapi.Backend {
	for _, e := range s.backends {
		if e.typ == typ {
			return e.backend
		}
	}
	return nil
}

// ownerLocked returns the state of a live owner, installing the owner
// cleanup on first use. The cleanup is installed under s.mu, so it exists
// before any spawn of the owner can be pending.
func (s *Service) ownerLocked(owner *host.Owner) (*ownerState, error) {
	if owner == nil || !owner.Live() {
		return nil, errOwnerNotLive(owner)
	}
	if st := s.owners[owner]; st != nil {
		if st.disposed {
			return nil, errOwnerNotLive(owner)
		}
		return st, nil
	}
	st := &ownerState{owner: owner, pending: make(map[*pendingSpawn]struct{})}
	remove, err := owner.Defer(func(ctx context.Context) error {
		if testHookSkipOwnerCleanup.Load() {
			return nil
		}
		return s.disposeOwner(ctx, st)
	})
	if err != nil {
		// The owner started closing after the Live check above.
		return nil, errOwnerNotLive(owner)
	}
	st.removeHook = remove
	// Let go, the owner's kept sessions go to their keepers first, while
	// its calls still run (see host.Owner.Detach).
	owner.OnDetach(func(ctx context.Context) error { return s.detachKept(ctx, st) })
	s.owners[owner] = st
	return st, nil
}

// HasActivity reports whether owner has anything in the service: a pending
// spawn, a published session (closing ones included), or a retained cleanup
// failure not yet reported. It covers the whole span from Spawn to the end
// of the last close without a gap.
func (s *Service) HasActivity(owner *host.Owner) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.owners[owner]
	return st != nil && (len(st.pending) > 0 || len(st.sessions) > 0 || len(st.retained) > 0)
}

// disposeOwner is the cleanup installed on every owner that spawned: it
// runs when the owner closes and returns once the owner's pending spawns
// have settled and its sessions are closed.
func (s *Service) disposeOwner(ctx context.Context, st *ownerState) error {
	s.mu.Lock()
	if s.closing {
		// Service.Close is disposing every session, this owner's included.
		s.mu.Unlock()
		select {
		case <-s.closed:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("waiting for the PTY service to close: %w", context.Cause(ctx))
		}
	}
	st.disposed = true
	pending := slices.Collect(maps.Keys(st.pending))
	s.mu.Unlock()

	// The owner's Done channel closed before its cleanups started, which
	// already aborted these spawns; what is left is to await their rollback.
	// The sessions are closed even if that wait gives up.
	waitErr := awaitSpawns(ctx, pending)
	s.mu.Lock()
	records := slices.Clone(st.sessions)
	s.mu.Unlock()
	var closeErr error
	if host.Detaching(ctx) {
		// The owner is let go, not ended: its kept sessions go back to
		// their keepers, for an owner of the same id to take back.
		closeErr = s.detachRecords(ctx, records, reasonOwnerDisposed)
	} else {
		closeErr = s.closeRecords(ctx, records, reasonOwnerDisposed)
	}

	s.mu.Lock()
	retained := st.retained
	st.retained = nil
	// A spawn still pending keeps the state, for the service to report
	// what its rollback leaves behind.
	if len(st.sessions) == 0 && len(st.pending) == 0 && s.owners[st.owner] == st {
		delete(s.owners, st.owner)
	}
	s.mu.Unlock()
	return errors.Join(retainedError(retained), closeErr, waitErr)
}

// Close disposes the service: later spawns fail with ErrServiceClosing,
// pending spawns are aborted and awaited, and every session is closed with
// reason "PTY service disposed". Every session is attempted; failures are
// collected and reported together with retained cleanup failures, and the
// registries are cleared either way. Repeated and concurrent calls wait for
// the first and return its result.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		select {
		case <-s.closed:
			return s.closeErr
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	s.closing = true
	close(s.done)
	var pending []*pendingSpawn
	for _, st := range s.owners {
		for p := range st.pending {
			pending = append(pending, p)
		}
	}
	s.mu.Unlock()

	var errs []error
	if err := awaitSpawns(ctx, pending); err != nil {
		errs = append(errs, err)
	}
	s.mu.Lock()
	records := slices.Collect(maps.Values(s.sessions))
	s.mu.Unlock()
	closeErr := errors.Join(s.closeRecords(ctx, records, reasonServiceDisposed), s.closePool(ctx))

	s.mu.Lock()
	var retained []error
	var hooks []func()
	for _, st := range s.owners {
		retained = append(retained, st.retained...)
		st.retained = nil
		hooks = append(hooks, st.removeHook)
	}
	s.backends = nil
	clear(s.owners)
	clear(s.sessions)
	s.mu.Unlock()
	for _, remove := range hooks {
		remove()
	}

	s.closeErr = errors.Join(retainedError(retained), closeErr, errors.Join(errs...))
	close(s.closed)
	return s.closeErr
}

func retainedError(retained []error) error {
	if len(retained) == 0 {
		return nil
	}
	return fmt.Errorf("unpublished PTY setup was not cleaned up: %w", errors.Join(retained...))
}

// awaitSpawns waits until every spawn has settled, including its rollback.
func awaitSpawns(ctx context.Context, pending []*pendingSpawn) error {
	for _, p := range pending {
		select {
		case <-p.settled:
		case <-ctx.Done():
			return fmt.Errorf("waiting for pending PTY spawns: %w", context.Cause(ctx))
		}
	}
	return nil
}

// closeRecords closes the records concurrently, with the same reason, and
// waits for all of them.
func (s *Service) closeRecords(ctx context.Context, records []*record, reason string) error {
	errs := make([]error, len(records))
	var wg sync.WaitGroup
	for i, r := range records {
		wg.Go(func() { _, errs[i] = s.closeRecord(ctx, r, reason) })
	}
	wg.Wait()
	failed := slices.DeleteFunc(errs, func(err error) bool { return err == nil })
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("failed to close %d PTY session(s): %w", len(failed), errors.Join(failed...))
}

// closeRecord closes r with reason, or joins the close already running. It
// reports whether this call ran a close that succeeded. On success the
// record is removed; on failure it stays listed, so a later call retries.
func (s *Service) closeRecord(ctx context.Context, r *record, reason string) (bool, error) {
	s.mu.Lock()
	if r.gone {
		s.mu.Unlock()
		return false, nil
	}
	if c := r.closing; c != nil {
		s.mu.Unlock()
		select {
		case <-c.done:
			return false, c.err
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
	}
	c := &closeOp{done: make(chan struct{})}
	r.closing = c
	s.mu.Unlock()

	err := r.session.Close(ctx, reason)
	if err != nil {
		err = fmt.Errorf("close PTY session %s: %w", r.id, err)
	}
	s.mu.Lock()
	r.closing = nil
	if err == nil {
		r.gone = true
		if s.sessions[r.id] == r {
			delete(s.sessions, r.id)
		}
		r.state.sessions = slices.DeleteFunc(r.state.sessions, func(x *record) bool { return x == r })
	}
	c.err = err
	s.mu.Unlock()
	close(c.done)
	return err == nil, err
}
