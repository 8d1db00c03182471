//go:build linux

package proc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ErrProtected is returned instead of signalling pid 1, this process, or
// this process's own process group.
var ErrProtected = errors.New("refusing to signal a protected process")

// Identity names one process across pid reuse: a pid is recycled, but a
// pid together with the process's start time is not.
type Identity struct {
	PID int
	// StartTime is /proc/<pid>/stat field 22, clock ticks since boot.
	StartTime uint64
}

// IdentityOf reads the identity of the process pid is now.
func IdentityOf(pid int) (Identity, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return Identity{}, err
	}
	return Identity{PID: pid, StartTime: st.StartTime}, nil
}

func (id Identity) String() string {
	return strconv.Itoa(id.PID) + "@" + strconv.FormatUint(id.StartTime, 10)
}

// Alive reports whether the process still runs: its pid still has the same
// start time and it is not a zombie. A process that has exited but is not
// yet reaped counts as gone.
func (id Identity) Alive() bool {
	st, err := ReadStat(id.PID)
	return err == nil && st.StartTime == id.StartTime && !st.Dead()
}

// Signal sends sig to the process if, and only if, it is still this
// identity. A process that is gone, a zombie, or whose pid now belongs to
// another process is not signalled, and that is not an error: there is
// nothing left to signal.
//
// The check is race-free where the kernel has pidfd (Linux 5.3+): the pidfd
// is opened first and the start time verified afterwards, so if the pid was
// recycled before the open, the check fails, and if the process dies after
// the check, the pidfd refers to the dead process and the signal goes
// nowhere. Without pidfd the start time is checked immediately before
// kill(2), leaving the short window that pidfd closes.
func (id Identity) Signal(sig unix.Signal) error {
	h, err := openHandle(id)
	if err != nil || h == nil {
		return err
	}
	defer h.close()
	return h.signal(sig)
}

// protectedPID reports pids that no cleanup may signal, whatever a process
// table says.
func protectedPID(pid int) bool { return pid <= 1 || pid == os.Getpid() }

// protectedGroup reports process groups that no cleanup may signal: the
// init group and our own.
func protectedGroup(pgid int) bool {
	return pgid <= 1 || pgid == os.Getpid() || pgid == unix.Getpgrp()
}

// pidfdOpen is pidfd_open(2); tests swap it to exercise kernels without
// pidfd.
var pidfdOpen = unix.PidfdOpen

// pidfdSignalProcessGroup is PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9): deliver
// to the process group of the pidfd's process.
const pidfdSignalProcessGroup = 1 << 2

// pidHandle holds one identity-verified process for signalling and for
// waiting on its exit. The pidfd is registered with the runtime poller: it
// becomes readable when the process exits, so waiting costs no thread and
// no polling.
type pidHandle struct {
	id Identity
	// pgrp is the process group when the handle was opened.
	pgrp int
	// file is the pidfd, or nil on a kernel without pidfd.
	file *os.File
}

// openHandle opens a handle on id's process. It returns nil and no error
// when that process is gone, a zombie, or the pid has been recycled, and
// ErrProtected for pids no cleanup may touch.
func openHandle(id Identity) (*pidHandle, error) {
	if protectedPID(id.PID) {
		return nil, fmt.Errorf("pid %d: %w", id.PID, ErrProtected)
	}
	fd, err := pidfdOpen(id.PID, unix.O_NONBLOCK) // PIDFD_NONBLOCK
	if err == unix.EINVAL {
		// Linux 5.3–5.9 have pidfd but no PIDFD_NONBLOCK.
		if fd, err = pidfdOpen(id.PID, 0); err == nil {
			if err = unix.SetNonblock(fd, true); err != nil {
				unix.Close(fd)
			}
		}
	}
	switch {
	case err == unix.ESRCH:
		return nil, nil
	case err == unix.ENOSYS:
		fd = -1
	case err != nil:
		return nil, fmt.Errorf("pidfd_open %d: %w", id.PID, err)
	}
	st, err := ReadStat(id.PID)
	if err != nil || st.StartTime != id.StartTime || st.Dead() {
		if fd >= 0 {
			unix.Close(fd)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, nil
	}
	h := &pidHandle{id: id, pgrp: st.PGRP}
	if fd >= 0 {
		h.file = os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(id.PID))
	}
	return h, nil
}

func (h *pidHandle) close() {
	if h.file != nil {
		h.file.Close()
	}
}

// signal sends sig to the process. A process that has exited meanwhile is
// not an error.
func (h *pidHandle) signal(sig unix.Signal) error {
	return h.send(sig, false)
}

// signalGroup sends sig to the process group the process leads. It does
// nothing when the process is not a group leader: a group it merely
// belongs to is somebody else's.
func (h *pidHandle) signalGroup(sig unix.Signal) error {
	if h.pgrp != h.id.PID {
		return nil
	}
	if protectedGroup(h.pgrp) {
		return fmt.Errorf("signal group %d: %w", h.pgrp, ErrProtected)
	}
	return h.send(sig, true)
}

func (h *pidHandle) send(sig unix.Signal, group bool) error {
	var err error
	if h.file != nil {
		flags := 0
		if group {
			flags = pidfdSignalProcessGroup
		}
		if cerr := h.control(func(fd int) { err = unix.PidfdSendSignal(fd, sig, nil, flags) }); cerr != nil {
			err = cerr
		}
		if err != unix.EINVAL || !group {
			return signalResult(h.id.PID, group, sig, err)
		}
		// A kernel older than 6.9 rejects the group flag: fall back to
		// kill(2) with the start-time check below.
	}
	if !h.id.Alive() {
		return nil
	}
	target := h.id.PID
	if group {
		target = -h.pgrp
	}
	return signalResult(h.id.PID, group, sig, unix.Kill(target, sig))
}

func signalResult(pid int, group bool, sig unix.Signal, err error) error {
	switch {
	case err == nil, err == unix.ESRCH:
		return nil
	case group:
		return fmt.Errorf("signal %v to group %d: %w", sig, pid, err)
	default:
		return fmt.Errorf("signal %v to pid %d: %w", sig, pid, err)
	}
}

// exited reports, without blocking, whether the process has exited. A
// zombie has exited.
func (h *pidHandle) exited() bool {
	if h.file == nil {
		return !h.id.Alive()
	}
	ready := false
	h.control(func(fd int) { ready = pollReadable(fd) })
	return ready
}

// control runs f with the pidfd. os.File.Fd would switch the descriptor to
// blocking mode and detach it from the poller.
func (h *pidHandle) control(f func(fd int)) error {
	rc, err := h.file.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { f(int(fd)) })
}

// pollReadable reports whether fd is readable right now.
func pollReadable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
	}
}

// Wait returns once the process has exited (at once when it has, or when
// the pid now names another process), or when ctx ends. It waits on a
// pidfd in the runtime's poller: no thread and no polling. Without pidfd
// (Linux < 5.3) it cannot wait, and says so.
func (id Identity) Wait(ctx context.Context) error {
	h, err := openHandle(id)
	if err != nil || h == nil {
		return err
	}
	defer h.close()
	if h.file == nil {
		return errors.New("proc: no pidfd to wait on")
	}
	stop := context.AfterFunc(ctx, func() { _ = h.file.SetReadDeadline(time.Now()) })
	defer stop()
	rc, err := h.file.SyscallConn()
	if err != nil {
		return err
	}
	err = rc.Read(func(fd uintptr) bool { return pollReadable(int(fd)) })
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
