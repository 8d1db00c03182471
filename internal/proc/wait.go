//go:build linux

package proc

import (
	"context"
	"time"
)

// onCancel runs f if ctx ends before stop is called. stop waits for an f
// already running, so nothing started here outlives the caller.
func onCancel(ctx context.Context, f func()) (stop func()) {
	done := make(chan struct{})
	unregister := context.AfterFunc(ctx, func() {
		defer close(done)
		f()
	})
	return func() {
		if !unregister() {
			<-done
		}
	}
}

// waitExited returns when every process in hs has exited or deadline has
// passed (both nil), or when ctx ends (ctx.Err()). Pidfds are waited on
// through the runtime poller one after the other against the one deadline,
// which takes as long as waiting on all of them at once and needs no
// goroutines.
func waitExited(ctx context.Context, hs []*pidHandle, deadline time.Time) error {
	var polled, unpollable []*pidHandle
	for _, h := range hs {
		if h.file == nil {
			unpollable = append(unpollable, h)
			continue
		}
		h.file.SetReadDeadline(deadline)
		polled = append(polled, h)
	}
	stop := onCancel(ctx, func() {
		for _, h := range polled {
			h.file.SetReadDeadline(time.Unix(1, 0))
		}
	})
	defer stop()
	for _, h := range polled {
		rc, err := h.file.SyscallConn()
		if err != nil {
			continue
		}
		// The callback checks readiness without blocking; returning false
		// parks the goroutine until the poller sees the pidfd readable.
		if err := rc.Read(func(fd uintptr) bool { return pollReadable(int(fd)) }); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			break // the deadline: the caller looks at who is left
		}
	}
	return waitUnpollable(ctx, unpollable, deadline)
}

// waitUnpollable waits for processes that have no pidfd (Linux < 5.3).
// Nothing reports the exit of a process that is not our child there, so
// this is the one place that re-checks on a timer, backing off from 1 ms to
// 25 ms.
func waitUnpollable(ctx context.Context, hs []*pidHandle, deadline time.Time) error {
	delay := time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		live := hs[:0]
		for _, h := range hs {
			if !h.exited() {
				live = append(live, h)
			}
		}
		hs = live
		left := time.Until(deadline)
		if len(hs) == 0 || left <= 0 {
			return nil
		}
		timer.Reset(min(delay, left))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		delay = min(2*delay, 25*time.Millisecond)
	}
}
