//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A confined shell must not reach the terminals of dsh's user (another
// agent's shell, the user's own): in its mount namespace /dev/pts is a
// devpts instance of its own. Its own terminal must live there too, or
// ttyname(3) (tty, GPG_TTY=$(tty), ssh's prompts) would find no device at
// the name its descriptors have. So the helper makes the terminal once
// the instance is mounted, and hands both ends to its parent over a unix
// socket, as runc's console socket does: the parent reads and writes the
// master as it would one of its own.

// The helper's messages on the terminal socket: the terminal (with the
// master and the slave attached), or why it could not confine itself.
const (
	msgTerminal = 'T'
	msgError    = 'E'
)

// Handover receives the terminal a helper makes for its shell.
type Handover struct {
	child *os.File // the helper's end, which the parent closes once it started
	conn  *net.UnixConn
	once  sync.Once
}

// WrapTerminal is Wrap for a policy whose shell gets its terminal from the
// helper (p.OwnTerminal()). The helper makes the terminal in the shell's
// devpts instance, makes it the shell's controlling terminal and standard
// descriptors, hands both ends over (Receive), and executes the shell once
// the caller has set the terminal up (Release). cmd must start a new
// session (SysProcAttr.Setsid) and leave its standard descriptors unset.
func WrapTerminal(cmd *exec.Cmd, p Policy) (*Handover, error) {
	if !p.OwnTerminal() {
		return nil, fmt.Errorf("sandbox: mode %q keeps the parent's terminals", p.Mode)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: terminal socket: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "sandbox terminal socket")
	child := os.NewFile(uintptr(fds[1]), "sandbox terminal socket")
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		child.Close()
		return nil, fmt.Errorf("sandbox: terminal socket: %w", err)
	}
	h := &Handover{child: child, conn: c.(*net.UnixConn)}
	p.TerminalFD = 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, child)
	if err := Wrap(cmd, p); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// ErrNoTerminal is returned by Receive when the helper ended without
// handing over a terminal or saying why.
var ErrNoTerminal = errors.New("the sandbox helper ended without a terminal")

// Receive waits until deadline for the helper's terminal, and returns its
// master and slave. Call it once the command has started; on an error the
// caller ends the command.
func (h *Handover) Receive(deadline time.Time) (master, slave *os.File, err error) {
	h.once.Do(func() { h.child.Close() })
	if err := h.conn.SetReadDeadline(deadline); err != nil {
		return nil, nil, err
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(2*4))
	n, oobn, _, _, err := h.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: receive the terminal: %w", err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	switch {
	case n == 0:
		closeAll()
		return nil, nil, ErrNoTerminal
	case buf[0] == msgError:
		closeAll()
		return nil, nil, fmt.Errorf("%w: %s", ErrUnenforceable, strings.TrimPrefix(string(buf[1:n]), helperPrefix))
	case buf[0] != msgTerminal || len(fds) != 2:
		closeAll()
		return nil, nil, fmt.Errorf("sandbox: a malformed terminal message (%q, %d descriptors)", buf[:n], len(fds))
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	name := "/dev/pts/?"
	if n, err := unix.IoctlGetInt(fds[0], unix.TIOCGPTN); err == nil {
		name = fmt.Sprintf("/dev/pts/%d", n)
	}
	return os.NewFile(uintptr(fds[0]), "/dev/ptmx"), os.NewFile(uintptr(fds[1]), name), nil
}

// Release lets the helper execute the shell, and closes the socket.
func (h *Handover) Release() error {
	_, err := h.conn.Write([]byte{1})
	h.Close()
	if err != nil {
		return fmt.Errorf("sandbox: release the shell: %w", err)
	}
	return nil
}

// Close releases the socket; a helper still waiting then exits.
func (h *Handover) Close() {
	h.once.Do(func() { h.child.Close() })
	h.conn.Close()
}

// makeTerminal makes a terminal in the devpts instance at /dev/pts, makes
// it this process's controlling terminal and standard descriptors, and
// hands master and slave over on sock.
func makeTerminal(sock int) error {
	master, err := unix.Open("/dev/pts/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the terminal multiplexer: %w", err)
	}
	defer unix.Close(master)
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		return fmt.Errorf("unlock the terminal: %w", err)
	}
	slave, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return fmt.Errorf("open the terminal: %w", errno)
	}
	defer unix.Close(int(slave))
	if err := unix.IoctlSetInt(int(slave), unix.TIOCSCTTY, 0); err != nil {
		return fmt.Errorf("make the terminal the controlling one: %w", err)
	}
	for fd := range 3 {
		if err := unix.Dup3(int(slave), fd, 0); err != nil {
			return fmt.Errorf("terminal as descriptor %d: %w", fd, err)
		}
	}
	if err := unix.Sendmsg(sock, []byte{msgTerminal}, unix.UnixRights(master, int(slave)), nil, 0); err != nil {
		return fmt.Errorf("hand the terminal over: %w", err)
	}
	return nil
}

// awaitRelease blocks until the parent has set the terminal up.
func awaitRelease(sock int) error {
	var b [1]byte
	for {
		n, err := unix.Read(sock, b[:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("wait for the terminal: %w", err)
		case n == 0:
			return errors.New("dsh went away before the shell started")
		}
		unix.Close(sock)
		return nil
	}
}

// reportFailure tells the parent waiting on sock why the helper failed.
func reportFailure(sock int, err error) {
	_ = unix.Sendmsg(sock, append([]byte{msgError}, err.Error()...), nil, nil, 0)
}
