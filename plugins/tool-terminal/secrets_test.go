package terminaltool_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// protocols are the two ways a server asks the person: during the call
// (up to 2025-11-25), and with the call's result, the client calling again
// with the answer (2026-07-28, the go-sdk client's default).
var protocols = []struct{ name, version string }{
	{"during-the-call", "2025-11-25"},
	{"multi-round-trip", ""},
}

// person is an elicitation handler that answers every question the same
// way and remembers what it was asked.
type person struct {
	action, secret string
	mu             sync.Mutex
	asked          []string
}

func (p *person) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	p.mu.Lock()
	p.asked = append(p.asked, req.Params.Message)
	p.mu.Unlock()
	if p.action != "accept" {
		return &mcp.ElicitResult{Action: p.action}, nil
	}
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"secret": p.secret}}, nil
}

func (p *person) questions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

const secretCommand = "read -s -p 'Password: ' p; echo \"length ${#p}\""

// The secret used by these tests: long and unlike anything else printed.
const secret = "Zq7-hunter2-Wv9"

func TestSecretInBashCall(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			who := &person{action: "accept", secret: secret}
			r := newRig(t, rigOptions{elicit: who.handle, protocol: proto.version})
			out := r.ok("bash", map[string]any{"command": secretCommand})
			if !strings.Contains(out, "length 15") || !strings.Contains(out, `the user gave it`) {
				t.Fatalf("result:\n%s", out)
			}
			if q := who.questions(); len(q) != 1 || !strings.Contains(q[0], "Password:") {
				t.Fatalf("the person was asked %q, want once, with the prompt", q)
			}
			// The shell is the same, and its state kept.
			if out := r.ok("bash", map[string]any{"command": "echo \"still ${#p}\""}); out != "still 15" {
				t.Fatalf("next call: %q", out)
			}
			r.secretNowhere(secret)
		})
	}
}

func TestSecretInTerminal(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			who := &person{action: "accept", secret: secret}
			r := newRig(t, rigOptions{elicit: who.handle, protocol: proto.version})
			_, out := r.open(map[string]any{"command": secretCommand})
			if !strings.Contains(out, "length 15") || !strings.Contains(out, "the user gave it") || !exitedOK.MatchString(out) {
				t.Fatalf("terminal_open:\n%s", out)
			}
			if q := who.questions(); len(q) != 1 || !strings.Contains(q[0], "Password:") {
				t.Fatalf("the person was asked %q, want once, with the prompt", q)
			}
			r.secretNowhere(secret)
		})
	}
}

func TestSecretRefused(t *testing.T) {
	for _, action := range []string{"decline", "cancel"} {
		for _, proto := range protocols {
			t.Run(action+"/"+proto.name, func(t *testing.T) {
				who := &person{action: action}
				r := newRig(t, rigOptions{elicit: who.handle, protocol: proto.version})
				verb := map[string]string{"decline": "declined to give", "cancel": "dismissed the request for"}[action]
				out := r.ok("bash", map[string]any{"command": "x=kept; " + secretCommand})
				if !strings.Contains(out, "which the user "+verb) || !strings.Contains(out, "so it was interrupted") || strings.Contains(out, "length") {
					t.Fatalf("bash result:\n%s", out)
				}
				if out := r.ok("bash", map[string]any{"command": "echo $x"}); out != "kept" {
					t.Fatalf("the shell was not kept: %q", out)
				}
				_, out = r.open(map[string]any{"command": secretCommand})
				if !strings.Contains(out, "The user "+verb) || !strings.Contains(out, "interrupted (SIGINT)") || !strings.Contains(out, "[ended") {
					t.Fatalf("terminal_open:\n%s", out)
				}
			})
		}
	}
}

// A client that cannot be asked gets a result that says a secret was asked
// for and what the person can do, at once: never a hang.
func TestSecretWithoutElicitation(t *testing.T) {
	r := newRig(t, rigOptions{})
	out := r.ok("bash", map[string]any{"command": secretCommand})
	if !strings.Contains(out, `asked for a secret ("Password:")`) || !strings.Contains(out, "cannot ask the user") || !strings.Contains(out, "ssh agent") {
		t.Fatalf("bash result:\n%s", out)
	}
	id, out := r.open(map[string]any{"command": secretCommand})
	if !strings.Contains(out, `asks for a secret ("Password:")`) || !strings.HasSuffix(out, "[waiting for a secret]") {
		t.Fatalf("terminal_open:\n%s", out)
	}
	// The program goes on waiting: the model may close it.
	r.ok("terminal_close", map[string]any{"id": id})
}

// A plain read is no secret: the bash tool interrupts it as before, and
// nobody is asked.
func TestPlainReadIsNoSecret(t *testing.T) {
	who := &person{action: "accept", secret: secret}
	r := newRig(t, rigOptions{elicit: who.handle})
	out := r.ok("bash", map[string]any{"command": "read -p 'Name: ' n"})
	if !strings.Contains(out, "waiting for interactive input") {
		t.Fatalf("bash result:\n%s", out)
	}
	_, out = r.open(map[string]any{"command": "read -p 'Name: ' n; echo got $n"})
	if !strings.HasSuffix(out, "Name: \n[waiting for input]") {
		t.Fatalf("terminal_open:\n%s", out)
	}
	if q := who.questions(); len(q) != 0 {
		t.Fatalf("the person was asked %q for a plain read", q)
	}
}

// secretNowhere fails the test if s is in any result, log line, metric, or
// file dsh wrote (the bash tool's saved outputs, the workspace).
func (r *rig) secretNowhere(s string) {
	r.t.Helper()
	for _, res := range r.results {
		if strings.Contains(res, s) {
			r.t.Fatalf("the secret is in a result:\n%s", res)
		}
	}
	if strings.Contains(r.logs.String(), s) {
		r.t.Fatal("the secret is in dsh's log")
	}
	reg := prometheus.NewPedanticRegistry()
	for _, in := range r.h.Instances() {
		if c, ok := in.Value.(prometheus.Collector); ok {
			reg.MustRegister(c)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	var metrics strings.Builder
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&metrics, f); err != nil {
			r.t.Fatal(err)
		}
	}
	if metrics.Len() == 0 {
		r.t.Fatal("no metrics gathered: the check would prove nothing")
	}
	if strings.Contains(metrics.String(), s) {
		r.t.Fatal("the secret is in a metric")
	}
	for _, dir := range []string{r.outputDir, r.workdir} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			if err == nil && strings.Contains(string(data), s) {
				r.t.Fatalf("the secret is in %s", path)
			}
			return err
		})
		if err != nil {
			r.t.Fatal(err)
		}
	}
}
