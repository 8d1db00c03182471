package terminal

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// SpawnRequest is what a caller asks Spawn for.
type SpawnRequest struct {
	// Type selects the backend, e.g. "shell".
	Type string
	// Name is optional display metadata, unique among the owner's sessions.
	Name string
	// Cwd is the working directory of the session's first process; empty
	// means the owner's workdir.
	Cwd string
	// Size is the terminal's size at the start; zero: the owner's policy,
	// else the backend's own.
	Size termapi.Size
}

// SessionInfo describes a published session.
type SessionInfo struct {
	ID   string
	Name string
	Type string
	// PID is the top-level process id, or 0 when the backend has none.
	PID int
	// Status is read from the backend when the info is made.
	Status termapi.Status
	// Motd is what the terminal showed once it became ready.
	Motd string
	// Capabilities are what the session can do, and the sandbox and
	// limits it runs under.
	Capabilities termapi.Capabilities
	// Kept is what the session's keeper says happened while no one held
	// it, for a session Adopt took back; nil otherwise.
	Kept *termapi.Kept
}

// Spawn starts a session of req.Type for owner and publishes it. The order
// of its checks, and how a spawn that loses its caller, owner or service
// while the backend runs is rolled back, are described in the package doc.
func (s *Service) Spawn(ctx context.Context, owner *host.Owner, req SpawnRequest) (SessionInfo, error) {
	s.mu.Lock()
	st, backend, err := s.checkSpawnLocked(ctx, owner, req)
	if err != nil {
		s.mu.Unlock()
		return SessionInfo{}, err
	}
	p := &pendingSpawn{name: req.Name, policy: st.policy, settled: make(chan struct{})}
	if !req.Size.IsZero() {
		p.policy.Size = req.Size
	}
	st.pending[p] = struct{}{}
	id := newSessionID()
	s.mu.Unlock()

	spec := termapi.SpawnSpec{SessionID: id, OwnerID: owner.ID(), Cwd: req.Cwd, Name: req.Name, Policy: p.policy}
	if spec.Cwd == "" {
		spec.Cwd = owner.Workdir()
	}
	session, lifecycle, err := s.runBackend(ctx, owner, backend, spec)
	var motd string
	var pid int
	var caps termapi.Capabilities
	if session != nil {
		motd, pid, caps = session.Motd(), session.PID(), session.Capabilities()
		if perr := spec.Policy.Check(caps); perr != nil && err == nil {
			// A backend that does not check what it is asked for ran the
			// session as it runs every session: refused, never a weaker
			// sandbox or looser limits in silence.
			err = fmt.Errorf("PTY backend %q: %w", req.Type, perr)
		}
	}

	s.mu.Lock()
	failure := s.spawnFailureLocked(ctx, lifecycle, st, id, req.Type, session, err)
	if failure == nil {
		r := &record{id: id, name: req.Name, typ: req.Type, state: st, session: session, pid: pid, motd: motd, caps: caps}
		s.sessions[id] = r
		st.sessions = append(st.sessions, r)
		delete(st.pending, p)
		s.mu.Unlock()
		close(p.settled)
		return r.info(session.Status()), nil
	}
	s.mu.Unlock()
	return SessionInfo{}, s.rollback(ctx, st, p, id, session, err, failure)
}

// rollback undoes a spawn that did not publish: it closes the session the
// backend returned, if any, keeps what could not be cleaned up for the
// owner's disposal to report, and settles the pending spawn. It returns
// the error the caller gets.
func (s *Service) rollback(ctx context.Context, st *ownerState, p *pendingSpawn, id string, session termapi.Session, err, failure error) error {
	var rollbackErr error
	if session != nil {
		// The caller may have given up, but the session must still go: the
		// rollback is bounded by the backend's Close, not by the caller.
		if cerr := session.Close(context.WithoutCancel(ctx), reasonRollback); cerr != nil {
			rollbackErr = fmt.Errorf("roll back PTY session %s: %w", id, cerr)
		}
	}
	s.mu.Lock()
	var cleanup *termapi.CleanupError
	if errors.As(err, &cleanup) {
		st.retained = append(st.retained, fmt.Errorf("PTY session %s: %w", id, cleanup))
	}
	if rollbackErr != nil {
		st.retained = append(st.retained, rollbackErr)
	}
	delete(st.pending, p)
	s.mu.Unlock()
	close(p.settled)

	if rollbackErr != nil && ctx.Err() == nil {
		return fmt.Errorf("PTY spawn and rollback both failed: %w", errors.Join(failure, rollbackErr))
	}
	return failure
}

// checkSpawnLocked runs the checks that precede minting an id, in their
// documented order.
func (s *Service) checkSpawnLocked(ctx context.Context, owner *host.Owner, req SpawnRequest) (*ownerState, termapi.Backend, error) {
	if s.closing {
		return nil, nil, errServiceClosing()
	}
	if ctx.Err() != nil {
		return nil, nil, context.Cause(ctx)
	}
	st, err := s.ownerLocked(owner)
	if err != nil {
		return nil, nil, err
	}
	backend := s.backendLocked(req.Type)
	if backend == nil {
		return nil, nil, errorf(ErrNoBackend, "no PTY backend registered for %q", req.Type)
	}
	if req.Name != "" {
		if slices.ContainsFunc(st.sessions, func(r *record) bool { return r.name == req.Name }) {
			return nil, nil, errorf(ErrDuplicateName, "PTY session name %q already exists for this owner", req.Name)
		}
		for p := range st.pending {
			if p.name == req.Name {
				return nil, nil, errorf(ErrDuplicateName, "PTY session name %q is already being created", req.Name)
			}
		}
	}
	return st, backend, nil
}

// runBackend calls the backend with a context that also ends when the owner
// or the service starts closing. lifecycle is the cause it ended with in
// those two cases, and nil otherwise.
func (s *Service) runBackend(ctx context.Context, owner *host.Owner, backend termapi.Backend, spec termapi.SpawnSpec) (session termapi.Session, lifecycle, err error) {
	spawnCtx, abort := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-owner.Done():
			lifecycle = errOwnerNotLive(owner)
		case <-s.done:
			lifecycle = errServiceClosing()
		case <-spawnCtx.Done():
			return
		}
		abort(lifecycle)
	}()
	session, err = backend.Spawn(spawnCtx, spec)
	abort(nil) // ends the watcher; the backend is done with spawnCtx
	<-watched
	return session, lifecycle, err
}

// spawnFailureLocked decides whether a spawn whose backend has returned may
// publish, and if not, which error the caller gets: its own cause first,
// then the owner or service going away, then the backend's error.
func (s *Service) spawnFailureLocked(ctx context.Context, lifecycle error, st *ownerState, id, typ string, session termapi.Session, err error) error {
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case lifecycle != nil:
		return lifecycle
	case s.closing:
		return errServiceClosing()
	case st.disposed || !st.owner.Live():
		return errOwnerNotLive(st.owner)
	case err != nil:
		return fmt.Errorf("start PTY session %s (%s): %w", id, typ, err)
	case session == nil:
		return fmt.Errorf("start PTY session %s (%s): backend returned no session", id, typ)
	}
	return nil
}

func (r *record) info(status termapi.Status) SessionInfo {
	return SessionInfo{ID: r.id, Name: r.name, Type: r.typ, PID: r.pid, Status: status, Motd: r.motd, Capabilities: r.caps}
}

// newSessionID mints a session id: random, so that it is unique across
// restarts of dsh, and short enough to read in a message.
func newSessionID() string { return "pty-" + strings.ToLower(rand.Text()[:16]) }

// SetPolicy sets the policy of owner's later sessions (sandbox mode,
// limits, terminal size): every spawn for the owner asks its backend for
// it, and fails where the backend cannot enforce it. The zero policy
// returns every choice to each backend.
//
// A shell cannot be confined more, or less, once it runs, so the policy's
// confinement is fenced: while the owner has sessions open or being
// created, a change of its sandbox mode or limits is refused
// (ErrPolicyFenced) with the original's message; setting what they
// already run under is allowed, and the size may change at any time. The
// fence belongs to the owner, so it holds whatever happens to the
// backends.
func (s *Service) SetPolicy(owner *host.Owner, p termapi.Policy) error {
	if _, err := termapi.ParseSandboxMode(string(p.Sandbox)); err != nil {
		return err
	}
	if !p.Size.IsZero() {
		if err := p.Size.Validate(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errServiceClosing()
	}
	st, err := s.ownerLocked(owner)
	if err != nil {
		return err
	}
	if cur, busy := st.policyLocked(); busy {
		if p.Sandbox != cur.Sandbox {
			return errorf(ErrPolicyFenced, "cannot change sandbox mode from %q to %q while persistent terminal sessions are open or being created; wait for creation to settle and close them first", cur.Sandbox, p.Sandbox)
		}
		if p.Limits != cur.Limits {
			return errorf(ErrPolicyFenced, "cannot change resource limits from %+v to %+v while persistent terminal sessions are open or being created; wait for creation to settle and close them first", cur.Limits, p.Limits)
		}
	}
	st.policy = p
	return nil
}

// Policy is what owner's spawns ask for: what SetPolicy set, or the zero
// policy (each backend's own).
func (s *Service) Policy(owner *host.Owner) termapi.Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.owners[owner]; st != nil {
		return st.policy
	}
	return termapi.Policy{}
}

// policyLocked is the owner's effective policy and whether it has activity
// that fences it: the policy it set, else, for the sandbox mode, the mode
// its sessions run in (as their backends chose it).
func (st *ownerState) policyLocked() (p termapi.Policy, busy bool) {
	busy = len(st.sessions) > 0 || len(st.pending) > 0
	p = st.policy
	if p.Sandbox != "" || !busy {
		return p, busy
	}
	if len(st.sessions) > 0 {
		p.Sandbox = st.sessions[0].caps.Sandbox
	} else {
		p.Sandbox = "the backend's default"
	}
	return p, true
}
