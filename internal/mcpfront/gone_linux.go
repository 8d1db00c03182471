package mcpfront

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// writerGone returns a channel that is closed when w, the connection's
// output, is a pipe or socket whose reading end has closed (POLLERR or
// POLLHUP on its write end): the client has gone. Other writers never
// report it. stop ends the watch.
func writerGone(w io.Writer) (gone <-chan struct{}, stop func()) {
	f, ok := w.(*os.File)
	if !ok {
		return nil, func() {}
	}
	var wake [2]int
	if err := unix.Pipe2(wake[:], unix.O_CLOEXEC); err != nil {
		return nil, func() {}
	}
	ch := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: 0}, {Fd: int32(wake[0]), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			if err == nil && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
				close(ch)
			}
			return
		}
	}()
	return ch, func() {
		unix.Write(wake[1], []byte{0})
		<-done
		unix.Close(wake[0])
		unix.Close(wake[1])
	}
}

// unreadOutput reports how many bytes written to w its reader has not read
// yet, when w is a pipe (FIONREAD) or a unix socket (SIOCOUTQ, which counts
// what the peer has not consumed); ok is false for any other writer.
func unreadOutput(w io.Writer) (n int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile {
		return 0, false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	var ioErr error
	err = rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if ioErr = unix.Fstat(int(fd), &st); ioErr != nil {
			return
		}
		req := uint(unix.TIOCINQ) // FIONREAD
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFIFO:
		case unix.S_IFSOCK:
			req = unix.SIOCOUTQ
		default:
			ioErr = unix.ENOTSUP
			return
		}
		n, ioErr = unix.IoctlGetInt(int(fd), req)
	})
	return n, err == nil && ioErr == nil
}
