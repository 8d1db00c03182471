package terminalssh

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshdev/dsh/host"
	_ "github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	bashtool "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

// TestBashToolThroughPlugin runs the bash tool on cmd/dsh-backend-ssh, out
// of process, as a deployment loads it: state persists across calls, exit
// codes come back, and a server that dies mid-command is a shell exit the
// tool reports and recovers from with a fresh shell.
func TestBashToolThroughPlugin(t *testing.T) {
	srv := newServer(t)
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "dsh-backend-ssh"), "../../cmd/dsh-backend-ssh")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build dsh-backend-ssh: %v\n%s", err, out)
	}
	cfg := srv.config()
	cfg.IdleSilenceMs = 600000
	config, _ := json.Marshal(cfg)
	doc := "- id: terminal\n  name: terminal\n" +
		"- id: remote\n  name: ./dsh-backend-ssh\n  config: " + string(config) + "\n" +
		"- id: bash\n  name: tool-bash-persistent\n  config: {backendType: ssh}\n"
	path := filepath.Join(dir, "deploy.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := host.ReadDeployment(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := host.DefaultRegistry()
	reg.RegisterExternal(backendplugin.LoadExternal)
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
	defer o.Close(ctx)
	call := func(command string) string {
		args, _ := json.Marshal(bashtool.Args{Command: command})
		return h.Tools().Call(ctx, o, bashtool.ToolName, args).Text
	}
	call("cd /tmp && export KEEP=kept")
	if got := call(`echo "$PWD $KEEP"`); !strings.HasPrefix(got, "/tmp kept") {
		t.Errorf("state across calls: %q", got)
	}
	if got := call("(exit 3)"); !strings.Contains(got, "3") {
		t.Errorf("exit status: %q", got)
	}

	// The server dies while a command runs; the FIFO says it has started.
	fifo := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	result := make(chan string, 1)
	go func() { result <- call("echo > " + fifo + "; sleep 100") }()
	started, err := os.Open(fifo) // blocks until the remote shell opens it
	if err != nil {
		t.Fatal(err)
	}
	started.Close()
	srv.killServing()
	// Killing sshd's processes one by one, the test may leave one alive
	// long enough to report the shell's end (SIGPIPE, writing to a dead
	// peer): either way the shell is gone and the result says so.
	if got := <-result; !(strings.Contains(got, "[shell exited") || strings.Contains(got, "[shell killed by signal: ")) || !strings.Contains(got, "reset") {
		t.Errorf("killed mid-command: %q, want the shell exit and the reset", got)
	}
	if got := call(`echo "again $KEEP."`); !strings.HasPrefix(got, "again .") {
		t.Errorf("after the reset: %q, want a fresh shell", got)
	}
}
