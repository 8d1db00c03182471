//go:build linux

package terminalbash

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// stopJob delivers SIGTSTP to pgid, the job a running command has in the
// foreground, so that the command line ends there. Bash moves only the job
// it runs: told that the job stopped, it breaks out of a loop around it
// and goes on with the rest of the line at once (`make; make test` would
// run `make test` beside the stopped `make`). So the shell is held still
// (SIGSTOP) while the job stops, and once the job is stopped it is given a
// SIGINT before it is continued: the kernel hands a process its pending
// signals lowest first, so the shell takes the interrupt, which abandons
// the rest of the line, before it learns of the stop. A job that does not
// stop (it ignores SIGTSTP) leaves the shell as it was.
//
// The read loop does not continue the shell meanwhile (see holdingShell).
func (s *session) stopJob(pgid int) (termapi.SignalResult, error) {
	s.mu.Lock()
	s.holdingShell = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.holdingShell = false
		s.reprobeLocked()
		s.mu.Unlock()
	}()
	if err := s.signalShell(unix.SIGSTOP); err != nil {
		return termapi.SignalResult{}, s.Errorf("hold the shell: %w", err)
	}
	err := s.signalGroup(pgid, unix.SIGTSTP)
	if err == nil && groupStopped(pgid, jobStopBound) {
		if ierr := s.signalShell(unix.SIGINT); ierr != nil {
			s.log.Warn("ending the command line of a stopped job failed", "err", ierr)
		}
	}
	if cerr := s.signalShell(unix.SIGCONT); cerr != nil {
		s.log.Warn("continuing the shell failed", "err", cerr)
	}
	if err != nil {
		return termapi.SignalResult{}, s.Errorf("%w", err)
	}
	return termapi.SignalResult{TargetPGID: pgid}, nil
}

// jobStopBound bounds the wait for a job to stop on SIGTSTP: one that
// takes longer catches the signal.
const jobStopBound = 250 * time.Millisecond

// signalShell signals the shell itself, by its identity when known.
func (s *session) signalShell(sig unix.Signal) error {
	if s.target.Shell != (proc.Identity{}) {
		return s.target.Shell.Signal(sig)
	}
	return unix.Kill(s.pid, sig)
}

// groupStopped waits, within bound, until every live process of group pgid
// is stopped, and reports whether that happened. Nothing announces a stop
// to anyone but the job's parent (the shell), so the group is looked at
// again and again, from 100 µs apart, backing off.
func groupStopped(pgid int, bound time.Duration) bool {
	end := time.Now().Add(bound)
	pause := 100 * time.Microsecond
	for {
		if snap, err := proc.Scan(); err == nil {
			live, stopped := 0, 0
			for _, st := range snap.Group(pgid) {
				if st.Dead() {
					continue
				}
				live++
				if st.State == 'T' {
					stopped++
				}
			}
			switch {
			case live == 0:
				return false
			case stopped == live:
				return true
			}
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Millisecond)
	}
}

// awaitJobReaders makes sure the line about to be typed reaches the shell
// alone, after a command line whose job a signal stopped or killed. The
// kernel checks job control when a read of the terminal begins, not while
// it waits: a process that was inside its read when its group lost the
// terminal still takes what is typed next, and the shell gets the
// terminal back as soon as its own child has stopped or died, while other
// members of the job (a subshell's cat) may not have acted on their
// signal yet. Such a line is lost to the job, nonce and all, and the
// shell stays at its prompt as if the command had been abandoned.
//
// So, within jobStopBound, it waits until no process of the shell's
// session outside the shell's group is inside a read of the terminal or
// still on its way to the stop the rest of its group took; a process
// proven blocked in such a read gets SIGTTIN, which is what the kernel
// gives a read begun outside the foreground. It walks /proc, which costs
// in proportion to every process of the machine: only after a command
// line that a signal ended.
func (s *session) awaitJobReaders() {
	end := time.Now().Add(jobStopBound)
	pause := 100 * time.Microsecond
	told := map[int]bool{}
	for {
		snap, err := proc.Scan()
		if err != nil {
			return
		}
		members := snap.Session(s.pid)
		stopping := map[int]bool{}
		for _, st := range members {
			if st.PGRP != s.pid && st.State == 'T' {
				stopping[st.PGRP] = true
			}
		}
		busy := false
		for _, st := range members {
			if st.PGRP == s.pid || st.Dead() || st.State == 'T' {
				continue
			}
			if _, ok := proc.ReadingTerminal(st.PID, s.term.slaveRdev); ok {
				busy = true
				if !told[st.PID] {
					told[st.PID] = true
					if id, err := proc.IdentityOf(st.PID); err == nil {
						if err := id.Signal(unix.SIGTTIN); err != nil {
							s.log.Debug("stopping a reader left from a job failed", "pid", st.PID, "err", err)
						}
					}
				}
				continue
			}
			busy = busy || stopping[st.PGRP]
		}
		if !busy || time.Now().After(end) {
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Millisecond)
	}
}
