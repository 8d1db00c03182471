package terminalbash

import (
	"errors"
	"os"
	"time"

	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal-bash/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal-bash/internal/screen"
)

// readLoop is the only reader of the master. It doubles as the session's
// timer: the master's read deadline is set to the next moment a readiness
// tier is due (armLocked), so a quiet terminal wakes the loop exactly then,
// and output and timers are handled by one goroutine in order.
func (s *session) readLoop() {
	defer close(s.loopDone)
	for {
		n, err := s.term.master.Read(s.rbuf)
		if n > 0 {
			s.consume(s.rbuf[:n])
			s.holdBack()
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			s.wake()
		default:
			// Close took the master away (the session holds the slave, so
			// the master never reports the terminal gone before that).
			if !errors.Is(err, os.ErrClosed) {
				s.log.Warn("terminal read failed", "err", err)
			}
			s.endOfOutput()
			return
		}
	}
}

// consume renders one chunk of output and hands it on: to the scrollback,
// and to the live send or, between sends, to the unclaimed buffer the next
// send starts with.
func (s *session) consume(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.segs = s.filter.Feed(s.segs[:0], p)
	s.renderLocked()
	now := time.Now()
	s.lastOutput = now
	s.probeEvery, s.nextProbe = s.cfg.probeMin, now.Add(s.cfg.probeMin)
	s.checkPromptLocked()
	s.armLocked()
}

// renderLocked passes the filtered segments through the line renderer and
// the prompt evidence, then delivers the committed lines.
func (s *session) renderLocked() {
	out := s.committed[:0]
	for i := range s.segs {
		seg := &s.segs[i]
		switch seg.Kind {
		case screen.Prompt:
			s.ev.sawMarker()
		case screen.Text:
			s.ev.sawText(seg.Text)
			out = s.lines.Write(out, *seg)
		default:
			s.ev.poison()
			out = s.lines.Write(out, *seg)
		}
		seg.Text = "" // let the chunk's text go
	}
	s.partialStale = true
	if len(out) > 0 {
		s.scroll.Append(out)
		if sn := s.live; sn != nil {
			sn.out.append(out)
			sn.notify()
		} else {
			s.unclaimed.append(out)
		}
	}
	if cap(out) > 1<<20 {
		out = nil
	}
	s.committed = out
}

// syncPartialLocked brings the scrollback's partial line up to date. It is
// done on demand rather than per chunk, since it costs an allocation.
func (s *session) syncPartialLocked() {
	if s.partialStale {
		s.scroll.SetPartial(s.lines.Partial())
		s.partialStale = false
	}
}

// checkPromptLocked is tier 0: the live send settles as soon as the output
// ends in the controlled prompt and the shell owns the terminal again. A
// nested shell that inherited the prompt prints the same text while it,
// not ours, is in the foreground; the stdin proof handles that case.
func (s *session) checkPromptLocked() {
	if s.live == nil || s.live.inputBusy() || !s.ev.atPrompt() {
		return
	}
	if fg, err := s.term.foreground(); err == nil && fg == s.pid {
		// Only this tier knows it is the shell's own prompt: the stdin
		// proof cannot tell bash at its prompt from bash running `read`.
		s.live.atPrompt = true
		s.settleLocked(s.live, terminal.WaitStdinRead)
	}
}

// holdBack pauses reading while a streaming caller is behind by more than
// maxReadBytes, so the program writing is held back by the terminal instead
// of output being dropped. The send's deadline still applies.
func (s *session) holdBack() {
	for {
		s.mu.Lock()
		sn := s.live
		if sn == nil || !sn.stream || len(sn.out.data) <= s.cfg.maxRead {
			s.mu.Unlock()
			return
		}
		left := time.Until(sn.deadline)
		if left <= 0 {
			s.settleLocked(sn, terminal.WaitTimeout)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if s.pause == nil {
			s.pause = time.NewTimer(left)
		} else {
			s.pause.Reset(left)
		}
		select {
		case <-s.resume:
		case <-sn.done:
		case <-s.pause.C:
		}
		s.pause.Stop()
	}
}

// wake runs when the read deadline passes: a readiness tier is due, or the
// shell has exited and its last output must be collected.
func (s *session) wake() {
	s.mu.Lock()
	// The deadline has expired and stays so until it is set again: clear
	// it, so that armLocked's "unchanged" shortcut cannot leave it behind
	// and turn every read into an instant timeout.
	s.term.master.SetReadDeadline(time.Time{})
	s.armed = time.Time{}
	if s.exitSeen && !s.exited {
		s.mu.Unlock()
		s.drain(drainExitReads)
		s.mu.Lock()
		s.finishExitLocked()
		s.armLocked()
		s.mu.Unlock()
		return
	}
	sn := s.live
	if sn == nil {
		s.armLocked()
		s.mu.Unlock()
		return
	}
	now := time.Now()
	if !sn.startup && !sn.inputBusy() && !now.Before(s.nextProbe) {
		gen := s.boundaries
		s.mu.Unlock()
		s.track(now)
		proven := s.proveWaiting() && s.drain(drainProofReads)
		s.mu.Lock()
		now = time.Now()
		s.proofLocked(sn, proven, gen, now)
	}
	switch {
	case sn.settled:
	case !now.Before(sn.deadline):
		s.settleLocked(sn, terminal.WaitTimeout)
	case !sn.startup && !now.Before(s.lastOutput.Add(s.cfg.idle)):
		s.settleLocked(sn, terminal.WaitInferredIdle)
	}
	s.armLocked()
	s.mu.Unlock()
}

// proofLocked acts on the outcome of a stdin proof that was taken without
// the lock, when the boundary count was gen. A boundary (a signal, an
// interrupt) or a write or interrupt that began meanwhile makes the proof
// stale: nothing seen before a boundary may settle a send after it, and
// tiers 0 and 1 are off while the send's input is busy. The boundary has
// already rescheduled the probe, and the end of the write or interrupt
// does (resumeLocked).
func (s *session) proofLocked(sn *send, proven bool, gen uint64, now time.Time) {
	switch {
	case sn.settled:
	case gen != s.boundaries || sn.inputBusy():
	case proven:
		// The drain may have brought the prompt in: then the shell is at
		// its prompt, which says more than "something waits for input".
		if s.checkPromptLocked(); !sn.settled {
			s.settleLocked(sn, terminal.WaitStdinRead)
		}
	default:
		s.probeEvery = min(2*s.probeEvery, s.cfg.probeMax)
		s.nextProbe = now.Add(s.probeEvery)
	}
}

// drainProofReads bounds the reads made to collect output before a proven
// wait settles: a terminal that keeps producing output is not idle, and
// the loop goes back to its normal reading.
const drainProofReads = 16

// drainExitReads bounds the reads made to collect the output of an exited
// shell. The terminal buffers far less than this many chunks, so whatever
// is still coming after them was written after the exit (a background job)
// and belongs to the scrollback, not to the send that ends.
const drainExitReads = 64

// drain reads and consumes what the master holds without blocking, at most
// maxReads chunks. It reports whether the master was found empty, which
// means every byte written to the slave before the call has been consumed.
func (s *session) drain(maxReads int) bool {
	for range maxReads {
		n, done, err := s.term.readNow(s.rbuf)
		if n > 0 {
			s.consume(s.rbuf[:n])
		}
		if done || err != nil {
			return err == nil
		}
	}
	return false
}

// proveWaiting is tier 1: the foreground group is blocked reading the
// terminal and has read everything typed into it. When the foreground is
// the shell itself, that means bash sits in a builtin read (read, a
// continuation prompt, a prompt without marker); otherwise a program
// (cat, an interpreter, a pager, a password prompt) waits for input.
func (s *session) proveWaiting() bool {
	fg, err := s.term.foreground()
	return err == nil && s.groupWaiting(fg, s.snap)
}

// groupWaiting reports whether some process of group pgid is blocked
// reading the terminal while nothing typed is left unread.
//
// Text written to the master reaches the slave's input queue through a
// kernel work item, so right after a write the queue can look empty while
// the reader still blocks in the wait from before it. landInput makes the
// kernel finish that hand-over first; after it, an empty queue and a
// blocked reader mean the reader has taken everything and waits for more.
// (Signals need no such step: kill wakes a blocked reader before it
// returns, and /proc shows a woken thread as running.)
//
// The group's leader is probed live; its other members (a pipeline) come
// from snap, the tracker's latest /proc walk, so a probe never walks /proc
// itself. A member that joined since is missed until the next walk, which
// only delays a proof. An empty snapshot probes the leader alone.
func (s *session) groupWaiting(pgid int, snap *proc.Snapshot) bool {
	if err := s.term.landInput(); err != nil {
		return false
	}
	if snap == nil {
		snap = &proc.Snapshot{}
	}
	if !snap.WaitingOnTerminal(pgid, s.term.slaveRdev) {
		return false
	}
	pending, err := s.term.pendingInput()
	return err == nil && pending == 0
}

// endOfOutput runs when the read loop ends, which is when Close has closed
// the master.
func (s *session) endOfOutput() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.segs = s.filter.Flush(s.segs[:0])
	s.renderLocked()
	s.eof = true
	if s.exitSeen {
		s.finishExitLocked()
	}
}

// settleLocked ends sn with reason. The send stops receiving output; the
// session keeps the evidence, so a following empty send can reuse it.
func (s *session) settleLocked(sn *send, reason terminal.WaitReason) {
	if sn.settled {
		return
	}
	s.syncPartialLocked()
	vp, truncated := sn.viewport(s.lines.Partial(), s.cfg.maxRead)
	sn.result = terminal.SendResult{Reason: reason, Viewport: vp, Status: s.status, Truncated: truncated, Prompt: sn.atPrompt}
	sn.settled = true
	close(sn.done)
	if sn.stopWatch != nil {
		sn.stopWatch()
	}
	if s.live == sn {
		s.live = nil
	}
	s.releaseLocked(sn)
	s.armLocked()
}

// releaseLocked frees the slot once sn has settled and nothing it started
// is still running.
func (s *session) releaseLocked(sn *send) {
	if s.slot == sn && sn.settled && !sn.writing && !sn.interrupting && !sn.interruptPending {
		s.slot = nil
	}
}

// reprobeLocked restarts the stdin-proof backoff: something happened (the
// end of a write or an interrupt) after which the terminal may settle soon.
func (s *session) reprobeLocked() {
	s.probeEvery = s.cfg.probeMin
	s.nextProbe = time.Now().Add(s.probeEvery)
	s.armLocked()
}

// boundaryLocked forgets the readiness evidence gathered so far: input is
// about to be typed or a signal sent, and nothing the terminal showed before
// may settle a send after it. It runs before the write or kill, so evidence
// produced in response can never be lost to it.
func (s *session) boundaryLocked(now time.Time) {
	s.boundaries++
	s.ev = evidence{}
	s.lastOutput = now
	s.probeEvery, s.nextProbe = s.cfg.probeMin, now.Add(s.cfg.probeMin)
}

// armLocked sets the master's read deadline to the next moment the read
// loop has something to decide: now when an exit awaits processing,
// otherwise the earliest of the live send's deadline, its silence bound
// and its next stdin proof. No live send, no deadline.
func (s *session) armLocked() {
	var at time.Time
	switch sn := s.live; {
	case s.masterClosed:
		return
	case s.exitSeen && !s.exited && !s.eof:
		at = time.Unix(1, 0)
	case sn != nil:
		at = sn.deadline
		if !sn.startup {
			at = earliest(at, s.lastOutput.Add(s.cfg.idle))
		}
		if !sn.startup && !sn.inputBusy() {
			// A busy send's probe waits for resumeLocked.
			at = earliest(at, s.nextProbe)
		}
	}
	if at.Equal(s.armed) {
		return
	}
	s.armed = at
	s.term.master.SetReadDeadline(at)
}

func earliest(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if u.Before(t) {
			t = u
		}
	}
	return t
}

// track refreshes the process tracker, at most every trackerInterval. It
// runs on the probe path, never on the prompt path, so quick commands do not
// pay for a /proc walk; a process that leaves the shell's session between
// two refreshes is the cgroup's to catch. Read loop only.
func (s *session) track(now time.Time) {
	if s.target.Tracker == nil || now.Sub(s.lastTracked) < s.cfg.trackerInterval {
		return
	}
	s.lastTracked = now
	if snap, err := proc.Scan(); err == nil {
		s.target.Tracker.Refresh(snap)
		s.snap = snap
	}
}
