package backendplugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	terminalbash "github.com/dshdev/dsh/plugins/terminal-bash"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// pluginMode makes this test binary a plugin executable instead of running
// tests: the scripts pluginScript writes set it.
const pluginMode = "DSH_TEST_PLUGIN_MODE"

func TestMain(m *testing.M) {
	backendplugin.RegisterBuiltin(keeperBuiltin, newBashBackend)
	backendplugin.KeeperMain()
	switch os.Getenv(pluginMode) {
	case "":
		goleak.VerifyTestMain(m)
	case "bash":
		backendplugin.Serve(newBashBackend)
	case "slow-result":
		backendplugin.Serve(newSlowResultBackend)
	case "future":
		backendplugin.ServeVersion(backendplugin.ProtocolVersion+1, newBashBackend)
	case "past":
		backendplugin.ServeVersion(backendplugin.ProtocolVersion-1, newBashBackend)
	case "crash":
		fmt.Fprintln(os.Stderr, "plugin: cannot start: out of luck")
		os.Exit(3)
	case "silent":
		// Exits at once without a word, as a program that is no plugin.
	case "host":
		os.Exit(runHost())
	case "keeperhost":
		os.Exit(runKeeperHost())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s %q\n", pluginMode, os.Getenv(pluginMode))
		os.Exit(2)
	}
}

// pluginPath is the plugin the "host" mode starts.
const pluginPath = "DSH_TEST_PLUGIN_PATH"

// runHost is a host that starts a plugin and one session, prints the pids
// of the plugin and the session's shell, and waits to be killed.
func runHost() int {
	ctx := context.Background()
	c, err := backendplugin.Open(ctx, os.Getenv(pluginPath), nil, backendplugin.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "o"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(backendplugin.ProcessID(c), s.PID())
	select {}
}

// newBashBackend is what cmd/dsh-backend-bash serves.
func newBashBackend(_ context.Context, raw json.RawMessage) (termapi.Backend, error) {
	cfg, err := terminalbash.ConfigFromJSON(raw)
	if err != nil {
		return nil, err
	}
	return terminalbash.NewBackend(cfg, backendplugin.Logger(0))
}

// pluginScript writes an executable that runs this test binary as a plugin
// in the given mode, and returns its path.
func pluginScript(t testing.TB, mode string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "backend-"+mode)
	// A race-enabled binary waits a second at exit for late reports; the
	// plugin's exit is what the host waits for on every close.
	script := fmt.Sprintf("#!/bin/sh\nexport GORACE=\"${GORACE:+$GORACE }atexit_sleep_ms=0\"\n%s=%s exec %q\n", pluginMode, mode, self)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// open starts the bash plugin with config and closes it when t ends.
func open(t testing.TB, config string) *backendplugin.Client {
	t.Helper()
	return openMode(t, "bash", config)
}

// openMode starts this test binary as a plugin in mode, with config, and
// closes it when t ends.
func openMode(t testing.TB, mode, config string) *backendplugin.Client {
	t.Helper()
	c, err := backendplugin.Open(context.Background(), pluginScript(t, mode), json.RawMessage(config), backendplugin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close the plugin: %v", err)
		}
	})
	return c
}
