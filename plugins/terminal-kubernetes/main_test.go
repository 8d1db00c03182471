package terminalkubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

func TestMain(m *testing.M) {
	code := func() int {
		defer func() {
			if builtDir != "" {
				os.RemoveAll(builtDir)
			}
		}()
		return goleakMain(m)
	}()
	os.Exit(code)
}

func goleakMain(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	// client-go's idle connections to the API server wind down on their
	// own, after the test that used them.
	if err := goleak.Find(
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		// A WebSocket exec's heartbeat ends at its next ping (every 5 s)
		// after the connection has closed, not with it.
		goleak.IgnoreTopFunction("k8s.io/client-go/tools/remotecommand.(*heartbeat).start"),
		// A closed SPDY exec's connection hands its close error to
		// nobody for a second (spdystream's shutdown), then ends.
		goleak.IgnoreTopFunction("github.com/moby/spdystream.(*Connection).shutdown"),
	); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		return 1
	}
	return 0
}

// waitLong bounds every wait in these tests. It only turns a hang into a
// clear failure and never decides a result.
const waitLong = 2 * time.Minute

// testConfig is a config that creates pods in namespace of the test
// cluster, as the backend's user, with the helper.
func testConfig(c *kubetest.Cluster, namespace string) *Config {
	cfg := DefaultConfig()
	cfg.Kubeconfig = c.BackendKubeconfig
	cfg.Namespace = namespace
	cfg.Image = c.Image
	cfg.HelperImage = c.HelperImage
	cfg.NodeName = c.Node
	cfg.Memory = "256Mi"
	cfg.IdleSilenceMs = 600000
	cfg.TimeoutMs = 90000
	cfg.LeaseSeconds = 3
	return cfg
}

func newBackend(t testing.TB, cfg *Config) *Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	b, err := New(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("backend close: %v", err)
		}
	})
	return b
}

// spawn starts a session of owner that the test closes at its end.
func spawn(t testing.TB, b termapi.Backend, owner string) termapi.Session {
	t.Helper()
	spec := termapi.SpawnSpec{SessionID: "pty-" + owner, OwnerID: owner}
	return terminaltest.Spawn(t, b, spec, waitLong)
}

// mustComplete runs command and checks that it completed with status code.
func mustComplete(t testing.TB, s termapi.Session, command string, code int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	return terminaltest.MustComplete(t, ctx, s, command, code)
}

// pluginBinary builds cmd/dsh-backend-kubernetes once per test binary,
// into builtDir, which TestMain removes.
var pluginBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "dsh-backend-kubernetes-")
	if err != nil {
		return "", err
	}
	builtDir = dir
	bin := filepath.Join(dir, "dsh-backend-kubernetes")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/dsh-backend-kubernetes")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build dsh-backend-kubernetes: %v\n%s", err, out)
	}
	return bin, nil
})

var builtDir string

// openPlugin runs cmd/dsh-backend-kubernetes with cfg over the backend
// plugin protocol, as a deployment loads it, and closes it at the test's
// end.
func openPlugin(t *testing.T, cfg *Config) *backendplugin.Client {
	t.Helper()
	return openPluginClosing(t, cfg, true)
}

// openPluginClosing is openPlugin; checkClose false tolerates a close
// that fails (the test killed the plugin).
func openPluginClosing(t *testing.T, cfg *Config, checkClose bool) *backendplugin.Client {
	t.Helper()
	bin, err := pluginBinary()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	c, err := backendplugin.Open(ctx, bin, raw, backendplugin.Options{SpawnTimeout: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := c.Close(ctx); err != nil && checkClose {
			t.Errorf("close the plugin: %v", err)
		}
	})
	return c
}

// goleakIgnoreIdleConns are the goroutines of client-go's idle
// connections, which wind down on their own after a test.
func goleakIgnoreIdleConns() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("k8s.io/client-go/tools/remotecommand.(*heartbeat).start"),
		goleak.IgnoreTopFunction("github.com/moby/spdystream.(*Connection).shutdown"),
	}
}

// killPlugin kills the process of the plugin binary this test binary
// built (there is one at a time: these tests are not parallel) with
// SIGKILL, and waits until it is gone.
func killPlugin(t *testing.T) {
	t.Helper()
	bin, err := pluginBinary()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == bin {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("%d processes of %s, want 1", len(pids), bin)
	}
	pidfd, err := unix.PidfdOpen(pids[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	// The pidfd turns readable when the process has ended.
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, int(waitLong/time.Millisecond)); err != nil || fds[0].Revents == 0 {
		t.Fatalf("the killed plugin did not end: %v", err)
	}
}
