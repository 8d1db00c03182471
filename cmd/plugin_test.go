//go:build linux

package dshcmd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// backendPluginDeployment builds dsh-backend-bash into a fresh private
// directory and writes a deployment that serves the bash tool on it.
func backendPluginDeployment(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "dsh-backend-bash"), "./dsh-backend-bash").CombinedOutput(); err != nil {
		t.Fatalf("build dsh-backend-bash: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "plugin.yaml")
	if err := os.WriteFile(path, []byte("- id: terminal\n  name: terminal\n- id: shell\n  name: ./dsh-backend-bash\n- id: bash\n  name: tool-bash-persistent\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestE2EStoppedPluginShutdown: a backend plugin stops answering (SIGSTOP)
// while a call runs; SIGTERM still ends dsh cleanly, and the plugin does
// not outlive it (issue 26, item 6: dsh took 20 s, exited 1 and left the
// plugin stopped and orphaned).
func TestE2EStoppedPluginShutdown(t *testing.T) {
	cs, cmd, stderr := startStdio(t, "-d", backendPluginDeployment(t), "--workdir", t.TempDir())
	text, _ := bash(t, cs, "echo $PPID")
	plugin, err := strconv.Atoi(strings.TrimSpace(text))
	if err != nil {
		t.Fatalf("echo $PPID: %q", text)
	}
	started := fifo(t)
	go cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": sleeper(started)}})
	sleepPid := readPid(t, started)
	if err := syscall.Kill(plugin, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(plugin, syscall.SIGCONT) })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cs.Wait() }()
	recv(t, waited, "dsh to close the session")
	closeAndWait(t, cs, cmd)
	// The plugin is killed before dsh exits; what its shell ran goes with
	// the shell's terminal, a moment later (the hangup reaches them once
	// the kernel has torn the plugin down).
	waitGone(t, plugin, sleepPid)
	t.Logf("dsh stderr: %s", stderr.String())
}

// waitGone waits until each of pids has exited (a zombie has), on a pidfd,
// failing after the test's deadline.
func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		end := time.Now().Add(deadline)
		for {
			n, err := unix.Poll(fds, int(time.Until(end).Milliseconds()))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				unix.Close(fd)
				t.Fatal(err)
			}
			if n == 0 {
				unix.Close(fd)
				assertGone(t, pid)
				t.FailNow()
			}
			break
		}
		unix.Close(fd)
	}
}
