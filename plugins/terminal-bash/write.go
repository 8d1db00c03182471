package terminalbash

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// writeLocked types input into the terminal for sn. This is the write
// boundary: the prompt evidence is reset here, under the lock, so no output
// the read loop handles afterwards can predate the write. What the terminal
// accepts at once is written right here (the usual case, a few hundred
// bytes); if its input queue is full because the foreground program is not
// reading, the rest is written by a goroutine that the read loop never waits
// for. The send keeps the slot until that write ends, so a successor's text
// can never be interleaved with it.
func (s *session) writeLocked(sn *send, input string, now time.Time) error {
	s.boundaryLocked(now)
	p := []byte(input)
	n, err := s.term.writeNow(p)
	if err != nil {
		return err
	}
	if n == len(p) {
		return nil
	}
	sn.writing = true
	s.workers.Add(1)
	go s.writeRest(sn, p[n:])
	return nil
}

// writeRest finishes a write the terminal could not take at once. It ends
// when the text is written, when Cancel abandons it (a past write
// deadline), or when Close closes the master.
func (s *session) writeRest(sn *send, p []byte) {
	defer s.workers.Done()
	_, err := s.term.master.Write(p)
	s.mu.Lock()
	sn.writing = false
	if !s.masterClosed {
		// Cancel may have set a deadline to abandon the write, even if the
		// write finished first; the next write must not inherit it.
		s.term.master.SetWriteDeadline(time.Time{})
	}
	if err != nil && !s.closing && !errors.Is(err, os.ErrDeadlineExceeded) {
		s.log.Warn("terminal write failed", "err", err)
	}
	interrupt := sn.interruptPending && !s.closing
	sn.interruptPending = false
	sn.interrupting = interrupt
	if interrupt {
		s.workers.Add(1)
	}
	s.releaseLocked(sn)
	s.resumeLocked(sn)
	s.mu.Unlock()
	if interrupt {
		s.interrupt(sn)
	}
}

// interrupt does what ^C does, without relying on the terminal's ISIG
// (which a raw-mode program may have turned off): discard unread typed
// input, then SIGINT the foreground group. The send then settles through
// the tiers, normally on the prompt that follows. The caller has counted
// it in s.workers.
//
// When the foreground is bash itself and it is still taking in typed text,
// the signal waits (briefly) until bash blocks; see awaitShellBlocked. The
// send cannot settle on the prompt or the stdin proof meanwhile (its input
// is busy), only on its deadline or silence bound, and then the command it
// runs is still running: the interrupt goes ahead. Only a closing session
// or an exited shell has nothing left to interrupt.
func (s *session) interrupt(sn *send) {
	defer s.workers.Done()
	s.mu.Lock()
	s.boundaryLocked(time.Now())
	s.armLocked()
	s.mu.Unlock()
	s.awaitShellBlocked(nil)
	s.mu.Lock()
	skip := s.closing || s.exitSeen
	s.mu.Unlock()
	var err error
	if !skip {
		if ferr := s.term.flushInput(); ferr != nil {
			s.log.Debug("terminal input flush failed", "err", ferr)
		}
		var pgid int
		if pgid, err = s.term.foreground(); err == nil {
			err = s.signalGroup(pgid, unix.SIGINT)
		}
	}
	s.mu.Lock()
	if err != nil && !s.closing && !s.exitSeen {
		s.log.Warn("terminal interrupt failed", "err", err)
	}
	sn.interrupting = false
	s.releaseLocked(sn)
	s.resumeLocked(sn)
	s.mu.Unlock()
}

// resumeLocked judges sn again once its write or interrupt has ended: the
// prompt may be back already, otherwise the stdin proof starts over.
func (s *session) resumeLocked(sn *send) {
	if sn.settled || sn.inputBusy() {
		return
	}
	s.checkPromptLocked()
	if !sn.settled {
		s.reprobeLocked()
	}
}

// shellBlockWait is the last delay of the wait for a busy shell to block;
// the checks back off from 1 ms, doubling, so the whole wait is at most
// about twice this.
const shellBlockWait = 64 * time.Millisecond

// awaitShellBlocked returns once the foreground is not the shell (or the
// terminal is gone), or the shell is blocked reading the terminal with
// nothing typed left for it to take in, or done is closed, or the wait has
// run out (see shellBlockWait).
//
// Bash acts on a SIGINT cleanly only while it is blocked: readline notes a
// SIGINT that arrives while it is busy, echoes ^C, and leaves bash to act
// on it at the next keystroke, which it then swallows, so the next command
// would lose its first character and no fresh prompt would appear. A shell
// that never blocks (a builtin loop) gets the signal once the wait runs
// out; it is not in readline then.
func (s *session) awaitShellBlocked(done <-chan struct{}) {
	var timer *time.Timer
	for delay := time.Millisecond; ; delay *= 2 {
		fg, err := s.term.foreground()
		if err != nil || fg != s.pid || s.groupWaiting(s.pid, nil) || delay > shellBlockWait {
			return
		}
		if timer == nil {
			timer = time.NewTimer(delay)
			defer timer.Stop()
		} else {
			timer.Reset(delay)
		}
		select {
		case <-timer.C:
		case <-done:
			return
		}
	}
}
