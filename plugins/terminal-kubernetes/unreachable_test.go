package terminalkubernetes

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// cutter is a TCP relay to the API server whose connections the test can
// cut at once, as a network that fails would, while it goes on accepting
// new ones.
type cutter struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

func newCutter(t *testing.T, upstream string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, upstream: upstream}
	c.wg.Go(c.serve)
	t.Cleanup(func() {
		ln.Close()
		c.cut()
		c.wg.Wait()
	})
	return c
}

func (c *cutter) serve() {
	for {
		down, err := c.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", c.upstream)
		if err != nil {
			down.Close()
			continue
		}
		c.mu.Lock()
		c.conns = append(c.conns, down, up)
		c.mu.Unlock()
		c.wg.Go(func() { io.Copy(up, down); up.Close() })
		c.wg.Go(func() { io.Copy(down, up); down.Close() })
	}
}

// cut closes every connection made so far.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

var serverLine = regexp.MustCompile(`server: https://(127\.0\.0\.1:\d+)`)

// The connection to the API server lost mid-command is a shell exit that
// says so; the backend goes on once the server answers again.
func TestAPIServerLostMidCommand(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	data, err := os.ReadFile(c.BackendKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	m := serverLine.FindSubmatch(data)
	if m == nil {
		t.Fatalf("no server line in %s", c.BackendKubeconfig)
	}
	relay := newCutter(t, string(m[1]))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, serverLine.ReplaceAll(data, []byte("server: https://"+relay.ln.Addr().String())), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(c, ns)
	cfg.Kubeconfig = kubeconfig
	b := newBackend(t, cfg)
	s := spawn(t, b, "owner-u")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: "echo started; sleep 1000", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if line, err := send.Output(ctx); err != nil || line != "started\n" {
		t.Fatalf("output %q, %v", line, err)
	}
	relay.cut()
	res, err := send.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != termapi.WaitSessionExit || !res.Status.Exited {
		t.Fatalf("settled %s with %v, want session_exit", res.Reason, res.Status)
	}
	if !strings.Contains(res.Status.Lost, "connection to the Kubernetes API server was lost") {
		t.Errorf("the exit says %q, want it to say the connection was lost", res.Status.Lost)
	}
	again := spawn(t, b, "owner-u2")
	if out := mustComplete(t, again, "echo back", 0); out != "back\n" {
		t.Errorf("new session: %q", out)
	}
}
