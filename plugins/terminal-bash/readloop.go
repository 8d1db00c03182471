//go:build linux

package terminalbash

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// readLoop waits for the master's output and reads it. It doubles as the
// session's timer: the master's read deadline is set to the next moment
// something is due (armLocked), so a quiet terminal wakes the loop exactly
// then, and output and timers are handled in order.
//
// Every read of the master happens under the session lock together with
// rendering what it returned (here, and in drainLocked), so whoever holds
// the lock can drain the terminal and nothing is ever rendered out of
// order: the control channel's reader settles a command on its end record
// at once, without waking this loop.
func (s *session) readLoop() {
	defer close(s.loopDone)
	var ioErr error
	read := func(fd uintptr) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		buf := getReadBuf()
		defer putReadBuf(buf)
		n, err := unix.Read(int(fd), *buf)
		switch {
		case err == unix.EAGAIN:
			return false // wait until the master is readable
		case err == unix.EINTR:
		case err != nil:
			ioErr = err
		case n == 0:
			ioErr = io.EOF
		default:
			s.consumeLocked((*buf)[:n])
		}
		return true
	}
	for {
		ioErr = nil
		err := s.term.raw.Read(read)
		if err == nil && ioErr == nil {
			s.holdBack()
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			s.wake()
			continue
		}
		// Close took the master away (the session holds the slave, so the
		// master never reports the terminal gone before that).
		if err == nil {
			err = ioErr
		}
		s.mu.Lock()
		closed := s.masterClosed
		s.mu.Unlock()
		if !closed {
			s.log.Warn("terminal read failed", "err", err)
		}
		s.endOfOutput()
		return
	}
}

// readBufSize is how much one read of a master takes at most.
const readBufSize = 64 << 10

// readBufs are the buffers masters are read into. A read happens only once
// the master is readable (or to drain it), and what it returns is rendered
// at once, so a buffer is held for one read and one render: a thousand idle
// sessions hold none, instead of 64 KiB each.
var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

func getReadBuf() *[]byte  { return readBufs.Get().(*[]byte) }
func putReadBuf(b *[]byte) { readBufs.Put(b) }

// readRecords is the control channel's reader: it acts on what the
// plumbing reports, under the session lock, after draining what the
// terminal holds (written before the report). Each read of the FIFO happens
// under the lock too, so a record is either still in the FIFO or handled:
// recordsInFlight can trust what it sees.
func (s *session) readRecords() {
	defer close(s.ctlDone)
	rc, err := s.ctl.out.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 4096)
	var p recordParser
	var ioErr error
	read := func(fd uintptr) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		n, err := unix.Read(int(fd), buf)
		switch {
		case err == unix.EAGAIN:
			return false // wait until the FIFO is readable
		case err == unix.EINTR:
			return true
		case err != nil:
			ioErr = err
		case n == 0:
			ioErr = io.EOF
		default:
			if s.records = p.feed(buf[:n], s.records[:0]); len(s.records) > 0 {
				s.drainLocked(drainProofReads)
				for i := range s.records {
					s.recordLocked(&s.records[i])
				}
				clear(s.records)
			}
			// A short read took all the FIFO held: wait for more at once,
			// without the read that would only say so.
			return n == len(buf)
		}
		return true
	}
	for {
		if err := rc.Read(read); err != nil || ioErr != nil {
			return
		}
	}
}

// consumeLocked renders one chunk of output and hands it on: to the
// scrollback, and to the live send or, between sends, to the unclaimed
// buffer the next send starts with.
func (s *session) consumeLocked(p []byte) {
	if ct := s.curTerm; ct != nil && !ct.closed {
		// What the running command wrote on its own terminal before the
		// shell wrote this (bash's line after a job it interrupted, its
		// job reports) comes first.
		buf := getReadBuf()
		s.drainTermLocked(ct, *buf, cmdDrainReads)
		putReadBuf(buf)
	}
	s.deliverLocked(s.Scr.Write(p))
	now := time.Now()
	s.lastOutput = now
	if s.claim == nil {
		// A program that prints is not waiting: the proof waits until the
		// terminal has been quiet a moment. But never longer than
		// stdinProbeMaxMs since the last probe, or a background job that
		// keeps printing would hide a foreground waiting for input.
		s.probeEvery = s.cfg.probeMin
		s.nextProbe = earliest(now.Add(s.cfg.probeMin), s.lastProbe.Add(s.cfg.probeMax))
	}
	s.armLocked()
}

// deliverLocked hands on the lines the renderer committed: to the
// scrollback, and to the live send or, between sends, to the unclaimed
// lines the next send starts with.
func (s *session) deliverLocked(lines []byte) {
	s.Scr.Keep(lines, s.LiveSend())
}

// holdBack pauses reading while a streaming caller is behind by more than
// maxReadBytes, so the program writing is held back by the terminal instead
// of output being dropped. The send's deadline still applies.
func (s *session) holdBack() { s.holdBackReader(nil, &s.pause) }

// holdBackReader is the wait of holdBack and holdBackCmd: ct is the
// command terminal whose reader waits, nil for the shell's own, and pause
// that reader's reusable timer. It returns when the caller has caught up,
// the send settled, or ct stopped being the running command's terminal.
func (s *session) holdBackReader(ct *cmdTerm, pause **time.Timer) {
	woken := false
	for {
		s.mu.Lock()
		sn := s.Live
		if (ct != nil && s.curTerm != ct) || sn == nil || !sn.Stream() || sn.Out.Len() <= s.cfg.maxRead {
			s.mu.Unlock()
			if woken {
				passResume(s.resume)
			}
			return
		}
		left := time.Until(sn.deadline)
		if left <= 0 {
			s.settleLocked(sn, termapi.WaitTimeout)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if *pause == nil {
			*pause = time.NewTimer(left)
		} else {
			(*pause).Reset(left)
		}
		select {
		case <-s.resume:
			woken = true
		case <-sn.Done():
		case <-(*pause).C:
		}
		(*pause).Stop()
	}
}

// wake runs when the read deadline passes: records arrived, a readiness
// check is due, or the shell has exited and its last output must be
// collected.
func (s *session) wake() {
	s.mu.Lock()
	// The deadline has expired and stays so until it is set again: clear
	// it, so that armLocked's "unchanged" shortcut cannot leave it behind
	// and turn every read into an instant timeout.
	s.term.master.SetReadDeadline(time.Time{})
	s.armed = time.Time{}
	if s.shell == shellReaped {
		s.drainLocked(drainExitReads)
		s.finishExitLocked()
		s.armLocked()
		s.mu.Unlock()
		return
	}
	sn := s.Live
	if sn == nil {
		s.armLocked()
		s.mu.Unlock()
		return
	}
	now := time.Now()
	if !sn.Settled() && !sn.inputBusy() && !now.Before(s.nextProbe) {
		s.lastProbe = now
		gen, learn := s.boundaries, s.claim != nil && s.claim.kind == recordReady
		s.mu.Unlock()
		v := s.probe(learn, now)
		s.mu.Lock()
		if v == sawPrompt || v == sawWaiting {
			// What the terminal holds came before the proof: it belongs to
			// this send. Output that keeps coming is not the foreground's,
			// which is blocked reading (a background job's), and does not
			// make the proof less true.
			s.drainLocked(drainProofReads)
		}
		now = time.Now()
		s.verdictLocked(sn, v, gen, now)
	}
	switch {
	case sn.Settled():
	case !now.Before(sn.deadline):
		s.settleLocked(sn, termapi.WaitTimeout)
	case !sn.startup && !now.Before(s.lastOutput.Add(s.cfg.idle)):
		s.settleLocked(sn, termapi.WaitInferredIdle)
	}
	s.armLocked()
	s.mu.Unlock()
}

// recordLocked acts on one record of the plumbing. An end record with the
// current command's nonce ends the command: only the line typed for it
// carries that nonce. A prompt or ready record is a claim, proven against
// /proc before it counts (see probe); the check is due at once, and then
// at short intervals, since the shell is a few system calls from its
// prompt when it writes one.
func (s *session) recordLocked(r *record) {
	if r.pid != s.pid {
		return // a shell the command started
	}
	switch r.kind {
	case recordEnd:
		c := s.cur
		if c == nil || c.ended || r.nonce != c.nonce {
			s.log.Debug("ignored an end record that is not the current command's")
			return
		}
		s.flags = r.flags
		s.signalled = r.status > 128
		if r.read {
			s.endLocked(termapi.ExecCompleted, r.status, r.notices)
		} else {
			s.log.Warn("the shell could not read its command (its builtins are disabled?)")
			s.endLocked(termapi.ExecAbandoned, -1, r.notices)
		}
		s.idle, s.claim = true, nil
		s.endOutputLocked()
		if sn := s.Live; sn != nil && sn.cmd == c {
			sn.atPrompt = true
			s.settleLocked(sn, termapi.WaitStdinRead)
		}
	case recordPrompt, recordReady:
		if r.kind == recordReady {
			s.ready = true
		}
		claim := *r // r is the reader's scratch
		s.claim = &claim
		s.probeEvery, s.nextProbe = claimProbeMin, time.Now()
		s.armLocked()
	}
}

// claimProbeMin is the first interval of the checks that prove a claim.
const claimProbeMin = 50 * time.Microsecond

// verdict is what one probe of the terminal found.
type verdict uint8

const (
	sawNothing verdict = iota
	// sawPrompt: the shell itself waits for its next command line.
	sawPrompt
	// sawWaiting: the foreground waits for input: a program, or the shell
	// in a read builtin.
	sawWaiting
	// sawNoPlumbing: the shell reached a prompt without installing the
	// plumbing (startup only).
	sawNoPlumbing
	// sawStopped: the shell is stopped.
	sawStopped
	// sawLineEditor: a shell that just installed the plumbing waits in its
	// line editor (it replaced the shell without --noediting).
	sawLineEditor
)

// probe looks at the terminal's foreground, from /proc, without the lock.
// The shell is at its prompt when it is the foreground, blocked in the very
// read(2) it makes for a command line, and has read everything typed; with
// learn (a ready claim), that read is learnt first, for a shell that just
// installed the plumbing (its first prompt, or one that replaced itself).
// Otherwise a foreground blocked reading the terminal waits for input.
func (s *session) probe(learn bool, now time.Time) verdict {
	if proc.Stopped(s.pid) {
		// A stopped shell shows the read it will restart, and takes nothing.
		return sawStopped
	}
	fg, err := s.term.foreground()
	if err != nil || s.term.landInput() != nil {
		return sawNothing
	}
	if fg == s.pid {
		if rd, ok := proc.ReadingTerminal(s.pid, s.term.slaveRdev); ok {
			if n, err := s.term.pendingInput(); err != nil || n > 0 {
				return sawNothing // what was typed is not taken yet
			}
			if s.recordsInFlight() {
				return sawNothing // what the shell reported first comes first
			}
			if learn && rd.FD == 0 && (s.promptRead.Count == 0 || rd.Count == s.promptRead.Count) {
				s.promptRead = rd
			}
			switch {
			case s.promptRead.Count != 0 && rd == s.promptRead:
				return sawPrompt
			case !s.isReady():
				return sawNoPlumbing
			}
			return sawWaiting
		}
		if learn && s.groupWaiting(fg, nil) {
			// Just installed, and waiting in a line editor's read.
			return sawLineEditor
		}
		// The shell is not in a read of the terminal (or could not be
		// seen in one for sure): only another member of its group can be
		// waiting for input, a program that joined the group.
		s.track(now)
		if s.othersWaiting(fg) {
			return sawWaiting
		}
		return sawNothing
	}
	// A program owns the terminal. Its group's leader is probed first, live;
	// only when that proves nothing are the other members (a pipeline)
	// taken from the tracker's walk of /proc, which costs in proportion to
	// every process of the machine.
	if s.groupWaiting(fg, nil) {
		return sawWaiting
	}
	s.track(now)
	if s.groupWaiting(fg, s.snap) {
		return sawWaiting
	}
	return sawNothing
}

// recordsInFlight reports whether the plumbing has written records the
// read loop has not handled: they say more than /proc can.
func (s *session) recordsInFlight() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.ctl.unread()
	return err != nil || n > 0
}

func (s *session) isReady() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

// verdictLocked acts on a probe taken when the boundary count was gen. A
// boundary or a write or interrupt that began meanwhile makes the probe
// stale: nothing seen before a boundary may settle a send after it.
func (s *session) verdictLocked(sn *send, v verdict, gen uint64, now time.Time) {
	switch {
	case sn.Settled():
		return
	case gen != s.boundaries || sn.inputBusy():
		return
	case v == sawPrompt && s.cur == nil && s.claim == nil && !sn.startup:
		// The same read waits for a continuation line of a line typed by
		// hand: without the hook's claim, bash is waiting for input. (An
		// Exec's line never continues: eval reads no more lines.)
		s.settleLocked(sn, termapi.WaitStdinRead)
		return
	case v == sawPrompt && (!sn.startup || s.ready):
		s.atPromptLocked(sn)
		return
	case v == sawWaiting && !sn.startup:
		sn.input = s.term.inputMode()
		s.settleLocked(sn, termapi.WaitStdinRead)
		return
	case v == sawNoPlumbing && sn.startup && !s.initTyped:
		// A startup file replaced PROMPT_COMMAND: type what it would run.
		s.initTyped = true
		if err := s.writeLocked(sn, []byte("\\builtin . "+shellQuote(s.ctl.init)+"\n"), now); err != nil {
			s.log.Warn("typing the shell's plumbing failed", "err", err)
		}
		return
	case v == sawLineEditor && s.claim != nil && !s.claim.editorOff:
		s.claim.editorOff = true
		if err := s.writeLocked(sn, []byte(lineModeLine), now); err != nil {
			s.log.Warn("turning the shell's line editor off failed", "err", err)
		}
		return
	case v == sawStopped && !s.holdingShell:
		s.log.Info("the shell was stopped; continuing it")
		if err := unix.Kill(s.pid, unix.SIGCONT); err == nil {
			s.continued = true
		}
		s.probeEvery, s.nextProbe = claimProbeMin, now
		return
	}
	s.probeEvery = min(2*s.probeEvery, s.cfg.probeMax)
	s.nextProbe = now.Add(s.probeEvery)
}

// atPromptLocked settles sn: the shell is proven at its prompt. A command
// still running has been abandoned (an interrupt ended its line, or it
// replaced the shell), with the status the claim carried.
func (s *session) atPromptLocked(sn *send) {
	status, notices := -1, ""
	if r := s.claim; r != nil {
		s.flags = r.flags
		if r.kind == recordPrompt {
			status, notices = r.status, r.notices
			s.signalled = r.status > 128
		}
	}
	s.endLocked(termapi.ExecAbandoned, status, notices)
	s.idle, s.claim = true, nil
	s.endOutputLocked()
	sn.atPrompt = true
	s.settleLocked(sn, termapi.WaitStdinRead)
}

// endOutputLocked ends the output of what ran since the shell's last
// prompt: an escape sequence or UTF-8 sequence it left unfinished is ended
// here, so it cannot swallow what the next command prints (a terminal
// would go on waiting for its end; a prompt usually ends it).
func (s *session) endOutputLocked() {
	s.deliverLocked(s.Scr.Flush())
	if ct := s.curTerm; ct != nil {
		s.deliverCmdLocked(ct, ct.render.Flush())
	}
}

// drainProofReads bounds the reads made to collect output before a send
// settles: what keeps coming after them is later output, for the next
// send.
const drainProofReads = 16

// drainExitReads bounds the reads made to collect the output of an exited
// shell. The terminal buffers far less than this many chunks, so whatever
// is still coming after them was written after the exit (a background job)
// and belongs to the scrollback, not to the send that ends.
const drainExitReads = 64

// drainLocked reads and consumes what the master holds without blocking,
// at most maxReads chunks. It reports whether the master was found empty,
// which means every byte written to the slave before the call has been
// consumed.
func (s *session) drainLocked(maxReads int) bool {
	if s.masterClosed {
		return true
	}
	s.drainCmdLocked(maxReads)
	buf := getReadBuf()
	defer putReadBuf(buf)
	for range maxReads {
		n, done, err := s.term.readNow(*buf)
		if n > 0 {
			s.consumeLocked((*buf)[:n])
		}
		if done || err != nil {
			return err == nil
		}
	}
	return false
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
	if !snap.WaitingOnTerminals(pgid, s.term.slaveRdev, s.cmdRdevUnlocked()) {
		return false
	}
	pending, err := s.term.pendingInput()
	return err == nil && pending == 0
}

// othersWaiting is groupWaiting for the members of the shell's own group
// other than the shell.
func (s *session) othersWaiting(pgid int) bool {
	if s.snap == nil || s.term.landInput() != nil || !s.snap.OthersWaitingOnTerminals(pgid, s.term.slaveRdev, s.cmdRdevUnlocked()) {
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
	s.deliverLocked(s.Scr.Flush())
	s.Scr.Raw.End()
	s.eof = true
	if s.shell >= shellReaped {
		s.finishExitLocked()
	}
}

// settleLocked ends sn with reason. The send stops receiving output.
func (s *session) settleLocked(sn *send, reason termapi.WaitReason) {
	if sn.Settled() {
		return
	}
	vp, truncated := sn.Viewport(s.partialLocked(), s.cfg.maxRead)
	res := termapi.SendResult{Reason: reason, Viewport: vp, Status: s.status, Truncated: truncated, Prompt: sn.atPrompt, Input: sn.input, RawEnd: s.Scr.Raw.Pos()}
	res.Exec = s.execResultLocked(sn)
	if s.leaves != nil {
		res.LimitsHit = hitsOf(s.leaves.Hits())
	}
	sn.Settle(res)
	if s.Live == sn {
		s.Live = nil
	}
	s.releaseLocked(sn)
	s.armLocked()
}

// partialLocked is the line the terminal is writing: the running command's,
// on its own terminal or the session's.
func (s *session) partialLocked() string {
	if ct := s.curTerm; ct != nil {
		if p := ct.render.Partial(); p != "" {
			return p
		}
	}
	return s.Scr.Render.Partial()
}

// releaseLocked frees the slot once sn has settled and nothing it started
// is still running.
func (s *session) releaseLocked(sn *send) {
	if s.Holder == sn && sn.Settled() && !sn.writing && !sn.cmdWriting && !sn.interrupting && !sn.interruptPending {
		s.Holder = nil
	}
}

// reprobeLocked restarts the proof backoff: something happened (the end of
// a write or an interrupt) after which the terminal may settle soon.
func (s *session) reprobeLocked() {
	s.probeEvery = s.cfg.probeMin
	s.nextProbe = time.Now().Add(s.probeEvery)
	s.armLocked()
}

// boundaryLocked forgets the evidence gathered so far: input is about to
// be typed or a signal sent, and nothing seen before may settle a send
// after it. It runs before the write or kill, so evidence produced in
// response can never be lost to it.
func (s *session) boundaryLocked(now time.Time) {
	s.boundaries++
	s.claim = nil
	s.lastOutput, s.lastProbe = now, now
	s.probeEvery, s.nextProbe = s.cfg.probeMin, now.Add(s.cfg.probeMin)
}

// armLocked sets the master's read deadline to the next moment the read
// loop has something to decide: now when an exit awaits processing,
// otherwise the earliest of the live send's deadline, its silence bound and
// its next proof.
//
// Changing the deadline costs a timer update, and one that comes earlier
// than the runtime's next wakeup breaks its poller: on the path of a quick
// command that is most of what dsh spends. So a deadline more than a grid
// step away is rounded up to the grid, which commands that follow each
// other share, and a deadline that has nothing left to do is left to fire
// once (wake then clears it) rather than cleared at every settle.
func (s *session) armLocked() {
	var at time.Time
	switch sn := s.Live; {
	case s.masterClosed:
		return
	case s.shell == shellReaped && !s.eof:
		at = time.Unix(1, 0)
	case sn != nil:
		at = sn.deadline
		if !sn.startup {
			at = earliest(at, s.lastOutput.Add(s.cfg.idle))
		}
		if !sn.inputBusy() {
			// A busy send's probe waits for resumeLocked.
			at = earliest(at, s.nextProbe)
		}
		if time.Until(at) > deadlineGrid {
			at = at.Truncate(deadlineGrid).Add(deadlineGrid)
		}
	default:
		return // a stale deadline fires once, and wake clears it
	}
	if at.Equal(s.armed) {
		return
	}
	s.armed = at
	s.term.master.SetReadDeadline(at)
}

// deadlineGrid is the step armLocked rounds deadlines up to.
const deadlineGrid = 5 * time.Millisecond

func earliest(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if u.Before(t) {
			t = u
		}
	}
	return t
}

// track refreshes the process tracker, at most every trackerInterval. It
// runs on the probe path, and there only when the members of a process
// group must be known, never for a command that ends with its record or a
// prompt proven from the shell alone: a walk of /proc costs in proportion to
// every process on the machine. A process that leaves the shell's session
// between two refreshes is the cgroup's to catch. Read loop only.
func (s *session) track(now time.Time) {
	if s.target.Tracker == nil || now.Sub(s.lastTracked) < s.cfg.trackerInterval {
		return
	}
	snap, at, err := walks.get(now, s.cfg.trackerInterval)
	if err != nil {
		s.lastTracked = now
		return
	}
	s.lastTracked = at
	if snap != s.snap {
		s.target.Tracker.Refresh(snap)
		s.snap = snap
	}
}

// walks shares the walks of /proc among the sessions of this process.
// Each session probing its group would otherwise walk /proc every
// trackerInterval, and with many sessions busy at once that costs in
// proportion to the sessions times every process of the machine (at 50
// sessions over HTTP, more CPU than the rest of a call). A session takes
// the last walk while it is younger than its interval, and counts its
// interval from when that walk was made: what it sees is never older than
// its own walk at that interval could have been.
var walks sharedWalks

type sharedWalks struct {
	mu    sync.Mutex
	at    time.Time // when snap's walk began
	snap  *proc.Snapshot
	count int // walks made, for tests
}

// get returns a walk of /proc begun less than maxAge before now, and when
// it began, walking again if the last is older.
func (w *sharedWalks) get(now time.Time, maxAge time.Duration) (*proc.Snapshot, time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.snap != nil && now.Sub(w.at) < maxAge {
		return w.snap, w.at, nil
	}
	at := time.Now()
	snap, err := proc.Scan()
	if err != nil {
		return nil, time.Time{}, err
	}
	w.snap, w.at = snap, at
	w.count++
	return snap, at, nil
}
