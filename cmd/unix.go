//go:build linux

package dshcmd

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/dshdev/dsh/internal/peercred"
	"github.com/dshdev/dsh/internal/private"
)

// unixPrefix marks an --http address that is a unix socket's path.
const unixPrefix = "unix:"

// listenUnix listens on a unix socket at path. Its directory must be this
// user's and closed to everyone else (it is made 0700 if missing), and a
// stale socket left by a dsh that died is replaced; a socket someone still
// serves on is not.
func listenUnix(path string) (net.Listener, error) {
	if !filepath.IsAbs(path) {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		path = abs
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := private.Check(dir); err != nil {
		return nil, fmt.Errorf("the socket's directory: %w", err)
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the socket's directory %s is open to other users (mode %#o); make it 0700", dir, fi.Mode().Perm())
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s is in use by another server", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	return ln, nil
}

// peerListener accepts only connections from processes of one user, as
// the kernel reports them (SO_PEERCRED), in dsh's own user namespace. The
// socket's directory already keeps other users out; this holds even if it
// is opened up later. A process in another user namespace with the same
// uid is a sandboxed shell (dsh's own, or another program's): handing it
// this socket's unconfined shells would undo its sandbox.
type peerListener struct {
	net.Listener
	uid    int
	logger *slog.Logger
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if err := peercred.Check(c, l.uid); err != nil {
			l.logger.Warn("refused a connection", "err", err)
			c.Close()
			continue
		}
		return c, nil
	}
}

// isUnixAddr reports whether an --http address names a unix socket, and
// its path.
func isUnixAddr(addr string) (string, bool) {
	return strings.CutPrefix(addr, unixPrefix)
}
