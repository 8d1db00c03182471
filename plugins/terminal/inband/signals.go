package inband

import (
	"context"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// The terminal characters that make the remote line discipline signal the
// foreground process group, as a keyboard does (the PTY is requested with
// ISIG and these defaults).
const (
	ctrlC         = 0x03 // VINTR: SIGINT
	ctrlZ         = 0x1a // VSUSP: SIGTSTP
	ctrlBackslash = 0x1c // VQUIT: SIGQUIT
)

// signalChars maps the signals a terminal character can deliver.
var signalChars = map[termapi.Signal]byte{
	termapi.SIGINT:  ctrlC,
	termapi.SIGTSTP: ctrlZ,
	termapi.SIGQUIT: ctrlBackslash,
}

// Signal delivers SIGINT, SIGTSTP or SIGQUIT to the remote terminal's
// foreground group by typing its character. Nothing over the link reaches
// that group otherwise: SIGTERM, SIGHUP and SIGCONT have no character and
// are unsupported, and
// SIGKILL is always refused, since whether the shell itself is in the
// foreground cannot be told from here (Close ends the session instead).
// While the shell is idle at its prompt there is nothing to signal, and
// nothing is typed.
func (s *Session) Signal(ctx context.Context, sig termapi.Signal) (termapi.SignalResult, error) {
	char, ok := signalChars[sig]
	switch {
	case sig == termapi.SIGKILL:
		return termapi.SignalResult{}, s.Errorf("%w (the far end does not say whether the shell itself is in the foreground)", termapi.ErrRefuseKillShell)
	case !ok && (sig == termapi.SIGTERM || sig == termapi.SIGHUP || sig == termapi.SIGCONT):
		return termapi.SignalResult{}, s.Errorf("%w: %s has no terminal character, and the foreground process group cannot be reached otherwise", termapi.ErrUnsupportedSignal, sig)
	case !ok:
		return termapi.SignalResult{}, s.Errorf("%w: %q", termapi.ErrUnsupportedSignal, sig)
	case ctx.Err() != nil:
		return termapi.SignalResult{}, s.Errorf("signal: %w", context.Cause(ctx))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return termapi.SignalResult{}, err
	}
	if !s.idle {
		s.interruptLocked(char)
	}
	return termapi.SignalResult{}, nil
}

// interruptLocked types a signal character, after abandoning text not yet
// written: an interrupted send's text must not run afterwards. The
// character also discards what the terminal holds unread, as the line
// discipline does for every signal character.
//
// A command whose line has been typed whole but not yet taken by the shell
// is interrupted once the shell takes it (its begin marker): the character
// must reach the command, not the shell about to read it, whose line it
// would discard. A command whose line was cut short is over as soon as the
// shell is back at its prompt.
func (s *Session) interruptLocked(char byte) {
	cut := s.abandonWritesLocked()
	c := s.cur
	if c != nil && !c.begun && !c.over {
		if c.written && !cut {
			c.deferred = char
			return
		}
		c.flushed = true
	}
	s.idle = false
	s.typeSignalLocked(char)
}

// typeSignalLocked queues a signal character for the terminal, and watches
// whether it was lost (see retypeLocked).
func (s *Session) typeSignalLocked(char byte) {
	s.enqueueLocked(&writeJob{data: []byte{char}, signal: true})
	s.retype = 0
	c := s.cur
	now := time.Now()
	if c == nil || !c.begun || c.over || c.printed || now.Sub(c.begunAt) > retypeWindow {
		return
	}
	s.retype, s.retypeEvery = char, retypeFirst
	s.retypeAt = now.Add(retypeFirst)
	s.kickClock()
}

// An interrupt can be lost. Between printing a command's begin marker and
// the command's job taking the terminal for itself, the shell is the
// terminal's foreground: a signal character typed then signals only the
// shell, which notes it and waits for the job. A character typed for a
// command that began a moment ago and has printed nothing is therefore
// typed again until the command is over or prints something (the shell's
// own answer is a bare newline): after retypeFirst, then at doubling
// intervals, up to retypeLast.
const (
	retypeWindow = time.Second
	retypeFirst  = 250 * time.Millisecond
	retypeLast   = 2 * time.Second
)

// retypeLocked types the watched signal character again when it is due,
// and returns when to look next (zero: nothing is watched).
func (s *Session) retypeLocked(now time.Time) time.Time {
	if s.retype == 0 {
		return time.Time{}
	}
	if c := s.cur; c == nil || c.over {
		s.retype = 0
		return time.Time{}
	}
	if now.Before(s.retypeAt) {
		return s.retypeAt
	}
	s.log.Debug("the terminal did not answer an interrupt; typing it again")
	s.enqueueLocked(&writeJob{data: []byte{s.retype}, signal: true})
	if s.retypeEvery >= retypeLast {
		s.retype = 0
		return time.Time{}
	}
	s.retypeEvery *= 2
	s.retypeAt = now.Add(s.retypeEvery)
	return s.retypeAt
}

// EndCommand is unsupported: the processes at the far end cannot be told
// apart from here.
func (s *Session) EndCommand(ctx context.Context) (int, error) {
	return termapi.Unsupported{}.EndCommand(ctx)
}
