//go:build linux

package plugin_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal-bash/plugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

// loadHost loads terminal, terminal-bash (with the given config lines) and
// a probe plugin that hands the test the terminals service.
func loadHost(t *testing.T, config string) (*host.Host, *terminal.Service, error) {
	t.Helper()
	reg := host.NewRegistry()
	for _, name := range []string{terminal.PluginName, plugin.Name} {
		p, ok := host.DefaultRegistry().Lookup(name)
		if !ok {
			t.Fatalf("plugin %q is not registered", name)
		}
		reg.Register(p)
	}
	var svc *terminal.Service
	reg.Register(host.Plugin{
		Name:   "probe",
		Inject: []host.Key{terminal.ServiceKey},
		Apply: func(pctx *host.Context, _ any) (_ any, err error) {
			svc, err = host.Service[*terminal.Service](pctx, terminal.ServiceKey)
			return nil, err
		},
	})
	yaml := "- name: terminal\n- name: terminal-bash\n" + config + "- name: probe\n"
	d, err := host.ParseDeployment("test.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Load(context.Background(), d, host.WithRegistry(reg))
	return h, svc, err
}

func TestPluginLifecycle(t *testing.T) {
	h, svc, err := loadHost(t, "  config:\n    backendType: bash\n    disposeGraceMs: 500\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := svc.Backends(); !slices.Equal(got, []string{"bash"}) {
		t.Errorf("backends %q, want [bash]", got)
	}
	owner, err := h.NewOwner("agent", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	info, err := svc.Spawn(ctx, owner, terminal.SpawnRequest{Type: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	shell, err := proc.IdentityOf(info.PID)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := svc.StartSend(ctx, owner, info.ID, termapi.SendRequest{Text: `(trap "" TERM HUP; sleep 1000) & echo $!`, Submit: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job := reportedPID(t, res.Viewport)

	// The owner stays open: unloading the plugins must still end it all.
	if err := h.Close(ctx); err != nil {
		t.Fatalf("host close: %v", err)
	}
	if shell.Alive() || job.Alive() {
		t.Errorf("after host close: shell alive %v, job alive %v", shell.Alive(), job.Alive())
	}
}

func TestPluginConfigErrors(t *testing.T) {
	tests := []struct{ config, want string }{
		// Each context enters the message once: the file and line, the
		// entry (whose id is the plugin's name here), the field's problem.
		{"  config:\n    maxReadBytes: 0\n", `test.yaml:4: entry "terminal-bash": maxReadBytes must be a positive integer`},
		{"  config:\n    pollIntervalMs: 50\n", `test.yaml:4: entry "terminal-bash": unknown config key "pollIntervalMs"`},
		{"  config:\n    backendType: \"\"\n", `test.yaml:4: entry "terminal-bash": backendType must be non-empty`},
	}
	for _, tt := range tests {
		h, _, err := loadHost(t, tt.config)
		if err == nil {
			h.Close(context.Background())
			t.Errorf("%q loaded", tt.config)
			continue
		}
		if !errors.Is(err, host.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an invalid-config error about %s", tt.config, err, tt.want)
		}
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitLong = terminaltest.WaitLong

// reportedPID is the process whose pid is the last number on a line of
// viewport.
func reportedPID(t testing.TB, viewport string) proc.Identity {
	t.Helper()
	lines := strings.Split(viewport, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		pid, err := strconv.Atoi(strings.TrimSpace(lines[i]))
		if err != nil || pid <= 0 {
			continue
		}
		id, err := proc.IdentityOf(pid)
		if err != nil {
			t.Fatalf("identify %d: %v", pid, err)
		}
		return id
	}
	t.Fatalf("no pid in %q", viewport)
	return proc.Identity{}
}
