package terminalssh

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Close during a command, from several goroutines at once: every call
// succeeds, the live send settles as session_exit, the remote shell and its
// job are gone (the server runs on this machine, so their pids can be
// watched), and no goroutine is left.
func TestCloseConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	ts, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-close"})
	if err != nil {
		t.Fatal(err)
	}
	s := ts.(*inband.Session)
	shell := pidOf(t, mustComplete(t, s, "echo $$", 0))
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: "sh -c 'echo $$; exec sleep 1000'", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	line, err := send.Output(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job := pidOf(t, line)
	watched := []int{watch(t, shell), watch(t, job)}

	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = s.Close(ctx, "test") })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("close %d: %v", i, err)
		}
	}
	if err := s.Close(ctx, "again"); err != nil {
		t.Errorf("close again: %v", err)
	}
	res, err := send.Wait(ctx)
	if err != nil || res.Reason != termapi.WaitSessionExit {
		t.Fatalf("the live send after close: %+v, %v", res, err)
	}
	if st := s.Status(); !st.Exited {
		t.Fatalf("status after close = %v", st)
	}
	for _, err := range []error{
		func() error { _, err := s.StartSend(ctx, termapi.SendRequest{Text: "x"}); return err }(),
		func() error { _, err := s.Exec(ctx, termapi.ExecRequest{Command: "true"}); return err }(),
		func() error { _, err := s.Signal(ctx, termapi.SIGINT); return err }(),
	} {
		if !errors.Is(err, termapi.ErrSessionClosing) {
			t.Errorf("after close: %v, want %v", err, termapi.ErrSessionClosing)
		}
	}
	for _, fd := range watched {
		waitExit(t, fd)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-late"}); !errors.Is(err, termapi.ErrBackendClosed) {
		t.Fatalf("spawn after the backend closed = %v, want %v", err, termapi.ErrBackendClosed)
	}
}

// A spawn whose context is cancelled while the shell starts leaves nothing
// behind.
func TestSpawnCancelledDuringStartup(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := newBackend(t, nil)
	cause := errors.New("the caller gave up")
	for range 3 {
		ctx, cancel := context.WithCancelCause(context.Background())
		// Cancelled as soon as the connection is up: the startup is in flight.
		b.afterDial = func() { cancel(cause) }
		s, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-cancel"})
		if s != nil || !errors.Is(err, cause) {
			t.Fatalf("spawn cancelled during startup = %v, %v; want %v", s, err, cause)
		}
	}
	b.afterDial = nil
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func pidOf(t *testing.T, out string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("not a pid: %q", out)
	}
	return pid
}

// watch opens a pidfd for pid, closed when the test ends.
func watch(t *testing.T, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// waitExit waits until the process behind a pidfd has exited: the pidfd
// becomes readable then.
func waitExit(t *testing.T, fd int) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			t.Fatalf("poll: %v", err)
		case n == 0:
			t.Fatal("a process of the closed session is still running")
		}
		return
	}
}
