//go:build linux

package terminalbash

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/private"
	"github.com/dshdev/dsh/internal/proc"
)

// control is a session's out-of-band channel with its shell: a private
// directory (0700) holding the plumbing script and two FIFOs. dsh writes
// each command into "in", where the plumbing reads exactly its length;
// the plumbing writes its records into "out". dsh holds both open for
// reading and writing, so the shell's opens never block and a FIFO never
// reports its end while the session lives; the shell opens each one only
// for the one builtin that uses it, so no program the shell starts
// inherits either.
type control struct {
	dir  string
	init string // the plumbing script
	// hook is the PROMPT_COMMAND that installs the plumbing.
	hook string
	in   *os.File
	out  *os.File
	// inPath and outPath are the FIFOs' names; in is re-opened by reset.
	inPath, outPath string
	// releaseOwner, when set, lets go of the owner's directory in dsh's
	// private one, which the session's sandbox keeps visible (see
	// private.HoldOwnerDir): it is removed with the last session holding
	// it, if nothing is left in it.
	releaseOwner func()
}

// pipeSize is the capacity the FIFOs are given: a page each. Records are a
// few dozen bytes and most commands fit; a longer command is written while
// the shell reads it. A small capacity matters at scale: an unprivileged
// user's pipes together may hold only pipe-user-pages-soft pages (16384)
// before every new pipe of that user is cut to one page.
const pipeSize = 4096

// controlDirPrefix names the directories: the prefix, the creating
// process's proc.OwnerTag, and a random part.
const controlDirPrefix = "dsh-shell-"

// sweepOnce sweeps the control directories of dead dsh processes when a
// process makes its first one.
var sweepOnce sync.Once

// controlBase is where the control directories go: dsh's private
// directory, below directories only this user can write. The shell opens
// the FIFOs by name for every command, so a name another user could
// re-create (in /tmp or /dev/shm, after a command's rm -rf) would hand them
// the shell. Only when there is no private directory at all (no
// XDG_RUNTIME_DIR and no home) is the temporary directory used, and the
// reason returned for the log.
func controlBase() (string, error) {
	dir, err := private.Dir()
	if err != nil {
		return os.TempDir(), err
	}
	return dir, nil
}

// newControl creates the directory, the FIFOs and the plumbing script.
// parentPID is the pid the shell's parent will have. A base that is not
// private is reported to log.
func newControl(parentPID int, log *slog.Logger) (*control, error) {
	base, baseErr := controlBase()
	if baseErr != nil {
		log.Warn("the shell's control channel is in a shared directory, where another user could take it over after it is deleted; set XDG_RUNTIME_DIR or HOME", "dir", base, "err", baseErr)
	}
	sweepOnce.Do(func() {
		for _, dir := range proc.SweepGone(base, controlDirPrefix) {
			log.Info("removed the control directory of a dsh that is gone", "dir", dir)
		}
	})
	// The name carries this process's identity, so that the sweep of a
	// later dsh can remove it if this one is killed outright.
	pattern := controlDirPrefix
	if tag, err := proc.OwnerTag(); err == nil {
		pattern += tag + "-"
	}
	dir, err := os.MkdirTemp(base, pattern)
	if err != nil {
		return nil, fmt.Errorf("control directory: %w", err)
	}
	c := &control{dir: dir, init: filepath.Join(dir, "init"), inPath: filepath.Join(dir, "in"), outPath: filepath.Join(dir, "out")}
	fail := func(err error) (*control, error) {
		c.close()
		return nil, err
	}
	for _, p := range []string{c.inPath, c.outPath} {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			return fail(fmt.Errorf("control fifo: %w", &os.PathError{Op: "mkfifo", Path: p, Err: err}))
		}
	}
	if c.in, err = openFIFO(c.inPath); err != nil {
		return fail(err)
	}
	if c.out, err = openFIFO(c.outPath); err != nil {
		return fail(err)
	}
	c.hook = promptHook(parentPID, c.init)
	script := plumbing(c.hook, c.inPath, c.outPath)
	if err := os.WriteFile(c.init, []byte(script), 0o600); err != nil {
		return fail(fmt.Errorf("control script: %w", err))
	}
	return c, nil
}

// openFIFO opens a FIFO for reading and writing without blocking, registered
// with the runtime's poller, at a page of capacity.
func openFIFO(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control fifo: %w", &os.PathError{Op: "open", Path: path, Err: err})
	}
	// Best effort: a kernel that refuses keeps the default capacity.
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, pipeSize)
	return os.NewFile(uintptr(fd), path), nil
}

// writeNow writes as much of p into in as fits without blocking.
func (c *control) writeNow(p []byte) (int, error) {
	rc, err := c.in.SyscallConn()
	if err != nil {
		return 0, err
	}
	return writeRaw(rc, p)
}

// pending is how many bytes of commands the shell has not read from in.
func (c *control) pending() (int, error) { return buffered(c.in) }

// unread is how many bytes of records dsh has not read from out.
func (c *control) unread() (int, error) { return buffered(c.out) }

// buffered is how many bytes a FIFO holds (FIONREAD, which is TIOCINQ on
// Linux).
func buffered(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ioErr error
	if err := rc.Control(func(fd uintptr) { n, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil {
		return 0, err
	}
	return n, ioErr
}

// resetInput discards what the shell did not read of a command that ended
// without reading it all: in is closed, which frees the FIFO's buffer (no
// other process holds it open while the shell is at its prompt) and ends a
// write still waiting for room, and opened again, empty.
func (c *control) resetInput() error {
	c.in.Close()
	f, err := openFIFO(c.inPath)
	if err != nil {
		return err
	}
	c.in = f
	return nil
}

// closeRecords closes out, which ends its reader. It must not run under
// the session lock (see session.readRecords).
func (c *control) closeRecords() error {
	if err := c.out.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("close the status channel: %w", err)
	}
	return nil
}

// close releases the FIFOs and removes the directory; out must have been
// closed first, or nothing reads it (a failed start).
func (c *control) close() error {
	if c.in != nil {
		c.in.Close()
	}
	if c.out != nil {
		c.out.Close()
	}
	if c.releaseOwner != nil {
		c.releaseOwner()
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("remove control directory: %w", err)
	}
	return nil
}

// writeRaw writes as much of p as the descriptor takes without blocking.
func writeRaw(rc syscall.RawConn, p []byte) (int, error) {
	var n int
	var ioErr error
	err := rc.Control(func(fd uintptr) {
		for n < len(p) {
			m, err := unix.Write(int(fd), p[n:])
			if err == unix.EINTR {
				continue
			}
			if m > 0 {
				n += m
			}
			if err != nil {
				if err != unix.EAGAIN {
					ioErr = err
				}
				return
			}
		}
	})
	if err == nil {
		err = ioErr
	}
	return n, err
}
