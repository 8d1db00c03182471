//go:build linux

package terminalbash

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/plugins/terminal-bash/internal/sandbox"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// ptyPair is a session's PTY: the master, which the session reads and
// writes, and the slave, which the shell gets and which the session keeps
// open too until it closes.
//
// Holding the slave means a read of the master never fails with EIO while
// the session lives, even once every process of the session has closed its
// terminal; the read loop therefore stays the session's clock until Close,
// and the end of the shell is learnt from wait(2), never from the
// terminal. It also gives the readiness probes a descriptor to poll and
// flush without opening the device each time.
type ptyPair struct {
	master   *os.File
	raw      syscall.RawConn
	slave    *os.File
	slaveRaw syscall.RawConn
	// slavePath names the slave (/dev/pts/N) for the input-queue checks.
	slavePath string
	// slaveRdev is the slave's device number, which /proc reports as the
	// terminal a process reads from.
	slaveRdev uint64
	// lineSet is the settings lineMode last left, guarded by the
	// session's lock: settings still equal to them are dsh's, and say
	// nothing of what a program wants (inputMode).
	lineSet unix.Termios
}

// openTerminal allocates a PTY of the given size. Its master is in
// non-blocking mode and registered with the runtime poller. creack/pty's
// master has been switched to blocking mode by the time Open returns (its
// ioctls go through os.File.Fd), which would make read deadlines and Close
// unable to interrupt a read; so the master is re-opened on a duplicate
// descriptor that is non-blocking from the start.
func openTerminal(rows, cols int) (*ptyPair, error) {
	m, slave, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	return adoptTerminal(m, slave, rows, cols)
}

// adoptTerminal sets up a PTY made elsewhere (by pty.Open, or by the
// sandbox helper in the shell's own devpts instance) as openTerminal
// does, and takes over both descriptors.
func adoptTerminal(m, slave *os.File, rows, cols int) (*ptyPair, error) {
	fail := func(err error) (*ptyPair, error) {
		m.Close()
		slave.Close()
		return nil, err
	}
	if err := pty.Setsize(m, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)}); err != nil {
		return fail(fmt.Errorf("size pty: %w", err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(slave.Fd()), &st); err != nil {
		return fail(fmt.Errorf("stat pty slave: %w", err))
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("dup pty master: %w", err))
	}
	m.Close()
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		slave.Close()
		return nil, fmt.Errorf("pty master non-blocking: %w", err)
	}
	t := &ptyPair{master: os.NewFile(uintptr(fd), "/dev/ptmx"), slave: slave, slavePath: slave.Name(), slaveRdev: st.Rdev}
	if t.raw, err = t.master.SyscallConn(); err == nil {
		t.slaveRaw, err = slave.SyscallConn()
	}
	if err == nil {
		err = t.lineMode()
	}
	if err != nil {
		t.close()
		return nil, fmt.Errorf("pty: %w", err)
	}
	return t, nil
}

// lineMode puts the terminal's input side in the state typing a command
// line needs, if a program left it otherwise: canonical input (the shell
// reads the line whole), no echo of what is typed (the line is plumbing),
// no translation of the line's newline or letters, and no printable
// character doing a line-editing job. It costs one ioctl when nothing has
// to change. Output processing is left alone: the renderer takes what
// comes.
func (t *ptyPair) lineMode() error {
	var tio *unix.Termios
	var ioErr error
	err := t.slaveRaw.Control(func(fd uintptr) { tio, ioErr = unix.IoctlGetTermios(int(fd), unix.TCGETS) })
	if err == nil {
		err = ioErr
	}
	if err != nil {
		return fmt.Errorf("read %s settings: %w", t.slavePath, err)
	}
	want := *tio
	want.Lflag = want.Lflag&^(unix.ECHO|unix.ECHONL) | unix.ICANON
	want.Iflag &^= unix.INLCR | unix.IGNCR | unix.IUCLC | unix.ISTRIP
	for i, def := range lineChars {
		if c := want.Cc[i]; c >= 0x20 && c < 0x7f {
			want.Cc[i] = def
		}
	}
	t.lineSet = want
	if want == *tio {
		return nil
	}
	err = t.slaveRaw.Control(func(fd uintptr) { ioErr = unix.IoctlSetTermios(int(fd), unix.TCSETS, &want) })
	if err == nil {
		err = ioErr
	}
	if err != nil {
		return fmt.Errorf("set %s settings: %w", t.slavePath, err)
	}
	return nil
}

// inputMode says how the terminal hands input to a program proven to read
// it, from its settings now: a key at a time (raw), a line echoed (line),
// or a line not echoed (secret: what sudo, ssh, read -s and passwd set).
// Settings that are still the ones lineMode left are dsh's own, with echo
// off for its plumbing, and say nothing of the program: unknown. (A program
// that turns echo off exactly as lineMode does, as ssh's passphrase prompt
// does in a shell that never turned echo on, is unknown too; bash's read -s
// also clears ECHOK, and getpass ISIG, which tells them apart.) The caller
// holds the session's lock.
func (t *ptyPair) inputMode() termapi.InputMode {
	var tio *unix.Termios
	var ioErr error
	if err := t.slaveRaw.Control(func(fd uintptr) { tio, ioErr = unix.IoctlGetTermios(int(fd), unix.TCGETS) }); err != nil || ioErr != nil {
		return termapi.InputUnknown
	}
	switch {
	case tio.Lflag&unix.ICANON == 0:
		return termapi.InputRaw
	case tio.Lflag&unix.ECHO != 0:
		return termapi.InputLine
	case *tio == t.lineSet:
		return termapi.InputUnknown
	}
	return termapi.InputSecret
}

// lineChars are the special characters canonical input acts on, with their
// usual values: one set to a printable character would edit or cut the
// typed line.
var lineChars = map[int]uint8{
	unix.VINTR: 0x03, unix.VQUIT: 0x1c, unix.VERASE: 0x7f, unix.VKILL: 0x15,
	unix.VEOF: 0x04, unix.VEOL: 0, unix.VEOL2: 0, unix.VWERASE: 0x17,
	unix.VLNEXT: 0x16, unix.VREPRINT: 0x12, unix.VSUSP: 0x1a,
	unix.VSTART: 0x11, unix.VSTOP: 0x13,
}

// close releases both ends; closing the master hangs the terminal up.
func (t *ptyPair) close() {
	t.master.Close()
	t.slave.Close()
}

// startShell starts argv on a terminal as a session leader with the
// terminal as its controlling one. With cgroupFD >= 0 the child is born
// inside that cgroup (clone3 CLONE_INTO_CGROUP), so not even its first
// instructions run outside it, and, where dsh may create namespaces, in a
// cgroup namespace rooted there: the kernel then refuses to move any of
// its processes to a cgroup outside the leaf (a command writing its pid to
// the parent's cgroup.procs to survive the session's close). The shell
// starts with its signals at their defaults, even those the host ignores
// (see unignoreSignals), and confined by pol (see package sandbox).
//
// The terminal is term, or, when pol gives the shell a terminal of its own
// (term is then nil), the one the sandbox helper makes, set up to rows and
// cols; startShell returns the terminal either way.
func startShell(path string, args, env []string, dir string, term *ptyPair, rows, cols int, cgroupFD int, pol sandbox.Policy) (*exec.Cmd, *ptyPair, error) {
	nsOK := cgroupFD >= 0 && cgroupNamespaces.Load()
	cmd, t, err := startShellOnce(path, args, env, dir, term, rows, cols, cgroupFD, nsOK, pol)
	if err != nil && nsOK && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSPC)) {
		// Not allowed here after all (a seccomp profile, a user
		// namespace's limit): go on with the leaf alone.
		cgroupNamespaces.Store(false)
		return startShellOnce(path, args, env, dir, term, rows, cols, cgroupFD, false, pol)
	}
	return cmd, t, err
}

// handoverBound bounds the wait for a sandboxed shell's terminal: the
// helper makes it right after its mounts, so only a machine at a standstill
// takes long.
const handoverBound = time.Minute

func startShellOnce(path string, args, env []string, dir string, term *ptyPair, rows, cols int, cgroupFD int, cgroupNS bool, pol sandbox.Policy) (*exec.Cmd, *ptyPair, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cgroupFD >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = cgroupFD
		if cgroupNS {
			cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWCGROUP
		}
	}
	if term != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = term.slave, term.slave, term.slave
		cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, 0
		if err := sandbox.Wrap(cmd, pol); err != nil {
			return nil, nil, err
		}
		unignoreSignals()
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		return cmd, term, nil
	}
	h, err := sandbox.WrapTerminal(cmd, pol)
	if err != nil {
		return nil, nil, err
	}
	defer h.Close()
	unignoreSignals()
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*exec.Cmd, *ptyPair, error) {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, nil, err
	}
	master, slave, err := h.Receive(time.Now().Add(handoverBound))
	if err != nil {
		return fail(err)
	}
	if term, err = adoptTerminal(master, slave, rows, cols); err != nil {
		return fail(err)
	}
	if err := h.Release(); err != nil {
		term.close()
		return fail(err)
	}
	return cmd, term, nil
}

// shellOOMScoreAdj makes a shell, and every process it starts, the kernel's
// first choice when memory runs out: a command that eats the machine's (or
// its cgroup's) memory is ended, not dsh with every other agent's shell,
// even when dsh is the bigger process (a large output in flight). dsh's
// own score is left as it is.
const shellOOMScoreAdj = 1000

// raiseOOMScore sets the oom_score_adj of process pid to shellOOMScoreAdj.
// Raising it needs no privilege. Where dsh has CAP_SYS_RESOURCE the kernel
// also makes that the least the process may set later, so a command cannot
// lower it again.
func raiseOOMScore(pid int) error {
	path := "/proc/" + strconv.Itoa(pid) + "/oom_score_adj"
	if err := os.WriteFile(path, []byte(strconv.Itoa(shellOOMScoreAdj)), 0); err != nil {
		return fmt.Errorf("raise the shell's OOM score: %w", err)
	}
	return nil
}

// cgroupNamespaces is whether shells get a cgroup namespace: creating one
// needs CAP_SYS_ADMIN. It is turned off for good when the kernel refuses.
var cgroupNamespaces = func() *atomic.Bool {
	var b atomic.Bool
	b.Store(hasCapability(unix.CAP_SYS_ADMIN))
	return &b
}()

// hasCapability reports whether cap is in this process's effective set.
func hasCapability(cap int) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && v&(1<<uint(cap)) != 0
		}
	}
	return false
}

// foreground returns the terminal's foreground process group.
func (t *ptyPair) foreground() (int, error) {
	var pgid int
	var ioErr error
	err := t.raw.Control(func(fd uintptr) {
		pgid, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP)
	})
	if err == nil {
		err = ioErr
	}
	if err == nil && pgid <= 0 {
		err = fmt.Errorf("no foreground process group (%d)", pgid)
	}
	return pgid, err
}

// writeNow writes as much of p as the terminal accepts without blocking.
func (t *ptyPair) writeNow(p []byte) (int, error) { return writeRaw(t.raw, p) }

// readNow reads what is available without blocking. It reports done when
// nothing is left (EAGAIN), or when the master is unusable (then with an
// error). Reading the master when it has nothing buffered makes the kernel
// finish moving data still in flight from the slave first, so done without
// an error means that everything written to the slave before the call has
// been returned.
func (t *ptyPair) readNow(buf []byte) (n int, done bool, err error) {
	var ioErr error
	cerr := t.raw.Control(func(fd uintptr) {
		for {
			n, ioErr = unix.Read(int(fd), buf)
			if ioErr != unix.EINTR {
				return
			}
		}
	})
	switch {
	case cerr != nil:
		return 0, true, cerr
	case ioErr == unix.EAGAIN:
		return 0, true, nil
	case ioErr != nil:
		return 0, true, ioErr
	case n == 0:
		return 0, true, io.EOF
	}
	return n, false, nil
}

// landInput makes the kernel finish moving what was written to the master
// into the slave's input queue. The hand-over runs as deferred work; a poll
// on the slave that finds no input waits for it (n_tty_poll flushes the
// pending buffer work), so afterwards the queue holds every byte written
// before the call that nobody has read.
func (t *ptyPair) landInput() error {
	var pollErr error
	err := t.slaveRaw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, pollErr = unix.Poll(fds, 0); pollErr != unix.EINTR {
				return
			}
		}
	})
	if err == nil {
		err = pollErr
	}
	return err
}

// pendingInput is the number of bytes typed into the terminal that no
// program has read yet (TIOCINQ on the slave this side holds open).
func (t *ptyPair) pendingInput() (int, error) {
	var n int
	var ioctlErr error
	err := t.slaveRaw.Control(func(fd uintptr) {
		n, ioctlErr = unix.IoctlGetInt(int(fd), unix.TIOCINQ)
	})
	if err == nil {
		err = ioctlErr
	}
	if err != nil {
		return 0, fmt.Errorf("pending input on %s: %w", t.slavePath, err)
	}
	return n, nil
}

// flushInput discards input typed into the terminal that no program has
// read yet, as the kernel does when ^C is typed: an interrupted command's
// unread text must not run as the next command.
func (t *ptyPair) flushInput() error {
	var ioErr error
	err := t.slaveRaw.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetInt(int(fd), unix.TCFLSH, unix.TCIFLUSH)
	})
	if err == nil {
		err = ioErr
	}
	if err != nil {
		return fmt.Errorf("flush %s input: %w", t.slavePath, err)
	}
	return nil
}

// setSize sets the terminal's size; the kernel tells its foreground group.
func (t *ptyPair) setSize(size termapi.Size) error {
	return pty.Setsize(t.master, &pty.Winsize{Rows: uint16(size.Rows), Cols: uint16(size.Cols)})
}
