package terminalssh

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

// shared is the OpenSSH server most tests connect to.
var shared *testServer

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "terminal-ssh-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared, err = startServer(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	shared.stop()
	os.RemoveAll(dir)
	if builtBackendDir != "" {
		os.RemoveAll(builtBackendDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left after the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const waitLong = terminaltest.WaitLong

// testConfig is the shared server's config with the silence bound out of
// reach, so only markers settle a send quickly.
func testConfig() *Config {
	cfg := shared.config()
	cfg.IdleSilenceMs = 600000
	cfg.TimeoutMs = 60000
	return cfg
}

func newBackend(t testing.TB, cfg *Config) *Backend {
	t.Helper()
	if cfg == nil {
		cfg = testConfig()
	}
	b, err := New(cfg)
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
func spawn(t testing.TB, b *Backend, cwd string) *inband.Session {
	t.Helper()
	spec := termapi.SpawnSpec{SessionID: "pty-test", OwnerID: "owner-test", Cwd: cwd}
	return terminaltest.Spawn(t, b, spec, waitLong).(*inband.Session)
}

// drain reads a send's output to io.EOF, then its result.
func drain(t testing.TB, ctx context.Context, send termapi.Send) (string, termapi.SendResult) {
	t.Helper()
	return terminaltest.Drain(t, ctx, send)
}

// run execs command, streaming, and returns its output (with the line
// still being written last) and how its send settled.
func run(t testing.TB, s *inband.Session, command string) (string, termapi.SendResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	return terminaltest.Exec(t, ctx, s, command)
}

// mustComplete runs command and checks that it completed with status code.
func mustComplete(t testing.TB, s *inband.Session, command string, code int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	return terminaltest.MustComplete(t, ctx, s, command, code)
}
