package terminaldocker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal-docker/dockertest"
	_ "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

// The bash tool, end to end, on the docker backend in process: the
// model-visible contract holds in a container as on the local shell.
func init() {
	host.Register(host.Plugin{
		Name:    "terminal-docker",
		Summary: "the docker backend, in process, for these tests",
		Inject:  []host.Key{terminal.ServiceKey},
		Config:  func() any { return DefaultConfig() },
		Apply: host.Typed(func(pctx *host.Context, cfg *Config) (any, error) {
			b, err := New(context.Background(), cfg, nil)
			if err != nil {
				return nil, err
			}
			pctx.Defer(b.Close)
			return nil, terminal.AddBackend(pctx, b)
		}),
	})
}

type toolHarness struct {
	h     *host.Host
	owner *host.Owner
	ws    string
}

func newToolHarness(t *testing.T, toolConfig string) *toolHarness {
	t.Helper()
	daemon := dockertest.Daemon(t)
	yaml := fmt.Sprintf(`
- id: terminal
  name: terminal
- id: terminal-docker
  name: terminal-docker
  config: {backendType: shell, host: %q, image: %q}
- id: bash
  name: tool-bash-persistent
  config: %s
`, daemon, dockertest.Image, toolConfig)
	d, err := host.ParseDeployment("docker-test.yaml", []byte(yaml), nil)
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
	ws := t.TempDir()
	o, err := h.NewOwner("agent", ws)
	if err != nil {
		t.Fatal(err)
	}
	return &toolHarness{h: h, owner: o, ws: ws}
}

func (th *toolHarness) call(t *testing.T, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	args, _ := json.Marshal(map[string]string{"command": command})
	res := th.h.Tools().Call(ctx, th.owner, "bash", args)
	if res.IsError {
		t.Fatalf("%q: error result %q", command, res.Text)
	}
	return res.Text
}

const resetNotice = "The persistent bash shell was reset; the next bash call starts from the workspace with a fresh current directory and environment."

func TestToolContract(t *testing.T) {
	th := newToolHarness(t, "{timeoutMs: 4000}")
	cases := []struct{ command, want string }{
		{"cd /tmp && export KEPT=1 && greet() { echo hello $1; }", ""},
		{"echo $PWD $KEPT; greet you", "/tmp 1\nhello you"},
		{"false", "[exit code: 1]"},
		{"echo out; echo err >&2; (exit 7)", "out\nerr\n[exit code: 7]"},
		{"cat", "[The command was waiting for interactive input, which this tool does not provide, so it was interrupted. Pass input non-interactively: arguments, a pipe, a here-document, or a --yes style flag.]"},
		{"echo still here $KEPT", "still here 1"},
		{"printf 'a\\rb\\n'", "b"},
		{"exit 3", "[shell exited: code 3]\n" + resetNotice},
		{"pwd; echo ${KEPT:-gone}", "/workspace\ngone"},
	}
	for _, tc := range cases {
		if got := th.call(t, tc.command); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.command, got, tc.want)
		}
	}
}

func TestToolTimeoutResets(t *testing.T) {
	th := newToolHarness(t, "{timeoutMs: 1000}")
	th.call(t, "export KEPT=1")
	got := th.call(t, "echo partial; sleep 100")
	want := "Your command timed out after 1 seconds or experienced an OOM error. Below is partial output:\npartial\n" + resetNotice
	if got != want {
		t.Errorf("timeout:\n got %q\nwant %q", got, want)
	}
	if got := th.call(t, "echo ${KEPT:-fresh}"); got != "fresh" {
		t.Errorf("after the reset: %q", got)
	}
}

// A clipped result names a file the shell reads with the model's next
// command: in the container, written there through the backend, byte for
// byte.
func TestToolLongOutputIsSaved(t *testing.T) {
	th := newToolHarness(t, "{maxOutputChars: 2000}")
	got := th.call(t, "seq 1 100000")
	last := got[strings.LastIndexByte(got, '\n')+1:]
	path, ok := strings.CutPrefix(last, "[full output: ")
	if !ok || !strings.HasPrefix(got, "1\n2\n") || !strings.Contains(got, "\n100000\n") {
		t.Fatalf("clipped output: %q … %q", got[:min(40, len(got))], last)
	}
	path = strings.TrimSuffix(path, "]")
	if !strings.Contains(got, "the full output (100000 lines) is in "+path) {
		t.Fatalf("the clipping notice does not name %s", path)
	}
	if got := th.call(t, "sed -n 50000p "+path); got != "50000" {
		t.Fatalf("sed -n 50000p in the container: %q", got)
	}
	if got := th.call(t, "wc -l < "+path+"; tail -n 1 "+path+"; stat -c %a "+path); got != "100000\n100000\n600" {
		t.Errorf("the saved output in the container: %q, want all 100000 lines, private to its user", got)
	}
	// The workspace is the container's: files the model makes are the
	// owner's.
	th.call(t, "echo kept > made-in-container")
	if data, err := os.ReadFile(filepath.Join(th.ws, "made-in-container")); err != nil || string(data) != "kept\n" {
		t.Errorf("workspace file: %q, %v", data, err)
	}
}

// A clipped output whose shell the call resets (a timeout, here) cannot be
// left where the next shell reads it: that is another container. The
// result says so instead of naming a file no shell can read.
func TestToolClippedOutputOfAResetShell(t *testing.T) {
	th := newToolHarness(t, "{timeoutMs: 3000, maxOutputChars: 2000}")
	got := th.call(t, "seq 1 20000; sleep 100")
	if !strings.Contains(got, "omitted; the full output could not be saved: the shell is reset, and the files it could read go with it ...]") ||
		strings.Contains(got, "[full output:") || !strings.HasSuffix(got, resetNotice) {
		t.Fatalf("clipped output of a reset shell: %q", got[max(0, len(got)-600):])
	}
}
