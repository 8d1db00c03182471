package terminaldocker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/dshdev/dsh/plugins/terminal-docker/dockertest"
	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

func TestConformance(t *testing.T) {
	host := dockertest.Daemon(t)
	terminaltest.CheckGoroutines(t)
	terminaltest.TestBackend(t, func(t *testing.T) termapi.Backend {
		cfg := testConfig(host)
		cfg.IdleSilenceMs = 2000
		return newBackend(t, cfg)
	}, terminaltest.Options{
		EchoCommand:     func(text string) string { return "printf '%s\\n' " + strconv.Quote(text) },
		ReadCommand:     "read line",
		AnswerCommand:   func(prefix string) string { return `read -r line; printf '%s\n' "` + prefix + `$line"` },
		LineCommand:     "stty sane 2>/dev/null; read line",
		SecretCommand:   "stty sane 2>/dev/null; read -s line",
		ProvesStdinWait: true,
		ExitCommand:     "exit 3",
		StatusCommand:   func(code int) string { return "(exit " + strconv.Itoa(code) + ")" },
		SizeCommand:     "stty size",
		CatCommand:      func(path string) string { return "cat -- '" + path + "'" },
		Timeout:         2 * time.Minute,
	})
}

// The workspace is the owner's directory, mounted where the shell starts;
// state persists between commands; closing removes the container.
func TestWorkspaceAndState(t *testing.T) {
	host := dockertest.Daemon(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "from-host"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := containerCount(t, host)
	b := newBackend(t, testConfig(host))
	s := spawn(t, b, ws)
	if out := mustComplete(t, s, "pwd; cat from-host; echo made > from-container", 0); out != "/workspace\nhello\n" {
		t.Errorf("output %q", out)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "from-container")); err != nil || string(data) != "made\n" {
		t.Errorf("the file the container wrote: %q, %v", data, err)
	}
	mustComplete(t, s, "cd /tmp; export KEPT=yes", 0)
	if out := mustComplete(t, s, "echo $PWD $KEPT", 0); out != "/tmp yes\n" {
		t.Errorf("state: %q", out)
	}
	if got := containerCount(t, host); got != before+1 {
		t.Errorf("%d containers, want %d", got, before+1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := s.Close(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if got := containerCount(t, host); got != before {
		t.Errorf("%d containers after close, want %d", got, before)
	}
}

// network none, the default, leaves only loopback.
func TestNoNetworkByDefault(t *testing.T) {
	host := dockertest.Daemon(t)
	s := spawn(t, newBackend(t, testConfig(host)), "")
	out := mustComplete(t, s, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`, 0)
	if out != "lo\n" {
		t.Errorf("interfaces %q, want only lo", out)
	}
}

// Limits reach the container: pids, memory, a non-root user.
func TestLimitsAndUser(t *testing.T) {
	host := dockertest.Daemon(t)
	cfg := testConfig(host)
	cfg.PidsLimit = 20
	cfg.Memory = "64m"
	cfg.User = "1000:1000"
	s := spawn(t, newBackend(t, cfg), "")
	if out := mustComplete(t, s, "id -u; id -g", 0); out != "1000\n1000\n" {
		t.Errorf("user: %q", out)
	}
	if out := mustComplete(t, s, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes", 0); strings.TrimSpace(out) != strconv.Itoa(64<<20) {
		t.Errorf("memory limit %q, want %d", out, 64<<20)
	}
	// The kernel's own limits, as the container sees them (cgroup v2, or
	// v1's pids controller).
	if out := mustComplete(t, s, "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max", 0); out != "20\n" {
		t.Errorf("pids limit %q, want 20", out)
	}
}

// A spawn's policy sets the limits of the container dsh creates for it,
// over the configured ones, field by field; an existing container, whose
// limits dsh did not set, refuses them.
func TestPolicyLimitsReachTheContainer(t *testing.T) {
	host := dockertest.Daemon(t)
	cfg := testConfig(host)
	cfg.PidsLimit = 20
	spec := termapi.SpawnSpec{SessionID: "pty-test", OwnerID: "owner-test", Policy: termapi.Policy{Limits: termapi.Limits{Memory: 96 << 20, CPU: 0.5}}}
	s := terminaltest.Spawn(t, newBackend(t, cfg), spec, waitLong).(*inband.Session)
	if got, want := s.Capabilities().Limits, (termapi.Limits{Memory: 96 << 20, Pids: 20, CPU: 0.5}); got != want {
		t.Errorf("capabilities %+v, want %+v", got, want)
	}
	if out := mustComplete(t, s, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes", 0); strings.TrimSpace(out) != strconv.Itoa(96<<20) {
		t.Errorf("memory limit %q, want %d", out, 96<<20)
	}
	if out := mustComplete(t, s, "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max", 0); out != "20\n" {
		t.Errorf("pids limit %q, want 20", out)
	}
	if out := mustComplete(t, s, "cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us", 0); !strings.HasPrefix(out, "50000") {
		t.Errorf("cpu limit %q, want a quota of 50000 per 100000", out)
	}
}

// A container killed mid-command is the shell's exit; the next spawn
// works.
func TestContainerKilledMidCommand(t *testing.T) {
	host := dockertest.Daemon(t)
	b := newBackend(t, testConfig(host))
	s := spawn(t, b, "")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: "echo started; sleep 1000", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if line, err := send.Output(ctx); err != nil || line != "started\n" {
		t.Fatalf("output %q, %v", line, err)
	}
	id := s.Status() // running
	if id.Exited {
		t.Fatal("exited early")
	}
	cid := containerOf(t, host)
	if _, err := b.api.ContainerKill(ctx, cid, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	res, err := send.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != termapi.WaitSessionExit || !res.Status.Exited {
		t.Fatalf("settled %s with %v, want session_exit", res.Reason, res.Status)
	}
	if _, err := s.Exec(ctx, termapi.ExecRequest{Command: "true"}); !errors.Is(err, termapi.ErrSessionExited) {
		t.Errorf("exec after the kill: %v, want ErrSessionExited", err)
	}
	again := spawn(t, b, "")
	if out := mustComplete(t, again, "echo back", 0); out != "back\n" {
		t.Errorf("new session: %q", out)
	}
}

func containerOf(t *testing.T, host string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	b := newBackend(t, testConfig(host))
	list, err := b.api.ContainerList(ctx, containerListOptions("pty-test"))
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("containers of pty-test: %v (%d)", err, len(list.Items))
	}
	return list.Items[0].ID
}

// Bad configuration and a missing image or daemon are clear load errors.
func TestLoadErrors(t *testing.T) {
	host := dockertest.Daemon(t)
	ctx := context.Background()
	cfg := testConfig(host)
	cfg.Image = "dsh-no-such-image:0"
	if _, err := New(ctx, cfg, nil); !errors.Is(err, ErrNoImage) || !strings.Contains(err.Error(), "dsh-no-such-image:0") {
		t.Errorf("missing image: %v", err)
	}
	cfg = testConfig("unix://" + filepath.Join(t.TempDir(), "no.sock"))
	if _, err := New(ctx, cfg, nil); !errors.Is(err, ErrUnreachable) {
		t.Errorf("no daemon: %v", err)
	}
	cfg = testConfig(host)
	cfg.Image, cfg.Container = "", "dsh-no-such-container"
	if _, err := New(ctx, cfg, nil); !errors.Is(err, ErrNoContainer) {
		t.Errorf("missing container: %v", err)
	}
}

// In an existing container each session is an exec; closing it ends the
// shell and what it started (even a job that ignores SIGHUP), and leaves
// the container running.
func TestExistingContainer(t *testing.T) {
	host := dockertest.Daemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	api := newBackend(t, testConfig(host)).api
	created, err := api.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: dockertest.Image, Cmd: []string{"/bin/bash"}, OpenStdin: true},
		HostConfig: &container.HostConfig{NetworkMode: "none", Init: ptr(true)},
		Name:       "dsh-test-existing-" + randomSuffix(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer api.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
	if _, err := api.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(host)
	cfg.Image, cfg.Container = "", created.ID
	b := newBackend(t, cfg)
	s := spawn(t, b, "")
	out := mustComplete(t, s, "trap '' HUP; (trap '' HUP; exec sleep 1000) & echo $!", 0)
	fields := strings.Fields(out) // "[1] 14" (bash's job announcement), then the pid
	job, err := strconv.Atoi(fields[len(fields)-1])
	if err != nil {
		t.Fatalf("job pid %q", out)
	}
	if s.PID() == 0 {
		t.Fatal("the shell's host pid is unknown: the sweep cannot be checked")
	}
	if err := s.Close(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	ps, err := api.ContainerTop(ctx, created.ID, client.ContainerTopOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps.Processes {
		if strings.Contains(strings.Join(p, " "), "sleep 1000") {
			t.Errorf("job %d survived the close: %v", job, p)
		}
	}
	ci, err := api.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil || !ci.Container.State.Running {
		t.Errorf("the container is not running after the close: %v", err)
	}
}

// The defaults hold against a hostile shell (issue 25, item 8): it runs as
// dsh's user, not the image's root, with no capability, no new
// privileges, a pids and a memory limit, and leaves no setuid or setgid
// file nor a device node in the host's project, even where dsh's user is
// root and so is the container's.
func TestDefaultsLeaveNoSetuidFileOrDevice(t *testing.T) {
	host := dockertest.Daemon(t)
	ws := t.TempDir()
	s := spawn(t, newBackend(t, testConfig(host)), ws)
	if out, want := mustComplete(t, s, "id -u; id -g", 0), fmt.Sprintf("%d\n%d\n", os.Getuid(), os.Getgid()); out != want {
		t.Errorf("user %q, want dsh's %q", out, want)
	}
	if out := mustComplete(t, s, "grep -E '^(Cap(Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status | tr -d '\\t'", 0); out != "CapPrm:0000000000000000\nCapEff:0000000000000000\nCapBnd:0000000000000000\nCapAmb:0000000000000000\nNoNewPrivs:1\n" {
		t.Errorf("privileges:\n%s", out)
	}
	if out := mustComplete(t, s, "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max", 0); out != "1024\n" {
		t.Errorf("pids limit %q, want 1024", out)
	}
	if out := mustComplete(t, s, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes", 0); strings.TrimSpace(out) != strconv.Itoa(2<<30) {
		t.Errorf("memory limit %q, want %d", out, 2<<30)
	}
	// A build still sets modes in the workspace.
	mustComplete(t, s, "cp /bin/true /workspace/tool && chmod 755 /workspace/tool && /workspace/tool", 0)
	for _, attack := range []string{
		"cp /bin/bash /workspace/.rb && chmod 4755 /workspace/.rb",
		"chmod u+s /workspace/tool",
		"chmod g+s /workspace/tool",
		"mknod -m 666 /workspace/.null c 1 3",
		"mknod -m 4755 /workspace/.reg p",
	} {
		mustComplete(t, s, attack, 1)
	}
	err := filepath.WalkDir(ws, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			t.Errorf("%s is %v on the host", path, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
