package terminalssh

import (
	"errors"
	"io"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/dshdev/dsh/plugins/terminal"
)

// readLoop reads the terminal until its stream ends (the shell exited, the
// connection dropped, or Close). Each chunk is scanned, rendered and acted
// on under the lock, in stream order: what a command printed always comes
// before the marker printed after it.
func (s *session) readLoop() {
	defer close(s.readDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := s.stdout.Read(buf)
		if n > 0 {
			s.mu.Lock()
			s.scan.feed(buf[:n], s.outputLocked, s.markerLocked)
			s.lastOutput = time.Now()
			s.mu.Unlock()
			s.holdBack()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Debug("terminal read failed", "err", err)
			}
			break
		}
	}
	s.mu.Lock()
	s.scan.flush(s.outputLocked)
	if c := s.cur; c != nil {
		s.releasePreLocked(c)
	}
	s.endOutputLocked()
	s.mu.Unlock()
	// The exit status arrives with the channel's close, after the output.
	select {
	case <-s.waitDone:
	case <-s.quit:
	}
	s.mu.Lock()
	s.finishExitLocked()
	s.mu.Unlock()
	// Nothing is left for the connection to carry. Waiting for it to wind
	// down means no goroutine of the library outlives the session.
	s.client.Close()
	_ = s.client.Wait()
}

// waitExit waits for the remote shell's exit status (or the connection's
// end) and records it.
func (s *session) waitExit() {
	defer close(s.waitDone)
	err := s.remote.Wait()
	s.mu.Lock()
	s.waitErr = err
	s.mu.Unlock()
}

// finishExitLocked processes the end of the session once its output has
// been read: the status, and the live send settles.
func (s *session) finishExitLocked() {
	if s.exited {
		return
	}
	s.exited = true
	if !s.status.Exited {
		s.status = exitStatus(s.waitErr)
		s.log.Debug("the remote shell ended", "status", s.status.String(), "err", s.waitErr)
	}
	if c := s.cur; c != nil && c.res.State == terminal.ExecPending && c.sent {
		// The line went out and no begin marker came back: the shell may
		// have run it (its marker lost with the connection). Pending would
		// tell the caller it never ran, and a caller that retries would
		// run it twice.
		c.res.State = terminal.ExecRunning
	}
	if sn := s.live; sn != nil {
		s.settleLocked(sn, terminal.WaitSessionExit)
	}
}

// exitStatus turns how the remote session ended into a status: the exit
// code, the signal that killed the shell, or unknown (-1) for a connection
// that ended without saying.
func exitStatus(err error) terminal.Status {
	if err == nil {
		return terminal.Status{Exited: true, ExitCode: 0}
	}
	if ee, ok := errors.AsType[*ssh.ExitError](err); ok {
		if sig := ee.Signal(); sig != "" {
			return terminal.Status{Exited: true, ExitCode: -1, Signal: "SIG" + sig}
		}
		return terminal.Status{Exited: true, ExitCode: ee.ExitStatus()}
	}
	return terminal.Status{Exited: true, ExitCode: -1}
}

// outputLocked renders output bytes. What comes between typing a
// command's line and the shell taking it waits, for the echo to be removed
// (see releasePreLocked).
func (s *session) outputLocked(p []byte) {
	if c := s.cur; c != nil && s.ready && !c.preDone {
		c.pre = append(c.pre, p...)
		if len(c.pre) > len(c.typed)+maxPreBytes {
			s.releasePreLocked(c)
		}
		return
	}
	s.renderRawLocked(p)
}

// renderRawLocked renders terminal bytes.
func (s *session) renderRawLocked(p []byte) {
	s.segs = s.filter.Feed(s.segs[:0], p)
	s.renderLocked()
}

// renderLocked passes the filtered segments through the line renderer and
// delivers the committed lines: before the first prompt to the startup
// tail only; then to the scrollback and to whoever they belong to (the
// ended command's notices, the live send, or the next send).
func (s *session) renderLocked() {
	out := s.committed[:0]
	for i := range s.segs {
		out = s.lines.Write(out, s.segs[i])
		s.segs[i].Text = "" // let the chunk's text go
	}
	s.partialStale = true
	switch {
	case len(out) == 0:
	case !s.ready:
		s.startTail.Append(out)
	default:
		s.scroll.Append(out)
		if c := s.cur; c != nil && c.ended && !c.over {
			c.notices.Append(out)
		} else if sn := s.live; sn != nil {
			sn.out.Append(out)
			sn.notify()
		} else {
			s.unclaimed.Append(out)
		}
	}
	if cap(out) > 1<<20 {
		out = nil
	}
	s.committed = out
}

// endOutputLocked ends what a command printed: an escape or UTF-8 sequence
// it left unfinished is ended here, so it cannot swallow what comes next.
func (s *session) endOutputLocked() {
	s.segs = s.filter.Flush(s.segs[:0])
	s.renderLocked()
}

// syncPartialLocked brings the scrollback's partial line up to date. It is
// done on demand rather than per chunk, since it costs an allocation.
func (s *session) syncPartialLocked() {
	if s.partialStale && s.ready {
		s.scroll.SetPartial(s.lines.Partial())
	}
	s.partialStale = false
}

// markerLocked acts on one marker. Begin and end markers count only with
// the current command's nonce, which only its line carries; a prompt
// marker counts only with the session's token.
func (s *session) markerLocked(payload []byte) {
	m, ok := parseMarker(payload)
	if !ok {
		return
	}
	c := s.cur
	switch m.kind {
	case markBegin:
		if c == nil || c.begun || m.id != c.nonce {
			return
		}
		s.releasePreLocked(c)
		c.begun = true
		c.res.State = terminal.ExecRunning
		if c.deferred != 0 {
			s.enqueueLocked(&writeJob{data: []byte{c.deferred}})
			c.deferred = 0
		}
	case markEnd:
		if c == nil || !c.begun || c.ended || m.id != c.nonce {
			return
		}
		c.ended = true
		c.res.State, c.res.ExitCode = terminal.ExecCompleted, m.status
		s.endOutputLocked()
		line := s.breakLineLocked()
		c.partial = line[:max(len(line)-1, 0)]
	case markPrompt:
		if m.id == s.token {
			s.promptLocked(m.status)
		}
	}
}

// promptLocked: the shell printed its prompt. During a command, a prompt
// after its begin marker ends it (completed if its end marker came,
// abandoned otherwise: an interrupt cut its line); one before its begin is
// the shell's prompt before it read the line, unless an interrupt
// discarded the line.
func (s *session) promptLocked(status int) {
	if !s.ready {
		// What ran before is the login's and the plumbing's, not the
		// session's: the session starts on a clean line.
		s.endOutputLocked()
		s.lines.Break(nil)
		s.ready, s.idle = true, true
		if sn := s.live; sn != nil && sn.startup {
			sn.atPrompt = true
			s.settleLocked(sn, terminal.WaitStdinRead)
		}
		return
	}
	if c := s.cur; c != nil && !c.over {
		switch {
		case c.ended:
		case c.begun || c.flushed:
			s.releasePreLocked(c)
			c.res.State, c.res.ExitCode = terminal.ExecAbandoned, status
			if !c.begun {
				c.res.ExitCode = -1
			}
			s.endOutputLocked()
		default:
			return // the prompt the shell showed before it took the line
		}
		c.over = true
		c.res.Notices = c.notices.Take()
	}
	s.idle = true
	if sn := s.live; sn != nil && !sn.startup {
		sn.atPrompt = true
		s.settleLocked(sn, terminal.WaitStdinRead)
	}
}

// settleLocked ends sn with reason. The send stops receiving output.
func (s *session) settleLocked(sn *send, reason terminal.WaitReason) {
	if sn.settled {
		return
	}
	partial := s.lines.Partial()
	if c := sn.cmd; c != nil && c.ended {
		partial = c.partial
	}
	vp, truncated := sn.viewport(partial, maxReadBytes)
	sn.result = terminal.SendResult{Reason: reason, Viewport: vp, Status: s.status, Truncated: truncated, Prompt: sn.atPrompt}
	sn.result.Exec = s.execResultLocked(sn)
	if sn.atPrompt {
		s.answeredLocked(sn)
	}
	sn.settled = true
	close(sn.done)
	if sn.stopWatch != nil {
		sn.stopWatch()
	}
	if s.live == sn {
		s.live = nil
	}
	s.releaseLocked(sn)
}

// releaseLocked frees the slot once sn has settled and its writes are over.
func (s *session) releaseLocked(sn *send) {
	if s.slot == sn && sn.settled && sn.writes == 0 {
		s.slot = nil
	}
}

// holdBack pauses reading while a streaming caller is more than
// maxReadBytes behind, so the remote program is held back by the SSH
// window instead of output being dropped. The send's deadline still
// applies (the clock settles it).
func (s *session) holdBack() {
	for {
		s.mu.Lock()
		sn := s.live
		if sn == nil || !sn.stream || sn.out.Len() <= maxReadBytes {
			s.paused = false
			s.mu.Unlock()
			return
		}
		s.paused = true
		s.mu.Unlock()
		select {
		case <-s.resume:
		case <-sn.done:
		case <-s.quit:
			return
		}
	}
}
