package terminal

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// lookupLocked finds a session of owner: one whose owner has the same key
// (ID), which can outlive one owner object. The sessions of an owner whose
// disposal has begun are its own alone. Another owner's session gets the
// same answer as an id that does not exist.
func (s *Service) lookupLocked(owner *host.Owner, id string) (*record, error) {
	r := s.sessions[id]
	if r == nil || owner == nil || r.state.owner.ID() != owner.ID() || (r.state.owner != owner && r.state.disposed) {
		return nil, errNoSession(id)
	}
	return r, nil
}

// openLocked finds a session of owner that is not closing.
func (s *Service) openLocked(owner *host.Owner, id string) (*record, error) {
	r, err := s.lookupLocked(owner, id)
	if err != nil {
		return nil, err
	}
	if r.closing != nil {
		return nil, errorf(termapi.ErrSessionClosing, "PTY session %s is closing", id)
	}
	return r, nil
}

// StartSend starts a send on session id of owner. It checks, in order: ctx
// is done (its cause); the owner is not live (ErrOwnerNotLive); no such
// session of this owner (ErrNoSession); the session is closing
// (ErrSessionClosing); a send is live (ErrSendActive). Then the backend's
// StartSend runs, and its errors are returned as they are.
//
// The service's send slot is released when the holder of the returned Send
// sees it settle: Wait returns anything but the end of its own ctx, or
// Output returns io.EOF. A caller must therefore wait for (or drain) every
// send it starts; abandoning one keeps the session busy until it closes.
func (s *Service) StartSend(ctx context.Context, owner *host.Owner, id string, req termapi.SendRequest) (termapi.Send, error) {
	return s.withSlot(ctx, owner, id, func(session termapi.Session) (termapi.Send, error) {
		return session.StartSend(ctx, req)
	})
}

// Exec runs a command line in session id of owner (see termapi.Session).
// It checks what StartSend checks, in the same order, then that the
// session can run commands (an error wrapping errors.ErrUnsupported).
func (s *Service) Exec(ctx context.Context, owner *host.Owner, id string, req termapi.ExecRequest) (termapi.Send, error) {
	return s.withSlot(ctx, owner, id, func(session termapi.Session) (termapi.Send, error) {
		if !session.Capabilities().Exec {
			return nil, fmt.Errorf("PTY session %s cannot run commands: %w", id, errors.ErrUnsupported)
		}
		return session.Exec(ctx, req)
	})
}

// withSlot reserves session id's send slot for start, which runs outside
// the service lock; the slot is released if start fails.
func (s *Service) withSlot(ctx context.Context, owner *host.Owner, id string, start func(termapi.Session) (termapi.Send, error)) (termapi.Send, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	s.mu.Lock()
	if owner == nil || !owner.Live() {
		s.mu.Unlock()
		return nil, errOwnerNotLive(owner)
	}
	r, err := s.openLocked(owner, id)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if r.send != nil {
		s.mu.Unlock()
		return nil, errorf(termapi.ErrSendActive, "PTY session %s already has an active send", id)
	}
	ls := &liveSend{svc: s, rec: r}
	r.send = ls
	s.mu.Unlock()

	send, err := start(r.session)
	if err != nil {
		ls.release()
		return nil, err
	}
	ls.Send = send
	return ls, nil
}

// Read returns a page of session id's scrollback (see ReadRequest).
func (s *Service) Read(owner *host.Owner, id string, req termapi.ReadRequest) (termapi.ReadResult, error) {
	s.mu.Lock()
	r, err := s.openLocked(owner, id)
	s.mu.Unlock()
	if err != nil {
		return termapi.ReadResult{}, err
	}
	return r.session.Read(req)
}

// Resize sets the terminal size of session id (an error wrapping
// errors.ErrUnsupported where the session cannot be resized).
func (s *Service) Resize(ctx context.Context, owner *host.Owner, id string, size termapi.Size) error {
	s.mu.Lock()
	r, err := s.openLocked(owner, id)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return r.session.Resize(ctx, size)
}

// WriteFile writes a file of session id's where its shell can read it, and
// returns the path the shell knows it by (see termapi.Session.WriteFile; an
// error wrapping errors.ErrUnsupported where the session cannot).
func (s *Service) WriteFile(ctx context.Context, owner *host.Owner, id string, req termapi.FileRequest) (string, error) {
	s.mu.Lock()
	r, err := s.openLocked(owner, id)
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	return r.session.WriteFile(ctx, req)
}

// Output returns the raw output of session id from position from on (see
// termapi.Session.Output).
func (s *Service) Output(ctx context.Context, owner *host.Owner, id string, from int64) (termapi.Chunk, error) {
	s.mu.Lock()
	r, err := s.lookupLocked(owner, id)
	s.mu.Unlock()
	if err != nil {
		return termapi.Chunk{}, err
	}
	return r.session.Output(ctx, from)
}

// Signal delivers sig to the foreground process group of session id. The
// backend decides which signals it supports (ErrUnsupportedSignal).
func (s *Service) Signal(ctx context.Context, owner *host.Owner, id string, sig termapi.Signal) (termapi.SignalResult, error) {
	s.mu.Lock()
	r, err := s.openLocked(owner, id)
	s.mu.Unlock()
	if err != nil {
		return termapi.SignalResult{}, err
	}
	return r.session.Signal(ctx, sig)
}

// EndCommand ends what the latest command of session id started and left
// running (see termapi.Session.EndCommand), and says how many processes
// that was.
func (s *Service) EndCommand(ctx context.Context, owner *host.Owner, id string) (int, error) {
	s.mu.Lock()
	r, err := s.openLocked(owner, id)
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return r.session.EndCommand(ctx)
}

// Kill closes session id with reason ("model request" when empty). It
// returns true when this call closed the session. If a close is already
// running, Kill waits for it and returns false with that close's error. If
// the backend's Close fails, the session stays listed and Kill can be
// retried.
func (s *Service) Kill(ctx context.Context, owner *host.Owner, id, reason string) (bool, error) {
	s.mu.Lock()
	r, err := s.lookupLocked(owner, id)
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	if reason == "" {
		reason = reasonKill
	}
	return s.closeRecord(ctx, r, reason)
}

// List returns owner's sessions in publication order, closing ones
// included, with their status read live from the backend.
func (s *Service) List(owner *host.Owner) []SessionInfo {
	s.mu.Lock()
	var records []*record
	if st := s.owners[owner]; st != nil {
		records = append(records, st.sessions...)
	}
	s.mu.Unlock()
	infos := make([]SessionInfo, len(records))
	for i, r := range records {
		infos[i] = r.info(r.session.Status())
	}
	return infos
}

// Holding lists the owner's sessions for an operator (host.Holder).
func (s *Service) Holding(owner *host.Owner) []host.Held {
	var out []host.Held
	for _, info := range s.List(owner) {
		out = append(out, host.Held{What: fmt.Sprintf("terminal session %s (%s)", info.ID, info.Type), PID: info.PID})
	}
	return out
}

// Interrupt sends SIGINT to the foreground job of each of owner's
// sessions, as Ctrl-C in a terminal does (host.Interrupter): the job ends
// or handles it, the shell stays.
func (s *Service) Interrupt(ctx context.Context, owner *host.Owner) error {
	var errs []error
	for _, info := range s.List(owner) {
		if _, err := s.Signal(ctx, owner, info.ID, termapi.SIGINT); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// liveSend is a backend Send that frees the service's slot once its holder
// has seen it settle.
type liveSend struct {
	termapi.Send
	svc *Service
	rec *record
}

// Wait frees the slot unless it returned only because ctx ended: the send
// may still be running then.
func (l *liveSend) Wait(ctx context.Context) (termapi.SendResult, error) {
	res, err := l.Send.Wait(ctx)
	if err == nil || ctx.Err() == nil {
		l.release()
	}
	return res, err
}

// Output frees the slot on io.EOF, and on a failure that is not the end of
// ctx (the send is over either way).
func (l *liveSend) Output(ctx context.Context) (string, error) {
	out, err := l.Send.Output(ctx)
	if errors.Is(err, io.EOF) || (err != nil && ctx.Err() == nil) {
		l.release()
	}
	return out, err
}

// release frees the slot if this send still holds it.
func (l *liveSend) release() {
	l.svc.mu.Lock()
	if l.rec.send == l {
		l.rec.send = nil
	}
	l.svc.mu.Unlock()
}

// Interface guard.
var _ termapi.Send = (*liveSend)(nil)
