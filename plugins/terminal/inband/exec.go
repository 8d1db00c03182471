package inband

import (
	"context"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/screen"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// command is the command of one Exec, from the moment its line is queued
// until a send has reported how it ended. Guarded by s.mu.
type command struct {
	nonce string
	res   termapi.ExecResult
	// written: the whole line has gone to the terminal.
	written bool
	// sent: the writer has begun writing the line. From then on the server
	// may have it, and a connection that dies before the begin marker
	// arrives leaves unknown whether the shell ran it.
	sent bool
	// begun: the shell took the line (its begin marker), at begunAt.
	begun   bool
	begunAt time.Time
	// printed: the terminal printed something since the begin marker.
	printed bool
	// ended: the line ran to its end (its end marker); the status is in res.
	ended bool
	// over: the shell is back at its prompt after the command.
	over bool
	// flushed: an interrupt was typed before the shell took the line, which
	// it discards; the next prompt means the line is gone.
	flushed bool
	// deferred is the signal character to type once the shell takes the
	// line, for an interrupt that came while the line waited; 0 for none.
	deferred byte
	// partial is the line the command left unfinished, broken off at its
	// end so that what comes next starts on a line of its own.
	partial string
	// notices is what the shell printed between the command's end and its
	// prompt: its job notices.
	notices screen.Pending
	// typed is the text typed for the command; pre holds what the terminal
	// showed after it was typed and before the shell took it, unrendered,
	// until the begin marker (or a prompt, or the end) releases it with the
	// echo of typed removed. preDone: released.
	typed   []byte
	pre     []byte
	preDone bool
}

// maxPreBytes bounds what is held back before a command's begin marker,
// beyond the echo of its own text.
const maxPreBytes = 64 << 10

// Exec runs a command through the shell protocol. See termapi.Executor.
func (s *Session) Exec(ctx context.Context, req termapi.ExecRequest) (termapi.Send, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ExecGate(ctx, req, s.usableLocked(), s.Holder.busyLocked(), s.idle && s.cur == nil); err != nil {
		return nil, err
	}
	now := time.Now()
	c := &command{
		nonce:   backendkit.Nonce(),
		res:     termapi.ExecResult{State: termapi.ExecPending, ExitCode: -1},
		notices: screen.NewPending(MaxReadBytes, false),
	}
	c.res.Background, c.res.BackgroundTruncated = s.Scr.Background()
	sn := newSend(s, req.Stream, s.Deadline(now, req.Timeout), c)
	sn.exec = true
	s.cur, s.Holder, s.Live, s.idle = c, sn, sn, false
	// An interrupt still watched was the previous command's: typed again
	// now, it would reach this one.
	s.retype = 0
	s.lastOutput = now
	s.resetProbeLocked(now)
	c.typed = appendCommandLines(nil, req.Command, c.nonce, s.echoing)
	s.echoing = false
	s.enqueueLocked(&writeJob{sn: sn, cmd: c, data: c.typed})
	sn.Watch(ctx, func() { sn.Cancel() })
	s.kickClock()
	return sn, nil
}

// execResultLocked is how sn reports its command, or nil outside an Exec.
// A command that is over is reported once, and the shell is ready for the
// next.
func (s *Session) execResultLocked(sn *send) *termapi.ExecResult {
	c := sn.cmd
	if c == nil {
		return nil
	}
	res := c.res
	if !sn.exec {
		res.Background, res.BackgroundTruncated = "", false
	}
	if c.over && s.cur == c {
		s.cur = nil
		// The caller has the unfinished line in the viewport; the next
		// command's output starts on a line of its own.
		s.breakLineLocked()
	}
	return &res
}

// breakLineLocked ends the line the terminal is writing, if any (see
// backendkit.Screen.Break).
func (s *Session) breakLineLocked() string { return s.Scr.Break() }

// releasePreLocked renders what the terminal showed before the shell took
// c's line, without the echo of that line.
func (s *Session) releasePreLocked(c *command) {
	if c.preDone {
		return
	}
	c.preDone = true
	pre, echoed := stripEcho(c.pre, c.typed)
	c.pre = nil
	if echoed {
		s.echoing = true
	}
	if len(pre) > 0 {
		s.renderRawLocked(pre)
	}
}
