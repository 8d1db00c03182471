package inband

import (
	"bytes"
	"errors"
	"io"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// readLoop reads the terminal until its stream ends (the shell exited, the
// connection dropped, or Close). Each chunk is scanned, rendered and acted
// on under the lock, in stream order: what a command printed always comes
// before the marker printed after it.
func (s *Session) readLoop() {
	defer close(s.readDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := s.link.Read(buf)
		if n > 0 {
			read := time.Now()
			s.mu.Lock()
			s.scan.feed(buf[:n], s.outputLocked, s.markerLocked)
			s.lastOutput = time.Now()
			s.probeEvery = probeMin
			if s.sigUnanswered && read.After(s.sigWritten) && s.sigQueued == 0 {
				// The proof may settle again: the clock times it anew.
				s.sigUnanswered = false
				s.kickClock()
			}
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
	s.Scr.Raw.End()
	s.mu.Unlock()
	// The exit status arrives with the channel's close, after the output.
	select {
	case <-s.waitDone:
	case <-s.quit:
	}
	s.mu.Lock()
	s.finishExitLocked()
	s.mu.Unlock()
	// Nothing is left for the link to carry. Its Close waits for it to wind
	// down, so no goroutine of its library outlives the session.
	s.closeLink()
}

// waitExit waits for the shell's exit status (or the link's end) and
// records it.
func (s *Session) waitExit() {
	defer close(s.waitDone)
	st := s.link.Wait()
	s.mu.Lock()
	s.waitStatus = st
	s.mu.Unlock()
}

// finishExitLocked processes the end of the session once its output has
// been read: the status, and the live send settles.
func (s *Session) finishExitLocked() {
	if s.exited {
		return
	}
	s.exited = true
	if !s.status.Exited {
		s.status = s.waitStatus
		s.log.Debug("the shell ended", "status", s.status.String())
	}
	if c := s.cur; c != nil && c.res.State == termapi.ExecPending && c.sent {
		// The line went out and no begin marker came back: the shell may
		// have run it (its marker lost with the connection). Pending would
		// tell the caller it never ran, and a caller that retries would
		// run it twice.
		c.res.State = termapi.ExecRunning
	}
	if sn := s.Live; sn != nil {
		s.settleLocked(sn, termapi.WaitSessionExit)
	}
}

// outputLocked renders output bytes. What comes between typing a
// command's line and the shell taking it waits, for the echo to be removed
// (see releasePreLocked).
func (s *Session) outputLocked(p []byte) {
	if s.retype != 0 && bytes.ContainsFunc(p, isVisible) {
		s.retype = 0 // the job answered
	}
	if c := s.cur; c != nil && c.begun {
		c.printed = true
	}
	if c := s.cur; c != nil && s.ready && !c.preDone {
		c.pre = append(c.pre, p...)
		if len(c.pre) > len(c.typed)+maxPreBytes {
			s.releasePreLocked(c)
		}
		return
	}
	s.renderRawLocked(p)
}

// isVisible reports whether r is more than a line break.
func isVisible(r rune) bool { return r != '\r' && r != '\n' }

// renderRawLocked renders terminal bytes. Before the first prompt they are
// the login's and the plumbing's, not the session's: they are only kept,
// in the startup tail, to explain a start that fails.
func (s *Session) renderRawLocked(p []byte) {
	if !s.ready {
		s.startTail.Append(s.Scr.Render.Write(p))
		return
	}
	s.deliverLocked(s.Scr.Write(p))
}

// deliverLocked hands on the lines the renderer committed: to the
// scrollback, and to whoever they belong to (the ended command's notices,
// the live send, or the next send).
func (s *Session) deliverLocked(lines []byte) {
	if c := s.cur; c != nil && c.ended && !c.over && len(lines) > 0 {
		s.Scr.Scroll.Append(lines)
		c.notices.Append(lines)
		return
	}
	s.Scr.Keep(lines, s.LiveSend())
}

// endOutputLocked ends what a command printed: an escape or UTF-8 sequence
// it left unfinished is ended here, so it cannot swallow what comes next.
func (s *Session) endOutputLocked() {
	if !s.ready {
		s.startTail.Append(s.Scr.Render.Flush())
		return
	}
	s.deliverLocked(s.Scr.Flush())
}

// markerLocked acts on one marker. Begin and end markers count only with
// the current command's nonce, which only its line carries; a prompt
// marker counts only with the session's token.
func (s *Session) markerLocked(payload []byte) {
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
		c.begun, c.begunAt = true, time.Now()
		c.res.State = termapi.ExecRunning
		if c.deferred != 0 {
			s.typeSignalLocked(c.deferred)
			c.deferred = 0
		}
	case markEnd:
		if c == nil || !c.begun || c.ended || m.id != c.nonce {
			return
		}
		c.ended = true
		c.res.State, c.res.ExitCode = termapi.ExecCompleted, m.status
		s.endOutputLocked()
		line := s.breakLineLocked()
		c.partial = line[:max(len(line)-1, 0)]
	case markPrompt:
		if m.id == s.token {
			s.promptLocked(m.status)
		}
	case markShell:
		if !s.ready && m.id == s.token {
			s.farPID = m.status
		}
	}
}

// promptLocked: the shell printed its prompt. During a command, a prompt
// after its begin marker ends it (completed if its end marker came,
// abandoned otherwise: an interrupt cut its line); one before its begin is
// the shell's prompt before it read the line, unless an interrupt
// discarded the line.
func (s *Session) promptLocked(status int) {
	if !s.ready {
		// What ran before is the login's and the plumbing's, not the
		// session's: the session starts on a clean line.
		s.endOutputLocked()
		s.Scr.Render.Break(nil)
		s.ready, s.idle = true, true
		if sn := s.Live; sn != nil && sn.startup {
			sn.atPrompt = true
			s.settleLocked(sn, termapi.WaitStdinRead)
		}
		return
	}
	if c := s.cur; c != nil && !c.over {
		switch {
		case c.ended:
		case c.begun || c.flushed:
			s.releasePreLocked(c)
			c.res.State, c.res.ExitCode = termapi.ExecAbandoned, status
			if !c.begun {
				c.res.ExitCode = -1
			}
			s.endOutputLocked()
		default:
			return // the prompt the shell showed before it took the line
		}
		c.over = true
		s.retype = 0 // nothing is left to interrupt
		c.res.Notices = c.notices.Take()
	}
	s.idle = true
	if sn := s.Live; sn != nil && !sn.startup {
		sn.atPrompt = true
		s.settleLocked(sn, termapi.WaitStdinRead)
	}
}

// settleLocked ends sn with reason. The send stops receiving output.
func (s *Session) settleLocked(sn *send, reason termapi.WaitReason) {
	if sn.Settled() {
		return
	}
	partial := s.Scr.Render.Partial()
	if c := sn.cmd; c != nil && c.ended {
		partial = c.partial
	}
	vp, truncated := sn.Viewport(partial, MaxReadBytes)
	res := termapi.SendResult{Reason: reason, Viewport: vp, Status: s.status, Truncated: truncated, Prompt: sn.atPrompt, RawEnd: s.Scr.Raw.Pos()}
	res.Exec = s.execResultLocked(sn)
	if sn.atPrompt {
		s.answeredLocked(sn)
	}
	sn.Settle(res)
	if s.Live == sn {
		s.Live = nil
	}
	s.releaseLocked(sn)
}

// releaseLocked frees the slot once sn has settled and its writes are over.
func (s *Session) releaseLocked(sn *send) {
	if s.Holder == sn && sn.Settled() && sn.writes == 0 {
		s.Holder = nil
	}
}

// holdBack pauses reading while a streaming caller is more than
// MaxReadBytes behind, so the far program is held back by the link's
// buffers instead of output being dropped. The send's deadline still
// applies (the clock settles it).
func (s *Session) holdBack() {
	for {
		s.mu.Lock()
		sn := s.Live
		if sn == nil || !sn.Stream() || sn.Out.Len() <= MaxReadBytes {
			s.paused = false
			s.mu.Unlock()
			return
		}
		s.paused = true
		s.mu.Unlock()
		select {
		case <-s.resume:
		case <-sn.Done():
		case <-s.quit:
			return
		}
	}
}
