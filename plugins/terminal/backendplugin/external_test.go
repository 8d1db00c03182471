package backendplugin_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	bashtool "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

func init() { terminal.RegisterExternal() }

// deployment writes a deployment file next to a copy of the plugin script
// for mode, named "backend", and reads it.
func deployment(t *testing.T, mode, backendEntry string) *host.Deployment {
	t.Helper()
	dir := t.TempDir()
	script, err := os.ReadFile(pluginScript(t, mode))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "backend"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := `
- id: terminal
  name: terminal
` + backendEntry + `
- id: bash
  name: tool-bash-persistent
  config: {backendType: shell}
`
	path := filepath.Join(dir, "deploy.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := host.ReadDeployment(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDeploymentLoadsExecutable: an entry naming an executable, relative
// to the deployment file, becomes a backend of the type it declares, and
// the bash tool runs on it.
func TestDeploymentLoadsExecutable(t *testing.T) {
	d := deployment(t, "bash", `
- id: remote-shell
  name: ./backend
  config: {idleSilenceMs: 600000}
`)
	ctx := context.Background()
	h, err := host.Load(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Close(ctx); err != nil {
			t.Errorf("host close: %v", err)
		}
	}()
	o, err := h.NewOwner("agent", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ command, want string }{
		{"cd /tmp && export KEEP=kept", ""},
		{`echo "$PWD $KEEP"`, "/tmp kept"},
		{"exit 7", "[shell exited: code 7]"},
		{"echo again", "again"},
	} {
		args, _ := json.Marshal(bashtool.Args{Command: tt.command})
		res := h.Tools().Call(ctx, o, bashtool.ToolName, args)
		if !strings.Contains(res.Text, tt.want) {
			t.Errorf("bash %q = %q, want it to contain %q", tt.command, res.Text, tt.want)
		}
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestToolSurvivesPluginDeath: the plugin process dies in the middle of a
// command. The bash tool reports the shell exit and the reset, the host
// keeps running, and the next call gets a fresh shell from a fresh plugin.
func TestToolSurvivesPluginDeath(t *testing.T) {
	d := deployment(t, "bash", "- id: remote-shell\n  name: ./backend\n")
	ctx := context.Background()
	h, err := host.Load(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	o, err := h.NewOwner("agent", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(ctx)
	call := func(command string) string {
		args, _ := json.Marshal(bashtool.Args{Command: command})
		return h.Tools().Call(ctx, o, bashtool.ToolName, args).Text
	}
	// The shell's parent is the plugin process.
	plugin, err := strconv.Atoi(strings.TrimSpace(call("export KEEP=kept; echo $PPID")))
	if err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	result := make(chan string, 1)
	go func() { result <- call("echo > " + started + "; sleep 100") }()
	f, err := os.Open(started) // the command runs
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := syscall.Kill(plugin, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := <-result; !strings.Contains(got, "[shell exited") || !strings.Contains(got, "reset") {
		t.Errorf("the call when the plugin died: %q, want the shell exit and the reset", got)
	}
	if got := call(`echo "fresh $KEEP."`); !strings.HasPrefix(got, "fresh .") {
		t.Errorf("the next call: %q, want a fresh shell", got)
	}
}

// TestToolSurvivesStoppedPlugin: the plugin process stops answering
// (SIGSTOP) in the middle of a command. Within its health check's bounds
// the call reports the shell lost and why, another owner's shell in the
// same plugin is replaced on its next call with a notice saying so, and
// calls work again on a fresh plugin (issue 26, item 6).
func TestToolSurvivesStoppedPlugin(t *testing.T) {
	d := deployment(t, "bash", "- id: remote-shell\n  name: ./backend\n")
	ctx := context.Background()
	h, err := host.Load(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	a, err := h.NewOwner("a", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := h.NewOwner("b", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	call := func(o *host.Owner, command string) string {
		args, _ := json.Marshal(bashtool.Args{Command: command})
		return h.Tools().Call(ctx, o, bashtool.ToolName, args).Text
	}
	plugin, err := strconv.Atoi(strings.TrimSpace(call(a, "echo $PPID")))
	if err != nil {
		t.Fatal(err)
	}
	if got := call(b, "export KEEP=kept; echo b"); got != "b" {
		t.Fatalf("owner b: %q", got)
	}
	started := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	result := make(chan string, 1)
	go func() { result <- call(a, "echo > "+started+"; sleep 1000") }()
	f, err := os.Open(started) // the command runs
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := syscall.Kill(plugin, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(plugin, syscall.SIGCONT)
	const lost = "[shell lost: the backend plugin stopped answering and was killed]"
	select {
	case got := <-result:
		if !strings.Contains(got, lost) || !strings.Contains(got, "reset") {
			t.Errorf("the call when the plugin stopped: %q, want %q and the reset", got, lost)
		}
	case <-time.After(2 * (backendplugin.DefaultHealthInterval + backendplugin.DefaultHealthTimeout)):
		t.Fatal("the call in flight did not end after the plugin stopped answering")
	}
	if got, want := call(b, `echo "fresh $KEEP."`), "[The shell had exited before this command: "+lost+". The command ran in a new shell.]\nfresh ."; got != want {
		t.Errorf("owner b's next call: %q, want %q", got, want)
	}
	if got := call(a, "echo again"); got != "again" {
		t.Errorf("owner a's next call: %q", got)
	}
}

// TestDeploymentLoadErrors: a plugin that cannot start fails the load
// with an error naming the entry and the cause.
func TestDeploymentLoadErrors(t *testing.T) {
	tests := []struct {
		name, mode, entry string
		want              []string
	}{
		{"crash", "crash", "- id: remote\n  name: ./backend\n", []string{`entry "remote"`, "./backend", "out of luck"}},
		{"version", "future", "- id: remote\n  name: ./backend\n", []string{`entry "remote"`, versions(backendplugin.ProtocolVersion + 1)}},
		{"config", "bash", "- id: remote\n  name: ./backend\n  config: {colour: blue}\n", []string{`entry "remote"`, `unknown field "colour"`}},
		{"missing", "bash", "- id: remote\n  name: ./nowhere/backend\n", []string{`entry "remote"`, "no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := deployment(t, tt.mode, tt.entry)
			h, err := host.Load(context.Background(), d)
			if err == nil {
				h.Close(context.Background())
				t.Fatal("the deployment loaded")
			}
			var de *host.DeploymentError
			if !errors.As(err, &de) {
				t.Errorf("error %T is not a *host.DeploymentError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestDeploymentKeepingExecutableWithoutKeepers: a host that keeps shells
// loads an executable that cannot serve as a keeper as a plugin, as
// without keeping: its shells work, end with the host, and a warning says
// they are not kept.
func TestDeploymentKeepingExecutableWithoutKeepers(t *testing.T) {
	runtime := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	d := deployment(t, "bash", "- id: remote-shell\n  name: ./backend\n  config: {idleSilenceMs: 600000}\n")
	var log strings.Builder
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return log.Write(p)
	}), nil))
	ctx := context.Background()
	h, err := host.Load(ctx, d, host.WithLogger(logger), host.WithKeeping(host.Keeping{Scope: "session-old", Keep: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	o, err := h.NewOwner("agent", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(bashtool.Args{Command: "echo $$"})
	res := h.Tools().Call(ctx, o, bashtool.ToolName, args)
	shell, err := strconv.Atoi(strings.TrimSpace(res.Text))
	if err != nil {
		t.Fatalf("echo $$: %q", res.Text)
	}
	if err := h.Close(ctx); err != nil {
		t.Errorf("host close: %v", err)
	}
	pidGone(t, shell)
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(log.String(), "this backend executable cannot keep its shells: they end with dsh") {
		t.Errorf("no warning that the shells are not kept in the log:\n%s", log.String())
	}
	if files, _ := filepath.Glob(filepath.Join(runtime, "dsh", "keep-*", "*.json")); len(files) != 0 {
		t.Errorf("keeper address files %v", files)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
