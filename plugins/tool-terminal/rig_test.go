package terminaltool_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/mcpfront"
	"github.com/dshdev/dsh/plugins/invariant"
	"github.com/dshdev/dsh/plugins/terminal"
	_ "github.com/dshdev/dsh/plugins/terminal-bash/plugin"
	_ "github.com/dshdev/dsh/plugins/tool-bash-persistent"
	_ "github.com/dshdev/dsh/plugins/tool-terminal"
)

func TestMain(m *testing.M) {
	terminal.RegisterExternal()
	goleak.VerifyTestMain(m)
}

// deadline bounds every wait in these tests; generous on purpose: it only
// decides how long a broken test takes to fail.
const deadline = 60 * time.Second

// rig is a real dsh: the terminals service, the shell backend, the bash
// tool and the terminal tools, behind the MCP front, and a go-sdk client
// talking to it over the stdio transport, as an agent's client does.
type rig struct {
	t       testing.TB
	workdir string
	cs      *mcp.ClientSession
	logs    *syncBuffer // every log line of dsh, at debug level
	// outputDir is where the bash tool saves full outputs (unless the test
	// configured it otherwise).
	outputDir string
	h         *host.Host
	results   []string // every result text, for the tests that look for a secret
	front     *mcpfront.Front
}

// connect connects another client: another agent, with an owner of its
// own.
func (r *rig) connect(t testing.TB) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- r.front.Serve(context.Background(), st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "other", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		<-done
	})
	return cs
}

type rigOptions struct {
	// bashConfig and terminalConfig are YAML mappings for the two tools.
	bashConfig, terminalConfig string
	// elicit, when set, is the client's elicitation handler: the client
	// declares the capability.
	elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	// env is set in dsh's environment (the shells inherit it).
	env map[string]string
	// noTerminalTools leaves the terminal tools out of the deployment.
	noTerminalTools bool
	// protocol is the protocol version the client asks for; empty: the
	// SDK's latest.
	protocol string
}

// syncBuffer is a bytes.Buffer for a logger on many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	for k, v := range o.env {
		t.Setenv(k, v)
	}
	if o.bashConfig == "" {
		o.bashConfig = "{}"
	}
	if o.terminalConfig == "" {
		o.terminalConfig = "{}"
	}
	r := &rig{t: t, workdir: t.TempDir(), logs: &syncBuffer{}, outputDir: t.TempDir()}
	if o.bashConfig == "{}" {
		o.bashConfig = "{outputDir: " + r.outputDir + "}"
	}
	d, err := host.ParseDeployment("test.yaml", fmt.Appendf(nil, `
- id: terminal
  name: terminal
- id: terminal-bash
  name: %s
- id: bash
  name: tool-bash-persistent
  config: %s
- id: terminals
  name: tool-terminal
  disabled: %v
  config: %s
`, backend(), o.bashConfig, o.noTerminalTools, o.terminalConfig), nil)
	if err != nil {
		t.Fatal(err)
	}
	invariant.Augment(d)
	logger := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := host.Load(context.Background(), d, host.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	// DSH_MCP_FAST_PATH=false has the SDK answer every call, as dsh serve
	// --mcp-fast-path=false does; CI runs these tests both ways.
	f := mcpfront.New(h, mcpfront.Options{Workdir: r.workdir, Logger: logger, Version: "test", NoFastPath: os.Getenv("DSH_MCP_FAST_PATH") == "false"})
	r.front = f
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	done := make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	go func() { done <- f.Serve(ctx, &mcpfront.StdioTransport{Reader: sr, Writer: sw, Logger: logger}) }()
	opts := &mcp.ClientOptions{}
	if o.elicit != nil {
		opts.ElicitationHandler = o.elicit
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "terminal-test", Version: "1"}, opts)
	cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: cr, Writer: cw}, &mcp.ClientSessionOptions{ProtocolVersion: o.protocol})
	if err != nil {
		t.Fatal(err)
	}
	r.cs = cs
	t.Cleanup(func() {
		cs.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(deadline):
			t.Error("Serve did not return")
		}
		stop()
		cctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		if err := f.Close(cctx); err != nil {
			t.Errorf("front close: %v", err)
		}
		if err := h.Close(cctx); err != nil {
			t.Errorf("host close: %v", err)
		}
	})
	return r
}

// backend is the shell backend's entry name: the in-process plugin, or the
// executable DSH_TEST_BACKEND names (cmd/dsh-backend-bash), for the tools
// to pass with their backend out of process too.
func backend() string {
	if path := os.Getenv("DSH_TEST_BACKEND"); path != "" {
		return path
	}
	return "terminal-bash"
}

// call calls a tool and returns its text; a protocol error fails the test.
func (r *rig) call(name string, args map[string]any) (string, bool) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	res, err := r.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		r.t.Fatalf("call %s %v: %v", name, args, err)
	}
	if len(res.Content) != 1 {
		r.t.Fatalf("call %s: %d content blocks, want 1", name, len(res.Content))
	}
	text := res.Content[0].(*mcp.TextContent).Text
	r.results = append(r.results, text)
	return text, res.IsError
}

// ok calls a tool that must succeed.
func (r *rig) ok(name string, args map[string]any) string {
	r.t.Helper()
	text, isErr := r.call(name, args)
	if isErr {
		r.t.Fatalf("call %s %v failed: %s", name, args, text)
	}
	return text
}

var idLine = regexp.MustCompile(`(?m)^id: (\S+)$`)

// open opens a terminal and returns its id and first read.
func (r *rig) open(args map[string]any) (string, string) {
	r.t.Helper()
	out := r.ok("terminal_open", args)
	m := idLine.FindStringSubmatch(out)
	if m == nil {
		r.t.Fatalf("terminal_open gave no id: %q", out)
	}
	return m[1], out
}

// send types text then keys.
func (r *rig) send(id, text string, keys ...string) {
	r.t.Helper()
	args := map[string]any{"id": id}
	if text != "" {
		args["text"] = text
	}
	if len(keys) > 0 {
		args["keys"] = keys
	}
	r.ok("terminal_send", args)
}

// read reads the terminal.
func (r *rig) read(id string, extra ...any) string {
	r.t.Helper()
	args := map[string]any{"id": id}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	return r.ok("terminal_read", args)
}

// readUntil reads, waiting for waitFor, until the text read matches re (a
// program draws a screen over several writes), and returns the last read.
func (r *rig) readUntil(id, waitFor string, re *regexp.Regexp) string {
	r.t.Helper()
	end := time.Now().Add(deadline)
	var all []string
	for time.Now().Before(end) {
		out := r.read(id, "waitFor", waitFor, "timeoutMs", 10000)
		all = append(all, out)
		if re.MatchString(out) {
			return out
		}
	}
	r.t.Fatalf("terminal %s never showed %v; reads:\n%s", id, re, strings.Join(all, "\n---\n"))
	return ""
}

// need skips a test whose program is not installed, unless CI requires it.
func need(t testing.TB, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("DSH_REQUIRE_PROGRAMS") != "" {
				t.Fatalf("%s is not installed (DSH_REQUIRE_PROGRAMS is set)", p)
			}
			t.Skipf("%s is not installed", p)
		}
	}
}
