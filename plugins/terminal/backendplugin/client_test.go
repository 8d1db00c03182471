package backendplugin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

const waitLong = 30 * time.Second

func TestOpenFailures(t *testing.T) {
	tests := []struct {
		name   string
		path   func(t *testing.T) string
		config string
		want   []string
	}{
		{"crash at start", func(t *testing.T) string { return pluginScript(t, "crash") }, "", []string{"start", "no handshake", "it wrote: plugin: cannot start: out of luck"}},
		{"not a plugin", func(t *testing.T) string { return pluginScript(t, "silent") }, "", []string{"start", "no handshake"}},
		{"a later protocol version", func(t *testing.T) string { return pluginScript(t, "future") }, "", []string{"incompatible API version", versions(backendplugin.ProtocolVersion + 1)}},
		{"the previous protocol version", func(t *testing.T) string { return pluginScript(t, "past") }, "", []string{"incompatible API version", versions(backendplugin.ProtocolVersion - 1)}},
		{"config rejected", func(t *testing.T) string { return pluginScript(t, "bash") }, `{"rows": 40, "bogus": 1}`, []string{"configure", `unknown field "bogus"`}},
		{"config invalid", func(t *testing.T) string { return pluginScript(t, "bash") }, `{"rows": -1}`, []string{"configure", "rows"}},
		{"missing executable", func(t *testing.T) string { return "/nonexistent/backend" }, "", []string{"/nonexistent/backend"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			c, err := backendplugin.Open(ctx, tt.path(t), json.RawMessage(tt.config), backendplugin.Options{})
			if err == nil {
				c.Close(context.Background())
				t.Fatal("Open succeeded")
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// pidGone waits until pid has exited, on a pidfd.
func pidGone(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(waitLong)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("process %d still runs", pid)
		}
		// A zombie is gone for our purposes: its parent reaps it.
		return
	}
}

func execIn(t *testing.T, s termapi.Session, command string) termapi.SendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	sn, err := s.Exec(ctx, termapi.ExecRequest{Command: command})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestPluginKilledMidCommand: the plugin dies while a command runs. The
// send settles as a shell exit, the session reports it, its shell goes
// with the plugin's terminal, and the next spawn gets a fresh plugin.
func TestPluginKilledMidCommand(t *testing.T) {
	c := open(t, "{}")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	if res := execIn(t, s, "export KEEP=1"); res.Exec == nil || res.Exec.State != termapi.ExecCompleted {
		t.Fatalf("export: %+v", res)
	}
	shell := s.PID()
	sn, err := s.Exec(ctx, termapi.ExecRequest{Command: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	plugin := backendplugin.ProcessID(c)
	if err := unix.Kill(plugin, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res, err := sn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != termapi.WaitSessionExit || !res.Status.Exited {
		t.Fatalf("send settled %s with %v, want a session exit", res.Reason, res.Status)
	}
	if st := s.Status(); !st.Exited {
		t.Errorf("status after the plugin died: %v", st)
	}
	if _, err := s.Exec(ctx, termapi.ExecRequest{Command: "true"}); !errors.Is(err, termapi.ErrSessionExited) {
		t.Errorf("Exec on the dead session: %v, want ErrSessionExited", err)
	}
	if err := s.Close(ctx, "test"); err != nil {
		t.Errorf("close of the dead session: %v", err)
	}
	pidGone(t, shell)

	s2, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s2", OwnerID: "o"})
	if err != nil {
		t.Fatalf("spawn after the plugin died: %v", err)
	}
	if backendplugin.ProcessID(c) == plugin {
		t.Error("the dead plugin process is still the one in use")
	}
	if res := execIn(t, s2, `test -z "$KEEP"`); res.Exec == nil || res.Exec.ExitCode != 0 {
		t.Errorf("fresh shell: %+v", res.Exec)
	}
	if err := s2.Close(ctx, "test"); err != nil {
		t.Fatal(err)
	}
}

// TestCloseStopsThePlugin: closing the client ends the plugin process and
// every session it still had.
func TestCloseStopsThePlugin(t *testing.T) {
	c, err := backendplugin.Open(context.Background(), pluginScript(t, "bash"), nil, backendplugin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	shell, plugin := s.PID(), backendplugin.ProcessID(c)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	pidGone(t, plugin)
	pidGone(t, shell)
	if _, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s2", OwnerID: "o"}); !errors.Is(err, backendplugin.ErrClosed) {
		t.Errorf("spawn after close: %v, want ErrClosed", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// TestSentinelErrors: the errors callers branch on survive the protocol.
func TestSentinelErrors(t *testing.T) {
	c := open(t, "{}")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx, "test")
	if _, err := s.Signal(ctx, termapi.SIGKILL); !errors.Is(err, termapi.ErrRefuseKillShell) {
		t.Errorf("SIGKILL of the shell: %v, want ErrRefuseKillShell", err)
	}
	if _, err := s.Signal(ctx, "SIGUSR1"); !errors.Is(err, termapi.ErrUnsupportedSignal) {
		t.Errorf("SIGUSR1: %v, want ErrUnsupportedSignal", err)
	}
	sn, err := s.Exec(ctx, termapi.ExecRequest{Command: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartSend(ctx, termapi.SendRequest{Text: "x"}); !errors.Is(err, termapi.ErrSendActive) {
		t.Errorf("second send: %v, want ErrSendActive", err)
	}
	sn.Cancel()
	if _, err := sn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "o"}); err == nil {
		t.Error("a second session with the same id was spawned")
	}
}

// TestHostGoneEndsPlugin: a plugin whose host is killed outright, with no
// chance to stop it, closes its sessions and exits.
func TestHostGoneEndsPlugin(t *testing.T) {
	hostCmd := exec.Command(os.Args[0])
	hostCmd.Env = append(os.Environ(), pluginMode+"=host", pluginPath+"="+pluginScript(t, "bash"))
	out, err := hostCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	hostCmd.Stderr = os.Stderr
	if err := hostCmd.Start(); err != nil {
		t.Fatal(err)
	}
	var plugin, shell int
	if _, err := fmt.Fscan(bufio.NewReader(out), &plugin, &shell); err != nil {
		hostCmd.Process.Kill()
		hostCmd.Wait()
		t.Fatalf("the host did not report its plugin: %v", err)
	}
	if err := hostCmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	hostCmd.Wait()
	pidGone(t, plugin)
	pidGone(t, shell)
}

// TestPolicyCrosses: a spawn's policy reaches the plugin's backend (the
// sandbox mode, the size), and the session's capabilities come back.
func TestPolicyCrosses(t *testing.T) {
	c := open(t, "{}")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "o", Cwd: t.TempDir(), Policy: termapi.Policy{Sandbox: termapi.SandboxReadOnly, Size: termapi.Size{Rows: 31, Cols: 97}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx, "test")
	want := termapi.Capabilities{Exec: true, Raw: true, Resize: true, Attach: true, InputProof: true, Files: true, HostFiles: true, Sandbox: termapi.SandboxReadOnly, EndCommand: true}
	if got := s.Capabilities(); got != want {
		t.Errorf("Capabilities = %+v, want %+v", got, want)
	}
	if res := execIn(t, s, "stty size"); res.Exec == nil || !strings.Contains(res.Viewport, "31 97") {
		t.Errorf("the size did not reach the terminal: %+v", res)
	}
	plain, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s2", OwnerID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx, "test")
	if got := plain.Capabilities().Sandbox; got != termapi.SandboxFullAccess {
		t.Errorf("Capabilities().Sandbox = %q, want danger-full-access", got)
	}
}

// versions is what a failed start says of a plugin of protocol version v:
// both versions, the plugin's and dsh's.
func versions(v int) string {
	return fmt.Sprintf("it speaks backend protocol version %d, this dsh speaks version %d", v, backendplugin.ProtocolVersion)
}

// TestEndCommandCrosses: EndCommand reaches the plugin's session and ends
// what the latest command left running, not an earlier job.
func TestEndCommandCrosses(t *testing.T) {
	c := open(t, "{}")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "o", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx, "test")
	execIn(t, s, "sleep 1000 &")
	execIn(t, s, "sleep 1001 & sleep 1002 &")
	n, err := s.EndCommand(ctx)
	if err != nil || n != 2 {
		t.Errorf("EndCommand = %d, %v; want the 2 sleeps of the latest command", n, err)
	}
	res := execIn(t, s, "jobs -r")
	if !strings.Contains(res.Viewport, "sleep 1000") || strings.Contains(res.Viewport, "sleep 1001") {
		t.Errorf("jobs left running: %q", res.Viewport)
	}
}

func TestLimitsHitConvert(t *testing.T) {
	in := termapi.SendResult{Reason: termapi.WaitStdinRead, LimitsHit: termapi.Limits{Memory: 1 << 30, Pids: 8}}
	if got := backendplugin.ResultRoundTrip(in); got.LimitsHit != in.LimitsHit {
		t.Errorf("LimitsHit %+v came back as %+v", in.LimitsHit, got.LimitsHit)
	}
}

// A plugin built before a call existed answers it Unimplemented: to the
// host that is an unsupported call, which callers know how to take.
func TestUnimplementedIsUnsupported(t *testing.T) {
	err := backendplugin.FromStatus("end command", status.Error(codes.Unimplemented, "method EndCommand not implemented"))
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("%v does not wrap errors.ErrUnsupported", err)
	}
}
