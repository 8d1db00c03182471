package bashtool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/invariant"
	_ "github.com/dshdev/dsh/plugins/terminal"
	_ "github.com/dshdev/dsh/plugins/terminal-bash/plugin"
	bashtool "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

// harness is a real host with the terminal service, the bash backend and
// the tool, as the default deployment wires them.
type harness struct {
	h   *host.Host
	inv *invariant.Service
}

// externalBackend names a backend executable (cmd/dsh-backend-bash) to run
// the tests on instead of the in-process backend: the tool must behave the
// same with its backend out of process. CI runs the suite both ways.
const externalBackend = "DSH_TEST_BACKEND"

// externalBackendConfig is YAML config (a mapping) for the backend
// externalBackend names, under the config each test gives: what a docker
// backend needs to reach its daemon and image.
const externalBackendConfig = "DSH_TEST_BACKEND_CONFIG"

// newHarness loads the three plugins; extra is YAML config for the tool.
func newHarness(t testing.TB, toolConfig string, backendConfig string) *harness {
	t.Helper()
	backend := "terminal-bash"
	if path := os.Getenv(externalBackend); path != "" {
		backend = path
	}
	if toolConfig == "" {
		toolConfig = "{}"
	}
	if backendConfig == "" {
		backendConfig = "{}"
	}
	if base := os.Getenv(externalBackendConfig); base != "" {
		backendConfig = mergeYAML(t, base, backendConfig)
	}
	yaml := fmt.Sprintf(`
- id: terminal
  name: terminal
- id: terminal-bash
  name: %s
  config: %s
- id: bash
  name: tool-bash-persistent
  config: %s
`, backend, backendConfig, toolConfig)
	d, err := host.ParseDeployment("test.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The suite runs with the runtime invariants on: a violation fails the
	// call that saw it, and the test.
	invariant.Augment(d)
	// Warnings (a panic's stack, a failed close) go to the test's stderr.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := host.Load(context.Background(), d, host.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := host.Lookup[*invariant.Service](h, invariant.ServiceKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, v := range inv.TakeViolations() {
			t.Errorf("%v", v)
		}
	})
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("host close: %v", err)
		}
	})
	return &harness{h: h, inv: inv}
}

func (hs *harness) owner(t testing.TB, id string) *host.Owner {
	t.Helper()
	o, err := hs.h.NewOwner(id, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (hs *harness) call(ctx context.Context, o *host.Owner, command string) host.Result {
	args, _ := json.Marshal(bashtool.Args{Command: command})
	return hs.h.Tools().Call(ctx, o, bashtool.ToolName, args)
}

// run calls and fails the test on an error result.
func (hs *harness) run(t testing.TB, o *host.Owner, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := hs.call(ctx, o, command)
	if res.IsError {
		t.Fatalf("%q: error result %q", command, res.Text)
	}
	return res.Text
}

// expect calls and compares the exact model-visible text.
func (hs *harness) expect(t testing.TB, o *host.Owner, command, want string) {
	t.Helper()
	if got := hs.run(t, o, command); got != want {
		t.Fatalf("%s:\n%s", clip(command, 80), diff(got, want))
	}
}

// diff describes how got differs from want, briefly even for long texts.
func diff(got, want string) string {
	if len(got) <= 300 && len(want) <= 300 {
		return fmt.Sprintf(" got %q\nwant %q", got, want)
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-60)
	return fmt.Sprintf("lengths got %d want %d; first difference at byte %d:\n got …%q…\nwant …%q…",
		len(got), len(want), i, clip(got[from:], 160), clip(want[from:], 160))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// awaitExit blocks until pid has exited, using a pidfd (readable once the
// process is gone) rather than polling.
func awaitExit(t testing.TB, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // already gone
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 30_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("process %d did not exit within 30s (%v)", pid, err)
		}
		return
	}
}

// fifo makes a named pipe; reading it blocks until a command writes it, which
// is how a test learns, without polling, that a command got that far.
func fifo(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// awaitFIFO blocks until something writes to the fifo (or fails the test).
func awaitFIFO(t testing.TB, path string) string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		data, _ := os.ReadFile(path)
		done <- strings.TrimSpace(string(data))
	}()
	select {
	case s := <-done:
		return s
	case <-time.After(30 * time.Second):
		t.Fatalf("nothing wrote %s within 30s", path)
		return ""
	}
}

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// mergeYAML returns the mapping base with the keys of over set over it, as
// one line of JSON (which is YAML).
func mergeYAML(t testing.TB, base, over string) string {
	t.Helper()
	var a, b map[string]any
	if err := yaml.Unmarshal([]byte(base), &a); err != nil {
		t.Fatalf("%s: %v", externalBackendConfig, err)
	}
	if err := yaml.Unmarshal([]byte(over), &b); err != nil {
		t.Fatal(err)
	}
	if a == nil {
		a = map[string]any{}
	}
	maps.Copy(a, b)
	out, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
