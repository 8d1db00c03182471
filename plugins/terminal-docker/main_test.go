package terminaldocker

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/plugins/terminal-docker/dockertest"
	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
	"github.com/moby/moby/client"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The client's idle connections to the daemon wind down on
		// their own, after the test that used them.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"))
}

// waitLong bounds every wait in these tests. It only turns a hang into a
// clear failure and never decides a result.
const waitLong = 60 * time.Second

func testConfig(host string) *Config {
	cfg := DefaultConfig()
	cfg.Host = host
	cfg.Image = dockertest.Image
	cfg.IdleSilenceMs = 600000
	cfg.TimeoutMs = 60000
	return cfg
}

func newBackend(t *testing.T, cfg *Config) *Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	b, err := New(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("backend close: %v", err)
		}
	})
	return b
}

// spawn starts a session that the test closes at its end.
func spawn(t *testing.T, b *Backend, cwd string) *inband.Session {
	t.Helper()
	spec := termapi.SpawnSpec{SessionID: "pty-test", OwnerID: "owner-test", Cwd: cwd}
	return terminaltest.Spawn(t, b, spec, waitLong).(*inband.Session)
}

// mustComplete runs command and checks that it completed with status code.
func mustComplete(t *testing.T, s *inband.Session, command string, code int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	return terminaltest.MustComplete(t, ctx, s, command, code)
}

func containerCount(t *testing.T, host string) int {
	t.Helper()
	out, err := exec.Command("docker", "-H", host, "ps", "-aq", "--filter", "label=dsh.session").Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return len(strings.Fields(string(out)))
}

// containerListOptions selects the containers of one session id.
func containerListOptions(session string) client.ContainerListOptions {
	return client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "dsh.session="+session)}
}
