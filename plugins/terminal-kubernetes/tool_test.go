package terminalkubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
	_ "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

// The bash tool, end to end, on cmd/dsh-backend-kubernetes out of process,
// as a deployment loads it: the model-visible contract holds in a pod.
type toolHarness struct {
	h     *host.Host
	owner *host.Owner
}

func newToolHarness(t *testing.T, c *kubetest.Cluster, ns, toolConfig string) *toolHarness {
	t.Helper()
	bin, err := pluginBinary()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(c, ns)
	cfg.BackendType = "shell"
	cfg.IdleSilenceMs = 3000
	config, _ := json.Marshal(cfg)
	doc := "- id: terminal\n  name: terminal\n" +
		"- id: pods\n  name: " + bin + "\n  config: " + string(config) + "\n" +
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
	o, err := h.NewOwner("agent", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &toolHarness{h: h, owner: o}
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

// State, exit codes, a program waiting for input (interrupted at once,
// through the helper's proof), exit and reset into a fresh pod.
func TestToolContract(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	th := newToolHarness(t, c, ns, "{timeoutMs: 60000}")
	cases := []struct{ command, want string }{
		{"cd /tmp && export KEPT=1 && greet() { echo hello $1; }; echo first > /workspace/note", ""},
		{"echo $PWD $KEPT; greet you", "/tmp 1\nhello you"},
		{"false", "[exit code: 1]"},
		{"echo out; echo err >&2; (exit 7)", "out\nerr\n[exit code: 7]"},
		{"cat", "[The command was waiting for interactive input, which this tool does not provide, so it was interrupted. Pass input non-interactively: arguments, a pipe, a here-document, or a --yes style flag.]"},
		{"echo still here $KEPT", "still here 1"},
		{"echo $HOSTNAME > /workspace/pod; exit 3", "[shell exited: code 3]\n" + resetNotice},
		{"pwd; echo ${KEPT:-gone}; cat note 2>/dev/null || echo new workspace", "/workspace\ngone\nnew workspace"},
		{"echo gone; kill -9 $$", "gone\n[shell killed by signal: SIGKILL]\n" + resetNotice},
		{"echo ${KEPT:-fresh}", "fresh"},
	}
	for _, tc := range cases {
		if got := th.call(t, tc.command); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.command, got, tc.want)
		}
	}
	if pods := c.Pods(t, ns, labelManagedBy+"="+managedByDSH); len(pods) != 1 {
		t.Errorf("%d pods, want the fresh one only", len(pods))
	}
}

// A timeout resets the shell: a fresh pod, the partial output kept.
func TestToolTimeoutResets(t *testing.T) {
	c := kubetest.Require(t)
	th := newToolHarness(t, c, c.Namespace(t), "{timeoutMs: 3000}")
	th.call(t, "export KEPT=1")
	got := th.call(t, "echo partial; sleep 100")
	want := "Your command timed out after 3 seconds or experienced an OOM error. Below is partial output:\npartial\n" + resetNotice
	if got != want {
		t.Errorf("timeout:\n got %q\nwant %q", got, want)
	}
	if got := th.call(t, "echo ${KEPT:-fresh}"); got != "fresh" {
		t.Errorf("after the reset: %q", got)
	}
}

// A long output is clipped, and its whole is saved in the pod, where the
// model's next command reads it: every byte of it (590 KB, more than the
// 192 KiB that an exec's stdin delivered before the fix).
func TestToolLongOutputIsSavedInThePod(t *testing.T) {
	c := kubetest.Require(t)
	th := newToolHarness(t, c, c.Namespace(t), "{maxOutputChars: 2000}")
	got := th.call(t, "seq 1 100000")
	last := got[strings.LastIndexByte(got, '\n')+1:]
	path, ok := strings.CutPrefix(last, "[full output: ")
	if !ok || !strings.HasPrefix(got, "1\n2\n") || !strings.Contains(got, "\n100000\n") {
		t.Fatalf("clipped output: %q … %q", got[:min(40, len(got))], last)
	}
	path = strings.TrimSuffix(path, "]")
	if _, err := os.Stat(path); err == nil {
		t.Errorf("the saved output's path %s is this machine's, not the pod's", path)
	}
	var full strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	sum := sha256.Sum256([]byte(full.String()))
	want := fmt.Sprintf("%d %s", full.Len(), hex.EncodeToString(sum[:]))
	if got := th.call(t, "echo $(wc -c < "+path+") $(sha256sum < "+path+" | cut -d' ' -f1)"); got != want {
		t.Errorf("the saved output in the pod: got %q, want %q", got, want)
	}
}
