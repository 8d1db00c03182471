//go:build linux

// Package peercred checks who is at the other end of a unix socket: the
// kernel's record of the peer process (SO_PEERCRED) must be this user's,
// in this process's user namespace. A process in another user namespace
// with the same uid is a sandboxed shell (dsh's own, or another
// program's): what such a socket hands out (unconfined shells, a server's
// commands) would undo its sandbox. Both dsh serve --http unix: and a
// keeper's socket use it.
package peercred

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrForeign is the error of a peer that is not this user in this user
// namespace.
var ErrForeign = errors.New("peercred: the peer is not this user")

// Of is the process at the other end of a unix socket connection, as it
// was when it connected (or, for the connecting side, when the listener
// was made).
func Of(c net.Conn) (*unix.Ucred, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errors.New("peercred: not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, credErr
	}
	return cred, nil
}

// Check reports whether c's peer is uid, in this process's user namespace
// (an error wrapping ErrForeign otherwise).
func Check(c net.Conn, uid int) error {
	cred, err := Of(c)
	if err != nil {
		return fmt.Errorf("%w: its credentials cannot be read: %v", ErrForeign, err)
	}
	if int(cred.Uid) != uid {
		return fmt.Errorf("%w: peer uid %d", ErrForeign, cred.Uid)
	}
	same, err := SameUserNamespace(int(cred.Pid))
	if !same {
		if err == nil {
			err = errors.New("it runs in another user namespace (a sandbox)")
		}
		return fmt.Errorf("%w: peer pid %d: %v", ErrForeign, cred.Pid, err)
	}
	return nil
}

// SameUserNamespace reports whether process pid is in this process's user
// namespace. A process that cannot be looked at (gone, or hidden) is not.
func SameUserNamespace(pid int) (bool, error) {
	var ours, theirs unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &ours); err != nil {
		return false, err
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/user", pid), &theirs); err != nil {
		return false, err
	}
	return ours.Dev == theirs.Dev && ours.Ino == theirs.Ino, nil
}
