//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// command is the command of one Exec, from the moment it is handed to the
// shell until a send has reported how it ended. Guarded by s.mu.
type command struct {
	nonce string
	res   termapi.ExecResult
	ended bool
	// inline: the command was typed on its line, not written into the
	// input channel (see appendCommandLine).
	inline bool
	// term is the terminal the command writes to; nil: the session's.
	term *cmdTerm
	// captured: ExecRequest.Captured; SIGTSTP to its job ends its line.
	captured bool
}

// Exec runs a command through the shell protocol. See termapi.Executor.
func (s *session) Exec(ctx context.Context, req termapi.ExecRequest) (termapi.Send, error) {
	return s.exec(ctx, req, "")
}

// exec is Exec with a tail for the typed line (see appendLine).
func (s *session) exec(ctx context.Context, req termapi.ExecRequest, tail string) (termapi.Send, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signalled && s.idle && s.cur == nil {
		s.signalled = false
		s.mu.Unlock()
		s.awaitJobReaders()
		s.mu.Lock()
	}
	if err := s.ExecGate(ctx, req, s.usableLocked(), s.Holder.busyLocked(), s.idle && s.cur == nil); err != nil {
		return nil, err
	}
	// The shell's own group must own the terminal: only the shell may read
	// the line that carries the command's nonce.
	if fg, err := s.term.foreground(); err != nil || fg != s.pid {
		if !s.target.Shell.Alive() {
			// Dead before its reaper said so: report it as an exit, with
			// the status the reaper is about to record.
			s.mu.Unlock()
			<-s.waitDone
			s.mu.Lock()
			if err := s.usableLocked(); err != nil {
				return nil, err
			}
			return nil, s.Errorf("%w", termapi.ErrSessionExited)
		}
		return nil, s.Errorf("%w: another process group holds the terminal", termapi.ErrShellBusy)
	}
	if err := s.term.lineMode(); err != nil {
		return nil, s.Errorf("exec: %w", err)
	}

	now := time.Now()
	s.since, s.sinceSet = proc.Now(), true
	c := &command{nonce: backendkit.Nonce(), res: termapi.ExecResult{State: termapi.ExecPending, ExitCode: -1}}
	c.res.Background, c.res.BackgroundTruncated = s.Scr.Background()
	sn := newSend(s, req.Stream, s.Deadline(now, req.Timeout), c)
	sn.exec = true

	c.captured = req.Captured
	if req.Captured && !mentionsExec(req.Command) {
		c.term = s.termForCommandLocked()
	}
	redirect := ""
	if c.term != nil {
		redirect = c.term.path
	}
	s.lineBuf, c.inline = appendLine(s.lineBuf[:0], req.Command, c.nonce, s.flags, redirect, tail)
	var input []byte
	n := 0
	if !c.inline {
		// The command goes first, so the shell finds it when it reads the
		// line.
		input = []byte(req.Command)
		var err error
		if n, err = s.ctl.writeNow(input); err != nil {
			return nil, s.Errorf("exec: write the command: %w", err)
		}
	}
	s.cur, s.Holder, s.Live, s.idle = c, sn, sn, false
	s.curTerm = c.term
	if err := s.writeLocked(sn, s.lineBuf, now); err != nil {
		s.cur, s.Holder, s.Live = nil, nil, nil
		s.curTerm = nil
		if c.term != nil && s.spare == nil {
			s.spare = c.term
		}
		if rerr := s.ctl.resetInput(); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, s.Errorf("exec: write: %w", err)
	}
	if n < len(input) {
		// The rest goes in while the shell reads it.
		sn.cmdWriting = true
		s.workers.Add(1)
		go s.writeCommandRest(sn, s.ctl.in, input[n:])
	}
	sn.Watch(ctx, func() { sn.Cancel() })
	s.armLocked()
	return sn, nil
}

// writeCommandRest writes the part of a command that did not fit into the
// input channel at once. It ends when the shell has read it all, or when the
// channel is reset or closed.
func (s *session) writeCommandRest(sn *send, in *os.File, rest []byte) {
	defer s.workers.Done()
	_, err := in.Write(rest)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrClosed) && s.phase == sessionOpen {
		s.log.Warn("writing a command to the shell failed", "err", err)
	}
	sn.cmdWriting = false
	s.releaseLocked(sn)
}

// execResultLocked is how sn reports the state of its command, or nil
// outside an Exec. A command that has ended is reported once, and the
// session is ready for the next.
func (s *session) execResultLocked(sn *send) *termapi.ExecResult {
	c := sn.cmd
	if c == nil {
		return nil
	}
	if c.res.State == termapi.ExecPending && s.commandTakenLocked(sn) {
		c.res.State = termapi.ExecRunning
	}
	res := c.res
	if !sn.exec {
		res.Background, res.BackgroundTruncated = "", false
	}
	// What earlier commands' jobs printed on their terminals meanwhile.
	if s.jobOut.Len() > 0 || s.jobOut.Dropped() {
		res.Background += s.jobOut.Take()
		res.BackgroundTruncated = res.BackgroundTruncated || s.jobOut.TakeDropped()
	}
	res.Continued, s.continued = s.continued, false
	if c.ended && s.cur == c {
		s.cur = nil
		// The caller has the line being written in the viewport; the next
		// command's output starts on a line of its own.
		s.breakLineLocked()
		if ct := c.term; ct != nil && s.curTerm == ct {
			s.curTerm = nil
			s.releaseCmdTermLocked(ct)
		}
	}
	return &res
}

// commandTakenLocked reports whether the shell has read the whole command
// from the input channel.
func (s *session) commandTakenLocked(sn *send) bool {
	if sn.cmdWriting {
		return false
	}
	if sn.cmd.inline {
		// The command is on its line: taken once the shell read the line,
		// which nothing else reads while it is unread (see Exec).
		if sn.writing || s.term.landInput() != nil {
			return false
		}
		n, err := s.term.pendingInput()
		return err == nil && n == 0
	}
	n, err := s.ctl.pending()
	return err == nil && n == 0
}

// endLocked records that the shell ended the current command: completed
// with status when the end record came, abandoned otherwise. What the
// shell did not read of the command is discarded, so the next command
// starts clean.
func (s *session) endLocked(state termapi.ExecState, status int, notices string) {
	c := s.cur
	if c == nil || c.ended {
		return
	}
	c.ended = true
	c.res.State, c.res.ExitCode, c.res.Notices = state, status, notices
	if state != termapi.ExecCompleted {
		if n, err := s.ctl.pending(); err != nil || n > 0 || s.Holder != nil && s.Holder.cmdWriting {
			if err := s.ctl.resetInput(); err != nil {
				s.log.Warn("resetting the command channel failed", "err", err)
			}
		}
	}
}

// breakLineLocked ends the line the terminal is writing, if any (see
// backendkit.Screen.Break).
func (s *session) breakLineLocked() string { return s.Scr.Break() }
