package inband

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// closeBudget bounds the close of a session whose start failed: Close only
// waits for local goroutines once the link is closed.
const closeBudget = 10 * time.Second

// Start runs the protocol on link, whose far end is an interactive bash
// that has just started on a terminal without echo: it types the plumbing
// (and a cd to dir, when dir is not empty) and returns once the shell
// shows its first prompt. If ctx ends first, or the shell ends or stays
// silent past o.Timeout, the session is closed (and with it the link) and
// the error wraps o.StartErr; if that close fails too, the error is a
// *termapi.CleanupError.
func Start(ctx context.Context, link Link, dir string, o Options) (*Session, error) {
	s := newSession(link, o)
	s.start()
	err := s.awaitStartup(ctx, dir)
	if err == nil {
		err = s.startProof(ctx)
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeBudget)
		defer cancel()
		if cerr := s.Close(cctx, "startup failed"); cerr != nil {
			return nil, &termapi.CleanupError{StartErr: err, CleanupErr: cerr}
		}
		return nil, err
	}
	return s, nil
}

// awaitStartup types the plumbing and waits for the shell's first prompt.
func (s *Session) awaitStartup(ctx context.Context, dir string) error {
	s.mu.Lock()
	sn := newSend(s, false, s.Deadline(time.Now(), 0), nil)
	sn.startup = true
	s.Holder, s.Live = sn, sn
	// The startup job holds no slot: the first prompt proves it written.
	s.enqueueLocked(&writeJob{data: appendStartup(nil, s.token, dir, s.opts.Echoes)})
	s.kickClock()
	s.mu.Unlock()

	where, sentinel := s.opts.Where, s.opts.StartErr
	select {
	case <-sn.Done():
	case <-ctx.Done():
		return fmt.Errorf("%s: %s: starting the shell: %w", s.opts.Prefix, where, context.Cause(ctx))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := sn.Result()
	tail := strings.TrimSpace(s.startTail.Take() + s.Scr.Render.Partial())
	switch {
	case res.Reason == termapi.WaitStdinRead:
		return nil
	case res.Reason == termapi.WaitTimeout:
		return fmt.Errorf("%w: %s: no prompt within %v; the terminal showed: %q", sentinel, where, s.opts.Timeout, tail)
	case res.Status.ExitCode == exitBadWorkdir:
		return fmt.Errorf("%w: %s: cannot enter the working directory %q: %q", sentinel, where, dir, tail)
	}
	return fmt.Errorf("%w: %s: the shell ended during startup (%s); the terminal showed: %q", sentinel, where, res.Status, tail)
}

// startProof starts the stdin proof beside the shell, where the backend
// offers one (Options.StartProof). A far end that cannot serve it leaves
// the session without; only the end of ctx fails the start.
func (s *Session) startProof(ctx context.Context) error {
	s.mu.Lock()
	pid, have := s.farPID, s.proof != nil
	s.mu.Unlock()
	if s.opts.StartProof == nil || have {
		return nil
	}
	if pid <= 0 {
		s.log.Info("no stdin proof: the shell did not report its pid")
		return nil
	}
	p, err := s.opts.StartProof(ctx, pid)
	switch {
	case ctx.Err() != nil:
		if p != nil {
			p.Close()
		}
		return fmt.Errorf("%s: %s: starting the stdin probe: %w", s.opts.Prefix, s.opts.Where, context.Cause(ctx))
	case err != nil:
		s.log.Info("no stdin proof: a program waiting for input is inferred from silence", "err", err)
		return nil
	}
	s.mu.Lock()
	s.prober, s.proof = p, p.WaitingForInput
	s.mu.Unlock()
	return nil
}

// maxProofRestarts bounds how often a session starts its lost prober again:
// a far end that keeps losing it is one without a proof.
const maxProofRestarts = 3

// restartProofLocked starts the session's prober again once it is lost (a
// second channel closed under it, an answer that came too late): the
// proof is what keeps a program waiting for input from holding a call
// until its bound, and the silence bound does not stand in for it where
// the proof was promised (Capabilities.InputProof). Meanwhile nothing is
// proven; a new prober that fails to start leaves the session without a
// proof, which its capabilities then say.
func (s *Session) restartProofLocked() {
	old := s.prober
	if old == nil || s.restarting {
		return
	}
	if s.opts.StartProof == nil || s.closing || s.restarts >= maxProofRestarts {
		s.proof = nil // the lost prober is closed with the session
		return
	}
	s.restarts++
	s.restarting = true
	s.prober, s.proof = nil, nil
	done := make(chan struct{})
	s.restartDone = done
	go s.restartProof(old, s.farPID, done)
}

// restartProof closes the lost prober and starts a new one, which knows
// the shell's prompt read from the old one: the shell may not be at its
// prompt now.
func (s *Session) restartProof(old Prober, pid int, done chan struct{}) {
	defer close(done)
	if err := old.Close(); err != nil {
		s.log.Debug("closing the lost stdin probe", "err", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	p, err := s.opts.StartProof(ctx, pid)
	if err == nil {
		if np, ok := p.(*RemoteProof); ok {
			if op, ok := old.(*RemoteProof); ok {
				np.keepPrompt(op)
			}
		}
	}
	s.mu.Lock()
	s.restarting = false
	closing := s.closing
	if err == nil && !closing {
		s.prober, s.proof = p, p.WaitingForInput
		s.resetProbeLocked(time.Now())
	}
	s.mu.Unlock()
	switch {
	case err != nil:
		s.log.Info("the stdin probe was lost and could not be started again: a program waiting for input is inferred from silence", "err", err)
	case closing:
		if err := p.Close(); err != nil {
			s.log.Debug("closing the stdin probe", "err", err)
		}
	default:
		s.log.Debug("the stdin probe was lost and is started again")
		s.kickClock()
	}
}
