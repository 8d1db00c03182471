//go:build linux

package backendplugin

import (
	"context"
	"os"

	"golang.org/x/sys/unix"
)

// watchParent calls stop, then ends the process, when the process that
// started this one exits: a host killed outright cannot stop its plugins,
// and their sessions must not live on without it. It waits on a pidfd of
// the parent, with no polling. The returned func ends the watch.
func watchParent(stop func()) (cancel func()) {
	ppid := os.Getppid()
	fd, err := unix.PidfdOpen(ppid, 0)
	if err != nil {
		return func() {}
	}
	if os.Getppid() != ppid { // the parent went before the pidfd was made
		unix.Close(fd)
		stop()
		os.Exit(0)
	}
	ctx, cancelCtx := context.WithCancel(context.Background())
	wake, err := eventFD()
	if err != nil {
		unix.Close(fd)
		cancelCtx()
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(fd)
		defer unix.Close(wake)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			if ctx.Err() != nil || fds[1].Revents != 0 {
				return
			}
			if fds[0].Revents != 0 {
				stop()
				os.Exit(0)
			}
			if err != nil {
				return
			}
		}
	}()
	return func() {
		cancelCtx()
		var one = [8]byte{1}
		_, _ = unix.Write(wake, one[:])
		<-done
	}
}

// eventFD makes a descriptor that a write makes readable, to wake a poll.
func eventFD() (int, error) {
	return unix.Eventfd(0, unix.EFD_CLOEXEC)
}
