//go:build linux

package terminalbash

import (
	"bytes"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/proc"
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
	if err != nil && s.phase == sessionOpen && !errors.Is(err, os.ErrDeadlineExceeded) {
		s.log.Warn("terminal write failed", "err", err)
	}
	interrupt := sn.interruptPending && s.phase == sessionOpen
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
// to a job; see awaitInterruptible. Only a closing session or an exited
// shell has nothing left to interrupt.
func (s *session) interrupt(sn *send) {
	defer s.workers.Done()
	s.mu.Lock()
	s.boundaryLocked(time.Now())
	s.idle = false
	s.armLocked()
	s.mu.Unlock()
	s.awaitInterruptible(nil)
	s.mu.Lock()
	skip := s.phase != sessionOpen || s.shell >= shellReaped
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
	if err != nil && s.phase == sessionOpen && s.shell == shellRunning {
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
	if sn.Settled() || sn.inputBusy() {
		return
	}
	s.reprobeLocked()
}

// interruptCPU is how much CPU the shell, or a fork of it that has not
// yet run its program, may use after an interrupt is asked for before it
// counts as busy on its own (a builtin loop, a subshell's loop) and gets
// the signal, which is what stops it. Reading a line and starting its job
// takes well under a millisecond of CPU. The bound is in CPU time, not
// wall time, because on a loaded machine that millisecond can take any
// wall time.
const interruptCPU = 20 * time.Millisecond

// interruptWait bounds the wait all the same, for a process that makes no
// progress of its own: it counts the time the process spends neither
// running nor ready to run (stuck in a read of input that never completes,
// or in an uninterruptible sleep). A machine too loaded to run the shell
// delays the interrupt but does not lose it; interruptWaitMax bounds the
// wait in wall time, for a machine that never runs the shell at all.
const (
	interruptWait    = 5 * time.Second
	interruptWaitMax = 60 * time.Second
)

// The checks of a shell on its way to a job start interruptCheckMin apart
// and back off, doubling, to interruptCheckMax.
const (
	interruptCheckMin = 500 * time.Microsecond
	interruptCheckMax = 8 * time.Millisecond
)

// awaitInterruptible returns once an interrupt sent to the terminal's
// foreground group would reach what the command runs, or done is closed,
// or the wait has run out (see interruptWait).
//
// A signal is lost in two moments of starting a job. Between reading a
// command line and handing the terminal to the job, bash notes the signal
// and goes on to start the job and wait for it. Between forking the job
// and running its program, the fork still has bash's handler, so the
// signal is caught and gone by the time the program runs. So while the
// foreground is the shell, running or about to take a typed line in, or a
// fork of the shell still runs towards its program, the signal waits.
// Either that ends (the shell blocks or hands the terminal over, the fork
// runs its program or blocks) or the process uses interruptCPU of CPU,
// which only a loop of its own does.
//
// A shell that sleeps is blocked only when it sleeps through two checks in
// the same system call without running between them: on its way to a job
// it can sleep a moment too (in fork, on a page), and the signal would be
// lost.
func (s *session) awaitInterruptible(done <-chan struct{}) {
	var (
		timer    *time.Timer
		watched  int
		firstCPU time.Duration // of watched when first seen
		lastCPU  time.Duration // of watched at the previous check
		lastSeen time.Time     // of the previous check of watched
		stuck    time.Duration // spent neither running nor runnable
		slept    proc.Sleep
		sleeping bool
	)
	start := time.Now()
	for delay := interruptCheckMin; stuck < interruptWait && time.Since(start) < interruptWaitMax; delay = min(2*delay, interruptCheckMax) {
		pid, step := s.startingJob()
		switch step {
		case jobReached:
			return
		case jobAsleep:
			sl, ok := proc.Asleep(pid)
			if ok && sleeping && sl == slept {
				return
			}
			slept, sleeping = sl, ok
			delay = interruptCheckMin
		case jobStarting:
			sleeping = false
			st, err := proc.ReadStat(pid)
			if err != nil {
				return
			}
			cpu, err := proc.RunTime(pid)
			if err != nil {
				return
			}
			now := time.Now()
			if pid != watched {
				watched, firstCPU = pid, cpu
			} else {
				if cpu-firstCPU >= interruptCPU {
					return
				}
				if st.State != 'R' && cpu == lastCPU {
					stuck += now.Sub(lastSeen)
				}
			}
			lastCPU, lastSeen = cpu, now
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

// jobStep is how far the start of a job has come, for awaitInterruptible.
type jobStep int

const (
	// jobReached: a signal to the foreground group reaches the job, or
	// there is no job to reach (the shell waits at its prompt or in a read
	// of its own, the terminal is gone).
	jobReached jobStep = iota
	// jobStarting: the process is on its way to the job.
	jobStarting
	// jobAsleep: the shell is the foreground and asleep, not in a read of
	// the terminal; blocked if it stays so.
	jobAsleep
)

// startingJob reports how far the start of a job has come and the process
// it depends on (see awaitInterruptible): the shell while it is the
// foreground and not blocked, or a fork of the shell that has not yet run
// its program, either as the leader of the foreground group or before it
// has taken the terminal (bash forks, then waits, and the fork takes the
// terminal).
func (s *session) startingJob() (pid int, step jobStep) {
	fg, err := s.term.foreground()
	if err != nil {
		return 0, jobReached
	}
	shell, err := proc.ReadStat(s.pid)
	if err != nil {
		return 0, jobReached
	}
	if fg != s.pid {
		// bash makes a job's first process the leader of its group. The
		// leader takes the terminal, then waits until the shell has made
		// every process of the pipeline and tells it to go on (bash's
		// pgrp pipe), in a read the signal does not end.
		leader, fork := s.shellFork(fg, shell.Comm)
		switch {
		case fork && running(leader.State):
			return fg, jobStarting
		case fork && leader.State == 'S' && running(shell.State):
			return s.pid, jobStarting
		}
		return 0, jobReached
	}
	if s.groupWaiting(s.pid, nil) {
		return 0, jobReached
	}
	kids, err := proc.Children(s.pid)
	if err != nil {
		return 0, jobReached
	}
	for _, kid := range kids {
		if st, fork := s.shellFork(kid, shell.Comm); fork && running(st.State) {
			return kid, jobStarting
		}
	}
	switch {
	case running(shell.State):
		return s.pid, jobStarting
	case shell.State == 'S':
		// Asleep in a read of the terminal with typed input pending is a
		// shell about to take a line in. Asleep elsewhere may be a shell
		// blocked in a wait (the wait builtin, a pipe, a command
		// substitution without job control) that the signal interrupts, or
		// whose children share its group and get the signal too.
		if _, reading := proc.ReadingTerminal(s.pid, s.term.slaveRdev); reading {
			return s.pid, jobStarting
		}
		return s.pid, jobAsleep
	}
	return 0, jobReached
}

// shellFork reports whether pid is a child of the shell that still runs
// the shell's program (shellComm): a fork on its way to the program it was
// made for, or a subshell, busy with a loop of its own or waiting, which
// its state and the CPU allowance tell apart.
func (s *session) shellFork(pid int, shellComm string) (proc.Stat, bool) {
	st, err := proc.ReadStat(pid)
	return st, err == nil && st.PPID == s.pid && st.Comm == shellComm
}

// running reports whether a process state is running, ready to run, or in
// an uninterruptible sleep on its way.
func running(state byte) bool { return state == 'R' || state == 'D' }
