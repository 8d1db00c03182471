package terminalssh

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	_ "github.com/dshdev/dsh/plugins/terminal"
	bashtool "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

// TestBashToolThroughPlugin runs the bash tool on cmd/dsh-backend-ssh, out
// of process, as a deployment loads it: state persists across calls, exit
// codes come back, and a server that dies mid-command is a shell exit the
// tool reports and recovers from with a fresh shell.
func TestBashToolThroughPlugin(t *testing.T) {
	srv := newServer(t)
	h := loadSSHTool(t, srv, "{backendType: ssh}")
	ctx := context.Background()
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

// sshBackendBinary builds cmd/dsh-backend-ssh once per test binary, into
// builtBackendDir, which TestMain removes.
var sshBackendBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "dsh-backend-ssh-")
	if err != nil {
		return "", err
	}
	builtBackendDir = dir
	bin := filepath.Join(dir, "dsh-backend-ssh")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/dsh-backend-ssh")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build dsh-backend-ssh: %v\n%s", err, out)
	}
	return bin, nil
})

var builtBackendDir string

// loadSSHTool loads the bash tool on cmd/dsh-backend-ssh, out of process,
// as a deployment does, with the tool configured by toolConfig.
func loadSSHTool(t *testing.T, srv *testServer, toolConfig string) *host.Host {
	t.Helper()
	bin, err := sshBackendBinary()
	if err != nil {
		t.Fatal(err)
	}
	cfg := srv.config()
	cfg.IdleSilenceMs = 600000
	config, _ := json.Marshal(cfg)
	doc := "- id: terminal\n  name: terminal\n" +
		"- id: remote\n  name: " + bin + "\n  config: " + string(config) + "\n" +
		"- id: bash\n  name: tool-bash-persistent\n  config: " + toolConfig + "\n"
	path := filepath.Join(t.TempDir(), "deploy.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := host.ReadDeployment(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := host.DefaultRegistry()
	reg.RegisterExternal(terminal.LoadExternal)
	h, err := host.Load(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("host close: %v", err)
		}
	})
	return h
}

// TestTimeoutActionsOverSSH: a remote shell is kept through a timeout too.
// SSH reaches the foreground only through the terminal's characters (^C,
// ^Z), which is all interrupt and background need for a program that does
// not ignore them.
func TestTimeoutActionsOverSSH(t *testing.T) {
	srv := newServer(t)
	for _, tt := range []struct{ action, line string }{
		{"interrupt", "[The command was interrupted with SIGINT when it timed out."},
		{"background", "[The command was moved to the background as job %1 when it timed out"},
	} {
		t.Run(tt.action, func(t *testing.T) {
			h := loadSSHTool(t, srv, "{backendType: ssh, timeoutMs: 1500, timeoutAction: "+tt.action+"}")
			ctx := context.Background()
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
			got := call("echo started; sleep 100")
			if !strings.Contains(got, "\nstarted\n"+tt.line) {
				t.Fatalf("timeout result %q", got)
			}
			if got := call(`echo "$PWD $KEEP"`); got != "/tmp kept" {
				t.Fatalf("state after the timeout: %q", got)
			}
			if tt.action == "background" {
				if got := call("kill %1; wait %1; echo status=$?"); !strings.HasSuffix(got, "status=143") {
					t.Fatalf("stopping the job: %q", got)
				}
			}
		})
	}
}
