//go:build linux

package dshcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/dshdev/dsh/host"
	// The plugins that ship with dsh, as cmd/dsh links them.
	_ "github.com/dshdev/dsh/plugins/standard"
)

func TestMain(m *testing.M) {
	// Every dsh these tests run, in process or as a child, checks the
	// plugins' runtime invariants: a violation fails the call that saw it.
	os.Setenv(checkInvariantsEnv, "1")
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// deadline bounds every wait for an event; generous on purpose, it only
// decides how long a broken test takes to fail.
const deadline = 60 * time.Second

func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadline):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// fakeStarted receives the owner id of every fake bash call of "block" once
// it runs.
var fakeStarted = make(chan string, 16)

type fakeBashArgs struct {
	Command string `json:"command"`
}

func init() {
	// A stand-in "bash" tool for in-process tests of serve and repl, which
	// must not depend on a real shell. Registered from a test file: part of
	// the test binary only.
	host.Register(host.Plugin{
		Name:   "fakebash",
		Inject: []host.Key{host.ToolsKey},
		Apply: func(pctx *host.Context, _ any) (any, error) {
			tools, err := host.Service[*host.Tools](pctx, host.ToolsKey)
			if err != nil {
				return nil, err
			}
			tool, err := host.NewTool(replTool, "A fake bash for tests.", func(ctx context.Context, o *host.Owner, a fakeBashArgs) (string, error) {
				switch a.Command {
				case "block":
					fakeStarted <- o.ID()
					<-ctx.Done()
					return "", fmt.Errorf("interrupted: %w", context.Cause(ctx))
				case "fail":
					return "", fmt.Errorf("failed on purpose")
				case "whoami":
					return o.ID() + " " + o.Workdir(), nil
				case "nonl":
					return "no newline", nil
				case "silent":
					return "", nil
				case "owner-cleanup":
					// A cleanup that, like closing a real shell, needs time:
					// it fails when the close budget is already spent.
					_, err := o.Defer(func(ctx context.Context) error {
						if err := ctx.Err(); err != nil {
							return fmt.Errorf("owner cleanup started with no budget left: %w", err)
						}
						return nil
					})
					return "", err
				}
				return "ran: " + a.Command + "\n", nil
			})
			if err != nil {
				return nil, err
			}
			unregister, err := tools.Register(tool)
			if err != nil {
				return nil, err
			}
			pctx.Defer(func(context.Context) error { unregister(); return nil })
			return nil, nil
		},
	})
}

const fakeDeployment = "- id: bash\n  name: fakebash\n"

// syncBuffer is a bytes.Buffer safe to read while the command writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
	// grew is closed, and replaced, at every write.
	grew chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grew != nil {
		close(s.grew)
		s.grew = nil
	}
	return s.b.Write(p)
}

// waitFor returns the buffer once it contains substr, or fails the test
// at the deadline.
func (s *syncBuffer) waitFor(t testing.TB, substr string, deadline time.Duration) string {
	t.Helper()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		s.mu.Lock()
		text := s.b.String()
		if strings.Contains(text, substr) {
			s.mu.Unlock()
			return text
		}
		if s.grew == nil {
			s.grew = make(chan struct{})
		}
		grew := s.grew
		s.mu.Unlock()
		select {
		case <-grew:
		case <-timer.C:
			t.Fatalf("no %q within %v in:\n%s", substr, deadline, text)
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// inProcess is `dsh serve` run in-process, with pipes for stdin and stdout,
// and a client connected to it.
type inProcess struct {
	cs     *mcp.ClientSession
	exit   chan int
	stderr *syncBuffer
	// hangUp makes the client vanish, as when a client process dies: dsh
	// reads EOF, the client's reader fails (cs.Close would wait for the
	// client's calls first).
	hangUp func()
}

func startServe(t *testing.T, args ...string) *inProcess {
	t.Helper()
	sr, cw := io.Pipe()
	// A real pipe for stdout: dsh learns from it that a client has gone.
	cr, sw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cr.Close() })
	p := &inProcess{exit: make(chan int, 1), stderr: &syncBuffer{}}
	p.hangUp = func() {
		cw.Close()
		cr.Close()
	}
	go func() {
		p.exit <- run(append([]string{"serve"}, args...), sr, sw, p.stderr)
		sw.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(t.Context(), &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %q)", err, p.stderr.String())
	}
	p.cs = cs
	return p
}

func TestServeStdioInProcess(t *testing.T) {
	deploy := writeFile(t, fakeDeployment)
	dir := t.TempDir()
	p := startServe(t, "-d", deploy, "-w", dir)
	cs := p.cs
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "bash" || tools.Tools[0].Description != "A fake bash for tests." {
		t.Fatalf("tools: %+v", tools.Tools)
	}
	tests := []struct {
		command, want string
		isError       bool
	}{
		{"ls", "ran: ls\n", false},
		{"fail", "failed on purpose", true},
	}
	for _, tt := range tests {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": tt.command}})
		if err != nil {
			t.Fatal(err)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; text != tt.want || res.IsError != tt.isError {
			t.Errorf("%q: got %q (isError %v), want %q (isError %v)", tt.command, text, res.IsError, tt.want, tt.isError)
		}
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "whoami"}})
	if err != nil {
		t.Fatal(err)
	}
	if who := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(who, "mcp-") || !strings.HasSuffix(who, " "+dir) {
		t.Fatalf("whoami: %q, want an mcp- owner in %s", who, dir)
	}

	// The client closes stdin: serve exits 0, and said nothing on stderr.
	cs.Close()
	if code := recv(t, p.exit, "serve to exit"); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, p.stderr.String())
	}
	if s := p.stderr.String(); s != "" {
		t.Fatalf("stderr: %q", s)
	}
}

func TestServeStdioEOFMidCall(t *testing.T) {
	deploy := writeFile(t, fakeDeployment)
	p := startServe(t, "-d", deploy)
	errc := make(chan error, 1)
	go func() {
		_, err := p.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "block"}})
		errc <- err
	}()
	recv(t, fakeStarted, "the call to start")
	// A client that dies mid-call: its stdin ends and its end of stdout
	// closes. The session's calls are cancelled, and serve exits 0.
	p.hangUp()
	if code := recv(t, p.exit, "serve to exit"); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, p.stderr.String())
	}
	recv(t, errc, "the client's call to fail")
	p.cs.Close()
}

func TestServeLogsToStderr(t *testing.T) {
	deploy := writeFile(t, fakeDeployment)
	p := startServe(t, "-d", deploy, "--log-level", "debug")
	if _, err := p.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "ls"}}); err != nil {
		t.Fatal(err)
	}
	p.cs.Close()
	if code := recv(t, p.exit, "serve to exit"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// stdout carried the protocol (the client would have failed on
	// anything else); the logs are slog text on stderr.
	if s := p.stderr.String(); !strings.Contains(s, "level=DEBUG") || !strings.Contains(s, `msg="owner created"`) {
		t.Fatalf("stderr lacks debug logs: %q", s)
	}
}

// writeFileMode writes content to a fresh file with mode perm.
func writeFileMode(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServeUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "extra"},
		{"serve", "--workdir", "/does/not/exist"},
		{"serve", "--http", "no-port"},
		{"serve", "--idle-timeout", "5m"},
		{"serve", "--http", "127.0.0.1:0", "--idle-timeout", "-1s"},
		{"serve", "--http", "127.0.0.1:0", "--idle-timeout", "soon"},
		{"serve", "--http", "0.0.0.0:0", "--no-auth"},
		{"serve", "--http", ":0", "--no-auth"},
		{"serve", "--no-auth"},
		{"serve", "--http", "127.0.0.1:0", "--no-auth", "--token-file", "/etc/passwd"},
		{"serve", "--http", "127.0.0.1:0", "--token-file", "/does/not/exist"},
		{"serve", "--http", "127.0.0.1:0", "--token-file", writeFileMode(t, "short\n", 0o600)},
		{"serve", "--http", "127.0.0.1:0", "--token-file", writeFileMode(t, strings.Repeat("x", 40)+"\n", 0o644)},
		{"serve", "--http", "127.0.0.1:0", "--token-file", writeFileMode(t, strings.Repeat("x", 40)+"\n", 0o600)},
		{"serve", "--http", "127.0.0.1:0", "--max-sessions", "-1"},
		{"serve", "-d", "/does/not/exist.yaml"},
		{"repl", "extra"},
		{"repl", "--workdir", "/does/not/exist"},
		{"repl", "-d", writeFile(t, "- id: g\n  name: clitest\n")}, // no bash tool
	} {
		code, out, errOut := runCLI(t, args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "dsh: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}
