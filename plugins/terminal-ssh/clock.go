package terminalssh

import (
	"time"

	"github.com/dshdev/dsh/plugins/terminal"
)

// clock times the live send: its deadline, and its silence bound. It is the
// session's only timer, and it sleeps until the next moment something is
// due; output only moves the silence bound later, so the clock is woken
// early (kick) only for a new send.
func (s *session) clock() {
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
		next := s.tickLocked(time.Now())
		s.mu.Unlock()
		if next.IsZero() {
			t.Stop()
		} else {
			t.Reset(time.Until(next))
		}
	}
}

// kickClock makes the clock look at the live send again.
func (s *session) kickClock() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// tickLocked settles the live send whose deadline or silence bound has
// passed, and returns when to look next (zero: nothing to time). While the
// read loop holds the terminal back for the caller, the terminal is not
// silent.
func (s *session) tickLocked(now time.Time) time.Time {
	sn := s.live
	if sn == nil || sn.settled {
		return time.Time{}
	}
	if !now.Before(sn.deadline) {
		s.settleLocked(sn, terminal.WaitTimeout)
		return time.Time{}
	}
	if sn.startup {
		return sn.deadline
	}
	if s.paused {
		s.lastOutput = now
	}
	quiet := s.lastOutput.Add(s.cfg.idle)
	if !now.Before(quiet) {
		s.settleLocked(sn, terminal.WaitInferredIdle)
		return time.Time{}
	}
	if quiet.Before(sn.deadline) {
		return quiet
	}
	return sn.deadline
}

// keepalive probes the connection every interval. A probe that fails, or
// has no reply within three intervals (OpenSSH's ServerAliveCountMax),
// closes the connection: the session has exited.
func (s *session) keepalive(every time.Duration) {
	defer close(s.aliveDone)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-tick.C:
		}
		dead := time.AfterFunc(3*every, func() {
			s.log.Warn("the SSH server did not answer keepalives; closing the connection", "after", 3*every)
			s.client.Close()
		})
		// OpenSSH answers with a failure: any answer proves the peer alive.
		_, _, err := s.client.SendRequest("keepalive@openssh.com", true, nil)
		dead.Stop()
		if err != nil {
			select {
			case <-s.quit:
			default:
				s.log.Info("the SSH connection is gone", "err", err)
				s.client.Close()
			}
			return
		}
	}
}
