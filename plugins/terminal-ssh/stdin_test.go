package terminalssh

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	bashtool "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

// waitingCommands wait for input at the terminal: the shell's own read
// builtin, a program, a script's [y/N] prompt, a REPL's.
var waitingCommands = []string{
	`read x`,
	`cat`,
	`bash -c 'read -p "Proceed? [y/N] " a'`,
	`python3 -c 'input("name: ")'`,
}

// TestStdinWaitProven: over SSH, a program blocked reading the terminal is
// proven so by the probe beside the shell, which reads the remote /proc:
// the send settles stdin_read with the command running, although the
// silence bound is out of reach. After SIGINT the shell is back, its state
// kept. Quiet programs are never taken for waiting ones.
func TestStdinWaitProven(t *testing.T) {
	cfg := testConfig()
	cfg.TimeoutMs = 20000
	s := spawn(t, newBackend(t, cfg), "")
	if !s.Capabilities().InputProof {
		t.Fatal("an SSH session to a Linux host does not report InputProof")
	}
	mustComplete(t, s, "export KEEP=kept", 0)
	// A REPL waits in select, not read.
	for _, command := range append(waitingCommands, "python3 -i") {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		start := time.Now()
		send, err := s.Exec(ctx, termapi.ExecRequest{Command: command, Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		_, res := drain(t, ctx, send)
		if res.Reason != termapi.WaitStdinRead || res.Prompt || res.Exec.State != termapi.ExecRunning {
			t.Fatalf("%s: settled %s (prompt %v) with %+v after %v, want stdin_read with the command running", command, res.Reason, res.Prompt, *res.Exec, time.Since(start))
		}
		t.Logf("%s: proven waiting after %v", command, time.Since(start))
		// SIGINT ends it; a REPL that catches it ends at EOF (^D).
		if _, err := s.Signal(ctx, termapi.SIGINT); err != nil {
			t.Fatal(err)
		}
		req := termapi.SendRequest{Stream: true}
		for range 2 {
			send, err = s.StartSend(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if _, res = drain(t, ctx, send); res.Prompt {
				break
			}
			req.Text = "\x04"
		}
		if !res.Prompt {
			t.Fatalf("%s: after SIGINT and EOF the send settled %s, want the prompt", command, res.Reason)
		}
		cancel()
		if got := mustComplete(t, s, `echo "$KEEP"`, 0); got != "kept\n" {
			t.Fatalf("after %s: %q, want the shell's state", command, got)
		}
	}
	for _, command := range []string{
		`sleep 1`,
		`sleep 1 | cat`,
		`python3 -c 'import select, socket, sys; a, b = socket.socketpair(); select.select([sys.stdin, a], [], [], 1)'`,
	} {
		mustComplete(t, s, command, 0)
	}
}

// TestNoProofReported: a session without the probe (as on a host without
// /proc) says so in its capabilities, and a program waiting for input
// settles by silence.
func TestNoProofReported(t *testing.T) {
	cfg := testConfig()
	cfg.IdleSilenceMs = 500
	b := newBackend(t, cfg)
	b.noProof = true
	s := spawn(t, b, "")
	if s.Capabilities().InputProof {
		t.Fatal("a session without a probe reports InputProof")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: "cat", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, res := drain(t, ctx, send); res.Reason != termapi.WaitInferredIdle {
		t.Fatalf("cat without a proof settled %s, want %s", res.Reason, termapi.WaitInferredIdle)
	}
	if _, err := s.Signal(ctx, termapi.SIGINT); err != nil {
		t.Fatal(err)
	}
}

// interactiveNotice is the bash tool's line for a command it interrupted
// because it waited for input.
const interactiveNotice = "[The command was waiting for interactive input, which this tool does not provide, so it was interrupted."

// TestBashToolStdinWaitOverSSH: through the bash tool on the SSH backend
// out of process, a command that waits for input is interrupted with the
// tool's notice, long before timeoutMs and with the silence bound out of
// reach, and the shell and its state are kept.
func TestBashToolStdinWaitOverSSH(t *testing.T) {
	srv := newServer(t)
	h := loadSSHTool(t, srv, "{backendType: ssh, timeoutMs: 30000}")
	call := toolCaller(t, h)
	call("cd /tmp && export KEEP=kept")
	for _, command := range waitingCommands {
		start := time.Now()
		got := call("echo before; " + command)
		took := time.Since(start)
		if !strings.HasPrefix(got, "before") || !strings.Contains(got, interactiveNotice) || strings.Contains(got, "reset") {
			t.Fatalf("%s: %q after %v, want the output, the tool's notice and the shell kept", command, got, took)
		}
		t.Logf("%s: answered in %v", command, took)
		if got := call(`echo "$PWD $KEEP"`); got != "/tmp kept" {
			t.Fatalf("after %s: %q, want the shell's state", command, got)
		}
	}
}

// TestBashToolSilenceWithoutProof: where no proof exists, a command silent
// for idleSilenceMs is taken as waiting for input and interrupted, with a
// notice that says it was inferred; the shell is kept.
func TestBashToolSilenceWithoutProof(t *testing.T) {
	cfg := shared.config()
	cfg.IdleSilenceMs = 1000
	h := loadTool(t, noProofPlugin, cfg, "{backendType: ssh, timeoutMs: 30000}")
	call := toolCaller(t, h)
	call("export KEEP=kept")
	start := time.Now()
	got := call("echo before; read x")
	if !strings.HasPrefix(got, "before") || !strings.Contains(got, silenceNoticeStart) || strings.Contains(got, "reset") {
		t.Fatalf("read x without a proof: %q after %v, want the output, the silence notice and the shell kept", got, time.Since(start))
	}
	if got := call(`echo "$KEEP"`); got != "kept" {
		t.Fatalf("after the interrupt: %q, want the shell's state", got)
	}
}

// silenceNoticeStart starts the tool's line for a command interrupted after
// silence, where the backend cannot prove a wait.
const silenceNoticeStart = "[Nothing was printed for "

// noProofPlugin is the SSH backend in process, without the stdin proof, as
// on a host the probe cannot serve.
const noProofPlugin = "terminal-ssh-test-noproof"

func init() {
	host.Register(host.Plugin{
		Name:    noProofPlugin,
		Summary: "test: the ssh backend in process, without the stdin proof",
		Inject:  []host.Key{terminal.ServiceKey},
		Config:  func() any { return DefaultConfig() },
		Apply: host.Typed(func(pctx *host.Context, cfg *Config) (any, error) {
			b, err := New(cfg)
			if err != nil {
				return nil, err
			}
			b.noProof = true
			pctx.Defer(b.Close)
			return b, terminal.AddBackend(pctx, b)
		}),
	})
}

// loadTool loads the bash tool on plugin (registered in process), with the
// backend configured by cfg and the tool by toolConfig.
func loadTool(t *testing.T, plugin string, cfg *Config, toolConfig string) *host.Host {
	t.Helper()
	config, _ := json.Marshal(cfg)
	doc := "- id: terminal\n  name: terminal\n" +
		"- id: remote\n  name: " + plugin + "\n  config: " + string(config) + "\n" +
		"- id: bash\n  name: tool-bash-persistent\n  config: " + toolConfig + "\n"
	path := filepath.Join(t.TempDir(), "deploy.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := host.ReadDeployment(path, nil)
	if err != nil {
		t.Fatal(err)
	}
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

// toolCaller returns a function that calls the bash tool as one owner,
// closed when the test ends.
func toolCaller(t *testing.T, h *host.Host) func(command string) string {
	t.Helper()
	o, err := h.NewOwner("agent", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close(context.Background()) })
	return func(command string) string {
		args, _ := json.Marshal(bashtool.Args{Command: command})
		return h.Tools().Call(context.Background(), o, bashtool.ToolName, args).Text
	}
}
