//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// closeCall is one Close in progress; concurrent callers share it.
type closeCall struct {
	done chan struct{}
	err  error
}

// waitShell reaps the shell. The exit itself is processed by the read loop
// once it has collected the output written before it (wake, then
// finishExitLocked), or right here when the read loop has already ended.
func (s *session) waitShell() {
	defer close(s.waitDone)
	awaitExited(s.shellCmd.Process.Pid)
	err := s.shellCmd.Wait()
	st := exitStatus(s.shellCmd.ProcessState)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && s.shellCmd.ProcessState == nil {
		s.log.Warn("shell wait failed", "err", err)
	}
	s.status = st
	s.shell = max(s.shell, shellReaped)
	if s.eof || s.masterClosed {
		s.finishExitLocked()
		return
	}
	s.armLocked()
}

// awaitExited returns once process pid has exited (or cannot be watched),
// without holding an OS thread: its pidfd becomes readable then, and the
// runtime's poller waits for that alongside every other descriptor. A
// blocking wait would pin a thread per shell, a thousand threads for a
// thousand shells. The caller reaps the process afterwards, which no
// longer blocks.
func awaitExited(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return // no pidfd (Linux < 5.3) or already reaped: a plain wait follows
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(pfd, 0)
			if err == unix.EINTR {
				continue
			}
			// Ready, or an error that waiting cannot cure.
			return err != nil || n > 0
		}
	})
}

// exitStatus turns a wait status into the terminal's terms.
func exitStatus(ps *os.ProcessState) termapi.Status {
	st := termapi.Status{Exited: true, ExitCode: -1}
	if ps == nil {
		return st
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
	case ws.Exited():
		st.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		st.Signal = unix.SignalName(ws.Signal())
	}
	return st
}

// finishExitLocked settles the live send as session_exit once the shell's
// last output has been consumed.
func (s *session) finishExitLocked() {
	if s.shell == shellDone {
		return
	}
	s.shell = shellDone
	// The shell's output has been read to its end: readers of the raw
	// output learn that there is no more.
	s.Scr.Raw.End()
	if sn := s.Live; sn != nil {
		s.settleLocked(sn, termapi.WaitSessionExit)
	}
}

// Close ends the session and everything it started. See termapi.Session.
func (s *session) Close(ctx context.Context, reason string) error {
	s.mu.Lock()
	if s.phase == sessionClosed {
		s.mu.Unlock()
		return nil
	}
	if c := s.closeCall; c != nil {
		s.mu.Unlock()
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			return fmt.Errorf("PTY cleanup failed (%s): %w", reason, context.Cause(ctx))
		}
	}
	c := &closeCall{done: make(chan struct{})}
	s.closeCall = c
	s.phase = sessionClosing
	if sn := s.Live; sn != nil {
		s.settleLocked(sn, termapi.WaitSessionExit)
	}
	s.mu.Unlock()

	// The session's files first: the owner's directory they are in goes
	// when the last session holding it lets go, if it is empty then.
	var err error
	if s.files != nil {
		err = s.files.purge()
	}
	if terr := s.teardown(ctx); terr != nil {
		err = fmt.Errorf("PTY cleanup failed (%s): %w", reason, terr)
	}
	s.mu.Lock()
	c.err = err
	if err == nil {
		s.phase = sessionClosed
	} else {
		s.closeCall = nil // a later Close retries
	}
	s.mu.Unlock()
	close(c.done)
	if err == nil && s.forget != nil {
		s.forget(s)
	}
	return err
}

// teardown hangs the terminal up, then lets proc.Terminate sweep what is
// left, reaps the shell and waits for every goroutine of the session. Each
// step is safe to repeat, for a retried Close.
func (s *session) teardown(ctx context.Context) error {
	if s.target.Tracker != nil {
		// The last look at the tree while the shell still anchors it.
		if snap, err := proc.Scan(); err == nil {
			s.target.Tracker.Refresh(snap)
		}
	}
	s.mu.Lock()
	hangUp := !s.masterClosed
	s.masterClosed = true
	s.mu.Unlock()
	if hangUp {
		// Closing the master hangs the terminal up: the kernel sends SIGHUP
		// to the shell, and bash passes it on to its jobs. It also ends the
		// read loop and any write still waiting for room. Not under the
		// lock: the close waits for a read in progress, which takes the
		// lock (see readLoop); from here on nothing under the lock touches
		// the master.
		s.term.close()
	}
	s.closeCmdTerms()
	target := s.target
	target.Grace = s.cfg.grace
	err := proc.Terminate(ctx, target)
	select {
	case <-s.waitDone:
	case <-ctx.Done():
		return errors.Join(err, fmt.Errorf("shell %d not reaped: %w", s.pid, context.Cause(ctx)))
	}
	if err != nil {
		return err
	}
	<-s.loopDone
	// Not under the lock: closing out waits for its reader, which takes
	// the lock to hand over what it read.
	if err := s.ctl.closeRecords(); err != nil {
		return err
	}
	<-s.ctlDone
	s.mu.Lock()
	err = s.ctl.close()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.workers.Wait()
	if lv := s.leaves; lv != nil {
		// Where no cgroup v2 leaf holds the shell, the v1 leaves still
		// know every process it started, escapes included.
		if pids, _ := lv.Procs(); len(pids) > 0 {
			if _, err := proc.EndSince(ctx, proc.Identity{}, proc.Birth{}, 0, lv.Procs); err != nil {
				return err
			}
		}
		if err := closeLeaves(ctx, lv); err != nil {
			return fmt.Errorf("remove the limits' cgroups: %w", err)
		}
	}
	if cg := s.target.Cgroup; cg != nil {
		if err := cg.Close(); err != nil {
			return fmt.Errorf("remove cgroup: %w", err)
		}
	}
	return nil
}

// killNow kills everything the session captured, synchronously and without
// waiting for anything: the last resort of a host that is going away.
func (s *session) killNow() {
	proc.TerminateNow(s.target)
}

// closeLeaves removes the limits' cgroup v1 leaves. A process that was
// killed but not yet released by its reaper (the shell's jobs are reparented
// when the shell goes) is no longer listed in a leaf and still keeps it
// busy, for a moment: closeLeaves tries again, with a short pause, until
// that passes, for at most leavesBusyMax (a later Close retries), or ctx
// ends.
func closeLeaves(ctx context.Context, lv *proc.Leaves) error {
	ctx, cancel := context.WithTimeout(ctx, leavesBusyMax)
	defer cancel()
	pause := time.Millisecond
	for {
		err := lv.Close()
		if err == nil || !errors.Is(err, unix.EBUSY) {
			return err
		}
		if pids, _ := lv.Procs(); len(pids) > 0 {
			if _, err := proc.EndSince(ctx, proc.Identity{}, proc.Birth{}, 0, lv.Procs); err != nil {
				return err
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, context.Cause(ctx))
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// leavesBusyMax bounds closeLeaves' wait for released processes.
const leavesBusyMax = 5 * time.Second
