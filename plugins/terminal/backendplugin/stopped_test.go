package backendplugin_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// openWith starts the bash plugin with opts and closes it when t ends.
func openWith(t *testing.T, opts backendplugin.Options) *backendplugin.Client {
	t.Helper()
	c, err := backendplugin.Open(context.Background(), pluginScript(t, "bash"), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

// stopPlugin stops c's plugin process (SIGSTOP) and returns its pid; the
// process is continued at the test's end if it is still there.
func stopPlugin(t *testing.T, c *backendplugin.Client) int {
	t.Helper()
	pid := backendplugin.ProcessID(c)
	if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Kill(pid, unix.SIGCONT) })
	// The signal is only queued: until every thread has stopped, the
	// plugin may still answer a call. The kernel tells its parent, this
	// process, when the stop is complete; WNOWAIT leaves that news, and
	// os/exec's wait for the exit, alone.
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			t.Fatalf("waiting for the plugin %d to stop: %v", pid, err)
		}
	}
	return pid
}

// TestPluginThatStopsAnswering: a plugin stopped mid-call (SIGSTOP) is
// found out by its health check and killed; the call in flight and its
// other sessions end, saying why, and the next spawn gets a fresh plugin
// (issue 26, item 6).
func TestPluginThatStopsAnswering(t *testing.T) {
	c := openWith(t, backendplugin.Options{HealthInterval: 100 * time.Millisecond, HealthTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s1, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s2", OwnerID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	sn, err := s1.Exec(ctx, termapi.ExecRequest{Command: "sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	plugin := stopPlugin(t, c)
	res, err := sn.Wait(ctx)
	if err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	if res.Reason != termapi.WaitSessionExit || !res.Status.Exited || !strings.Contains(res.Status.Lost, "stopped answering") {
		t.Fatalf("the call in flight settled %s with %+v, want a session exit saying the plugin stopped answering", res.Reason, res.Status)
	}
	pidGone(t, plugin)
	if st := s2.Status(); !st.Exited || !strings.Contains(st.Lost, "stopped answering") {
		t.Errorf("the other session: %+v", st)
	}
	if _, err := s2.Exec(ctx, termapi.ExecRequest{Command: "true"}); !errors.Is(err, termapi.ErrSessionExited) || !strings.Contains(err.Error(), "stopped answering") {
		t.Errorf("Exec on the other session: %v", err)
	}
	s3, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s3", OwnerID: "o"})
	if err != nil {
		t.Fatalf("spawn after the plugin was killed: %v", err)
	}
	if backendplugin.ProcessID(c) == plugin {
		t.Fatal("the stopped plugin is still the one in use")
	}
	if res := execIn(t, s3, "echo fresh"); res.Exec == nil || res.Exec.State != termapi.ExecCompleted {
		t.Fatalf("a command in the fresh plugin: %+v", res)
	}
	if err := s3.Close(ctx, "test"); err != nil {
		t.Fatal(err)
	}
}

// TestPluginCallsAreBounded: with no periodic health check, a call to a
// stopped plugin still returns within the call timeout, and the check it
// sets off kills the plugin.
func TestPluginCallsAreBounded(t *testing.T) {
	c := openWith(t, backendplugin.Options{HealthInterval: -1, CallTimeout: 300 * time.Millisecond, HealthTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	sn, err := s.Exec(ctx, termapi.ExecRequest{Command: "sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	plugin := stopPlugin(t, c)
	if _, err := s.Signal(context.Background(), termapi.SIGINT); err == nil {
		t.Fatal("a signal through the stopped plugin succeeded")
	}
	if _, err := s.Read(termapi.ReadRequest{}); err == nil {
		t.Fatal("a read through the stopped plugin succeeded")
	}
	res, err := sn.Wait(ctx)
	if err != nil || res.Reason != termapi.WaitSessionExit || !strings.Contains(res.Status.Lost, "stopped answering") {
		t.Fatalf("the call in flight: %+v, %v", res, err)
	}
	pidGone(t, plugin)
}

// TestCloseEndsAStoppedPlugin: closing the backend ends a plugin that
// does not answer, within the close's grace, and its shells with it.
func TestCloseEndsAStoppedPlugin(t *testing.T) {
	c, err := backendplugin.Open(context.Background(), pluginScript(t, "bash"), nil, backendplugin.Options{HealthInterval: -1, HealthTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	shell := s.PID()
	plugin := stopPlugin(t, c)
	grace, cancelGrace := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelGrace()
	c.Close(grace)
	pidGone(t, plugin)
	pidGone(t, shell)
}
