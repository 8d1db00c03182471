package terminal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/private"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Config is the terminal plugin's config.
type Config struct {
	// Durable lets the shells of this terminals service outlive dsh when
	// the command line keeps them (dsh serve --http, dsh serve --session):
	// each backend then runs in a keeper of its own, which a restarted dsh
	// reattaches to. false turns that off for this deployment: shells end
	// with dsh, as without those flags.
	Durable bool `json:"durable"`
}

// DefaultConfig is the terminal plugin's config before a deployment's.
func DefaultConfig() *Config { return &Config{Durable: true} }

// KeeperPlan says where a backend keeps its sessions: the keeper's
// directory and name, and how long it keeps a session no dsh holds.
type KeeperPlan struct {
	Dir, Name string
	Keep      time.Duration
}

// KeeperFor says whether a backend plugin (pctx) runs in a keeper: the
// host asks for it (host.WithKeeping) and the terminals service it
// injected keeps shells (Config.Durable). The keeper's directory is
// keep-SCOPE in dsh's private directory, its name the entry's.
func KeeperFor(pctx *host.Context) (KeeperPlan, bool, error) {
	svc, err := host.Service[*Service](pctx, ServiceKey)
	if err != nil {
		return KeeperPlan{}, false, nil // another terminals service keeps nothing
	}
	k, ok := pctx.Keeping()
	if !ok || !svc.durable {
		return KeeperPlan{}, false, nil
	}
	dir, err := private.Dir()
	if err != nil {
		return KeeperPlan{}, false, fmt.Errorf("keeping shells: %w", err)
	}
	return KeeperPlan{Dir: filepath.Join(dir, "keep-"+fileName(k.Scope)), Name: fileName(pctx.EntryID()), Keep: k.Keep}, true, nil
}

// fileName is s as a file name: letters, digits, '.', '-' and '_' stay,
// anything else becomes '_'.
func fileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, strings.TrimLeft(s, "."))
}

// AdoptRequest selects the kept session Adopt takes back.
type AdoptRequest struct {
	// Type is the backend's; Name the session's, as it was spawned.
	Type, Name string
}

// pooled is a session a keeper keeps for an owner that has not come back
// to this service yet.
type pooled struct {
	info    termapi.Info
	typ     string
	backend termapi.Backend
	session termapi.Session // nil until attached
}

// keptPool is what the service learnt from its backends' keepers, by
// owner key. Guarded by Service.mu.
type keptPool struct {
	listed map[termapi.Backend]bool
	// listing is closed when the List in flight for a backend returns:
	// the owners that come back together (a thousand, after a restart)
	// wait for one List rather than each asking for every session.
	listing map[termapi.Backend]chan struct{}
	byOwner map[string][]*pooled
	release *time.Timer // lets go of what Reattach attached and no owner took
}

// Adopt gives owner back a session that a keeper kept for its key (the
// owner's id): the shell of an agent whose dsh was restarted, or whose
// client went away and came back. It publishes the session as the
// owner's, and its SessionInfo.Kept says what happened while no one held
// it (see termapi.Kept): a unit of work to Resume, output that arrived,
// or that the keeper itself had died (Lost: the session has exited).
// ErrNoSession when no keeper holds one.
//
// The first Adopt (or Reattach) asks every backend for the sessions it
// keeps; later ones take from what it said.
func (s *Service) Adopt(ctx context.Context, owner *host.Owner, req AdoptRequest) (SessionInfo, error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return SessionInfo{}, errServiceClosing()
	}
	st, err := s.ownerLocked(owner)
	if err != nil {
		s.mu.Unlock()
		return SessionInfo{}, err
	}
	backend := s.backendLocked(req.Type)
	if backend == nil {
		s.mu.Unlock()
		return SessionInfo{}, errorf(ErrNoBackend, "no PTY backend registered for %q", req.Type)
	}
	listed := s.pool.listed[backend]
	s.mu.Unlock()
	if !listed {
		if err := s.listKept(ctx, req.Type, backend); err != nil {
			return SessionInfo{}, err
		}
	}
	s.mu.Lock()
	p := s.takePooledLocked(owner.ID(), req)
	s.mu.Unlock()
	if p == nil {
		return SessionInfo{}, errorf(termapi.ErrNoSession, "no kept PTY session for this owner")
	}
	if p.session == nil {
		if p.session, err = p.backend.Attach(ctx, p.info.ID); err != nil {
			return SessionInfo{}, fmt.Errorf("take back kept PTY session %s: %w", p.info.ID, err)
		}
	}
	caps := p.session.Capabilities()
	r := &record{id: p.info.ID, name: p.info.Name, typ: p.typ, state: st, session: p.session, pid: p.session.PID(), motd: p.session.Motd(), caps: caps, adopted: true}
	s.mu.Lock()
	switch {
	case s.closing:
		err = errServiceClosing()
	case st.disposed || !owner.Live():
		err = errOwnerNotLive(owner)
	case s.sessions[r.id] != nil:
		err = fmt.Errorf("PTY session %s is published already", r.id)
	}
	if err != nil {
		s.mu.Unlock()
		if derr := p.session.Detach(context.WithoutCancel(ctx)); derr != nil && !errors.Is(derr, errors.ErrUnsupported) {
			err = errors.Join(err, derr)
		}
		return SessionInfo{}, err
	}
	s.sessions[r.id] = r
	st.sessions = append(st.sessions, r)
	s.mu.Unlock()
	info := r.info(p.session.Status())
	info.Kept = p.info.Kept
	return info, nil
}

// takePooledLocked takes owner's pooled session that matches req.
func (s *Service) takePooledLocked(owner string, req AdoptRequest) *pooled {
	list := s.pool.byOwner[owner]
	for i, p := range list {
		if p.typ == req.Type && p.info.Name == req.Name {
			s.pool.byOwner[owner] = append(list[:i:i], list[i+1:]...)
			if len(s.pool.byOwner[owner]) == 0 {
				delete(s.pool.byOwner, owner)
			}
			return p
		}
	}
	return nil
}

// listKept asks backend, once, which sessions it keeps, and pools them by
// owner. Callers that come while a List is in flight wait for it.
func (s *Service) listKept(ctx context.Context, typ string, backend termapi.Backend) error {
	for {
		s.mu.Lock()
		if s.pool.listed[backend] {
			s.mu.Unlock()
			return nil
		}
		if s.pool.listing == nil {
			s.pool.listing = make(map[termapi.Backend]chan struct{})
		}
		inFlight := s.pool.listing[backend]
		if inFlight == nil {
			done := make(chan struct{})
			s.pool.listing[backend] = done
			s.mu.Unlock()
			err := s.listOnce(ctx, typ, backend)
			s.mu.Lock()
			delete(s.pool.listing, backend)
			s.mu.Unlock()
			close(done)
			return err
		}
		s.mu.Unlock()
		select {
		case <-inFlight:
			// Listed, or failed: then this caller asks itself.
		case <-ctx.Done():
			return fmt.Errorf("list kept PTY sessions (%s): %w", typ, context.Cause(ctx))
		}
	}
}

// listOnce asks backend which sessions it keeps, and pools them by owner.
func (s *Service) listOnce(ctx context.Context, typ string, backend termapi.Backend) error {
	infos, err := backend.List(ctx)
	if errors.Is(err, errors.ErrUnsupported) {
		infos, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("list kept PTY sessions (%s): %w", typ, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool.listed[backend] {
		return nil
	}
	if s.pool.listed == nil {
		s.pool.listed = make(map[termapi.Backend]bool)
	}
	if s.pool.byOwner == nil {
		s.pool.byOwner = make(map[string][]*pooled)
	}
	s.pool.listed[backend] = true
	for _, in := range infos {
		if in.Kept == nil || s.sessions[in.ID] != nil {
			continue // held by this service, or by no keeper
		}
		s.pool.byOwner[in.OwnerID] = append(s.pool.byOwner[in.OwnerID], &pooled{info: in, typ: typ, backend: backend})
	}
	return nil
}

// Reattach takes back at once every session the backends' keepers keep,
// for the owners to Adopt when they come, and reports how many it
// attached: a dsh started again reattaches every shell before its first
// call (a session another dsh still holds is left for Adopt, which waits
// for it). What no owner adopts within release goes back to its keeper.
func (s *Service) Reattach(ctx context.Context, release time.Duration) (int, error) {
	s.mu.Lock()
	type entry struct {
		typ     string
		backend termapi.Backend
	}
	var todo []entry
	for _, e := range s.backends {
		if !s.pool.listed[e.backend] {
			todo = append(todo, entry{e.typ, e.backend})
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, e := range todo {
		if err := s.listKept(ctx, e.typ, e.backend); err != nil {
			errs = append(errs, err)
		}
	}
	s.mu.Lock()
	var pending []*pooled
	for _, list := range s.pool.byOwner {
		for _, p := range list {
			if p.session == nil && !p.info.Kept.Held {
				pending = append(pending, p)
			}
		}
	}
	s.mu.Unlock()
	// Attaching is a round trip to the keeper each: a few at a time.
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, p := range pending {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sess, err := p.backend.Attach(ctx, p.info.ID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("reattach PTY session %s: %w", p.info.ID, err))
				return
			}
			s.mu.Lock()
			p.session = sess
			s.mu.Unlock()
			n++
		}()
	}
	wg.Wait()
	if release > 0 {
		s.mu.Lock()
		if s.pool.release != nil {
			s.pool.release.Stop()
		}
		s.pool.release = time.AfterFunc(release, s.releasePool)
		s.mu.Unlock()
	}
	return n, errors.Join(errs...)
}

// releasePool lets every attached session no owner adopted go back to its
// keeper, which then keeps it for its own while.
func (s *Service) releasePool() {
	s.mu.Lock()
	var attached []termapi.Session
	for owner, list := range s.pool.byOwner {
		kept := list[:0]
		for _, p := range list {
			if p.session != nil {
				attached = append(attached, p.session)
				continue
			}
			kept = append(kept, p)
		}
		if len(kept) == 0 {
			delete(s.pool.byOwner, owner)
		} else {
			s.pool.byOwner[owner] = kept
		}
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), releaseBound)
	defer cancel()
	for _, sess := range attached {
		_ = sess.Detach(ctx)
	}
}

// releaseBound bounds letting sessions go back to their keeper.
const releaseBound = 30 * time.Second

// Resume hands owner the unit of work its session's last holder lost (see
// termapi.Session.Resume), in the session's send slot as StartSend: the
// same checks, in the same order.
func (s *Service) Resume(ctx context.Context, owner *host.Owner, id string, req termapi.SendRequest) (termapi.Send, error) {
	return s.withSlot(ctx, owner, id, func(session termapi.Session) (termapi.Send, error) {
		if !session.Capabilities().Keep {
			return nil, fmt.Errorf("PTY session %s is not kept: %w", id, errors.ErrUnsupported)
		}
		return session.Resume(ctx, req)
	})
}

// detachKept lets the owner's kept sessions go to their keepers, before
// the owner's calls are cancelled: a command running in one goes on, and
// its call ends without interrupting it.
func (s *Service) detachKept(ctx context.Context, st *ownerState) error {
	s.mu.Lock()
	var keep []*record
	for _, r := range st.sessions {
		if r.caps.Keep {
			keep = append(keep, r)
		}
	}
	s.mu.Unlock()
	errs := make([]error, len(keep))
	var wg sync.WaitGroup
	for i, r := range keep {
		wg.Go(func() { errs[i] = s.detachRecord(ctx, r) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// detachRecords lets records go to their keepers where they can be kept,
// and closes the rest, concurrently, with reason.
func (s *Service) detachRecords(ctx context.Context, records []*record, reason string) error {
	var keep, end []*record
	for _, r := range records {
		if r.caps.Keep {
			keep = append(keep, r)
		} else {
			end = append(end, r)
		}
	}
	errs := make([]error, len(keep))
	var wg sync.WaitGroup
	for i, r := range keep {
		wg.Go(func() { errs[i] = s.detachRecord(ctx, r) })
	}
	wg.Wait()
	return errors.Join(errors.Join(errs...), s.closeRecords(ctx, end, reason))
}

// detachRecord lets one session go to its keeper and forgets it; a session
// that is closing, or whose keeper will not take it, is closed instead.
func (s *Service) detachRecord(ctx context.Context, r *record) error {
	s.mu.Lock()
	if r.gone || r.closing != nil {
		s.mu.Unlock()
		_, err := s.closeRecord(ctx, r, reasonOwnerDisposed)
		return err
	}
	c := &closeOp{done: make(chan struct{})}
	r.closing = c
	s.mu.Unlock()
	err := r.session.Detach(ctx)
	if err != nil {
		s.mu.Lock()
		r.closing = nil
		s.mu.Unlock()
		close(c.done)
		// The keeper is out of reach: the shell goes as it would without
		// one.
		_, cerr := s.closeRecord(ctx, r, reasonOwnerDisposed)
		if cerr != nil {
			return fmt.Errorf("let PTY session %s go to its keeper: %w", r.id, errors.Join(err, cerr))
		}
		return nil
	}
	s.mu.Lock()
	r.closing, r.gone = nil, true
	if s.sessions[r.id] == r {
		delete(s.sessions, r.id)
	}
	r.state.sessions = removeRecord(r.state.sessions, r)
	s.mu.Unlock()
	close(c.done)
	return nil
}

func removeRecord(list []*record, r *record) []*record {
	out := list[:0]
	for _, x := range list {
		if x != r {
			out = append(out, x)
		}
	}
	return out
}

// closePool lets every pooled session go back to its keeper: the service
// is closing, and no owner of this dsh will adopt them.
func (s *Service) closePool(ctx context.Context) error {
	s.mu.Lock()
	if s.pool.release != nil {
		s.pool.release.Stop()
	}
	var attached []termapi.Session
	for _, list := range s.pool.byOwner {
		for _, p := range list {
			if p.session != nil {
				attached = append(attached, p.session)
			}
		}
	}
	s.pool.byOwner = nil
	s.mu.Unlock()
	var errs []error
	for _, sess := range attached {
		if err := sess.Detach(ctx); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
