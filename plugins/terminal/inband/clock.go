package inband

import (
	"errors"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Bounds on the stdin proof's cadence (Options.WaitingForInput, or the
// prober's). The first
// check comes probeMin after the last output: output still in flight on
// the link would otherwise miss the send it belongs to. Then the interval
// doubles, up to ProbeMax.
const (
	probeMin        = 20 * time.Millisecond
	defaultProbeMax = 250 * time.Millisecond
)

// clock times the live send: its deadline, its silence bound and, where
// the link can prove a wait for input, the next proof. It is the session's
// only timer, and it sleeps until the next moment something is due; output
// only moves those moments later, so the clock is woken early (kick) only
// for a new send.
func (s *Session) clock() {
	defer close(s.clockDone)
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-s.kick:
		case <-t.C:
		}
		s.mu.Lock()
		next, probe := s.tickLocked(time.Now())
		s.mu.Unlock()
		if probe != nil {
			s.prove(probe)
			s.kickClock()
			continue
		}
		if next.IsZero() {
			t.Stop()
		} else {
			t.Reset(time.Until(next))
		}
	}
}

// kickClock makes the clock look at the live send again.
func (s *Session) kickClock() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// tickLocked does what is due at now, and returns when to look next (zero:
// nothing to time), or the send whose stdin proof is due now.
func (s *Session) tickLocked(now time.Time) (time.Time, *send) {
	next, probe := s.timeSendLocked(now)
	if at := s.retypeLocked(now); !at.IsZero() && (next.IsZero() || at.Before(next)) {
		next = at
	}
	return next, probe
}

// timeSendLocked settles the live send whose deadline or silence bound has
// passed, and returns when to look at it next (zero: nothing to time), or
// the send whose stdin proof is due now. While the read loop holds the
// terminal back for the caller, the terminal is not silent.
func (s *Session) timeSendLocked(now time.Time) (time.Time, *send) {
	sn := s.Live
	if sn == nil || sn.Settled() {
		return time.Time{}, nil
	}
	if !now.Before(sn.deadline) {
		s.settleLocked(sn, termapi.WaitTimeout)
		return time.Time{}, nil
	}
	if sn.startup {
		return sn.deadline, nil
	}
	if s.paused {
		s.lastOutput = now
	}
	quiet := s.lastOutput.Add(s.opts.Idle)
	if !now.Before(quiet) {
		s.settleLocked(sn, termapi.WaitInferredIdle)
		return time.Time{}, nil
	}
	next := sn.deadline
	if quiet.Before(next) {
		next = quiet
	}
	if s.proof != nil && !s.paused && !s.signalPendingLocked() {
		due := s.lastOutput
		if s.lastProbe.After(due) {
			due = s.lastProbe
		}
		due = due.Add(s.probeEvery)
		if !now.Before(due) {
			return time.Time{}, sn
		}
		if due.Before(next) {
			next = due
		}
	}
	return next, nil
}

// resetProbeLocked starts the proof's cadence afresh, at a new send or
// after output.
func (s *Session) resetProbeLocked(now time.Time) {
	s.probeEvery = probeMin
	s.lastProbe = now
}

// prove asks the link whether sn's foreground job waits for input, without
// the lock, and settles sn if it does and nothing was printed meanwhile:
// output that arrived during the check may be the job's last words before
// its read, and the next check will judge again after it.
func (s *Session) prove(sn *send) {
	s.mu.Lock()
	before, proof := s.lastOutput, s.proof
	s.mu.Unlock()
	if proof == nil {
		return // lost meanwhile, and being started again
	}
	waiting, err := proof()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastProbe = now
	s.probeEvery = min(2*s.probeEvery, s.opts.ProbeMax)
	if err != nil {
		s.log.Debug("the stdin proof failed", "err", err)
		if errors.Is(err, ErrProbeLost) {
			s.restartProofLocked()
		}
		return
	}
	// A command's job can only wait once the shell has taken its line:
	// a proof before its begin marker has come means the marker is still
	// on its way (the proof comes by another path than the terminal's
	// bytes), and the next check, after it, judges again.
	begun := sn.cmd == nil || sn.cmd.begun
	if waiting && begun && s.Live == sn && !sn.Settled() && s.lastOutput.Equal(before) && !s.paused && !s.signalPendingLocked() {
		s.settleLocked(sn, termapi.WaitStdinRead)
	}
}
