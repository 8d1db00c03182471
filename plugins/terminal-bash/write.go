package terminalbash

import (
	"bytes"
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
func (s *session) writeLocked(sn *send, p []byte, now time.Time) error {
	s.boundaryLocked(now)
	n, err := s.term.writeNow(p)
	if err != nil {
		return err
	}
	if n == len(p) {
		return nil
	}
	sn.writing = true
	s.workers.Add(1)
	go s.writeRest(sn, bytes.Clone(p[n:]))
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
// input, then SIGINT the foreground group. The send then settles as the
// shell reports, normally when it is back at its prompt. The caller has
// counted it in s.workers. When the shell itself is the foreground and
// busy, the signal waits (briefly) for it to block or to hand the terminal
// to a job; see awaitShellBlocked. Only a closing session or an exited
// shell has nothing left to interrupt.
func (s *session) interrupt(sn *send) {
	defer s.workers.Done()
	s.mu.Lock()
	s.boundaryLocked(time.Now())
	s.idle = false
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
// proofs start over.
func (s *session) resumeLocked(sn *send) {
	if sn.settled || sn.inputBusy() {
		return
	}
	s.reprobeLocked()
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
// An interrupt meant for a command must not reach bash in the moment
// between reading the command's line and handing the terminal to the job
// it starts: bash notes the signal there and goes on to wait for the job,
// which never gets it. So while the shell is the foreground and busy, the
// signal waits until the job has the terminal or the shell blocks. A shell
// that never blocks (a builtin loop) gets the signal once the wait runs
// out, which is what stops it.
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
