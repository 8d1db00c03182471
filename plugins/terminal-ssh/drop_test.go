package terminalssh

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// A connection that dies is the shell's exit: the live send settles as
// session_exit, the status says exited (how is unknown), and nothing runs
// afterwards. The server dies with SIGKILL, so it cannot say goodbye; the
// kernel closes its sockets. A server that stops answering instead is
// found dead by the keepalive.
func TestConnectionLost(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepalive int
		lose      func(srv *testServer)
	}{
		{"server killed", 0, func(srv *testServer) { srv.killServing() }},
		{"server frozen", 1, func(srv *testServer) { srv.signalServing(syscall.SIGSTOP) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			srv := newServer(t)
			cfg := srv.config()
			cfg.IdleSilenceMs, cfg.TimeoutMs, cfg.KeepaliveSeconds = 600000, 60000, tc.keepalive
			s := spawn(t, newBackend(t, cfg), "")
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			send, err := s.Exec(ctx, termapi.ExecRequest{Command: "sh -c 'echo ready; exec sleep 1000'", Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			if line, err := send.Output(ctx); err != nil || line != "ready\n" {
				t.Fatalf("first output = %q, %v", line, err)
			}
			tc.lose(srv)
			_, res := drain(t, ctx, send)
			want := termapi.Status{Exited: true, ExitCode: -1}
			if res.Reason != termapi.WaitSessionExit || res.Status != want || s.Status() != want {
				t.Fatalf("settled %s with %v (session %v), want session_exit with %v", res.Reason, res.Status, s.Status(), want)
			}
			if res.Exec.State != termapi.ExecRunning {
				t.Fatalf("exec state = %s, want running", res.Exec.State)
			}
			for _, err := range []error{
				func() error { _, err := s.Exec(ctx, termapi.ExecRequest{Command: "true"}); return err }(),
				func() error { _, err := s.StartSend(ctx, termapi.SendRequest{Text: "x", Submit: true}); return err }(),
			} {
				if !errors.Is(err, termapi.ErrSessionExited) {
					t.Fatalf("after the loss: %v, want %v", err, termapi.ErrSessionExited)
				}
			}
			srv.stop()
			if err := s.Close(ctx, "test"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// signalServing sends sig to the server's processes that serve connections.
func (srv *testServer) signalServing(sig syscall.Signal) {
	for _, pid := range descendants(srv.cmd.Process.Pid) {
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.HasPrefix(string(comm), "sshd") {
			_ = syscall.Kill(pid, sig)
		}
	}
}
