package terminal_test

import (
	"context"
	"slices"
	"testing"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
)

// loadWithStubBackend loads the terminal plugin from the default registry,
// plus a plugin that registers b with the service (and unregisters it when
// it unloads), the way a backend plugin does. It returns the host and the
// service the backend plugin was given.
func loadWithStubBackend(t *testing.T, b *stubBackend) (*host.Host, *terminal.Service) {
	t.Helper()
	plugin, ok := host.DefaultRegistry().Lookup(terminal.PluginName)
	if !ok {
		t.Fatalf("plugin %q is not registered", terminal.PluginName)
	}
	// Its config has one setting, durable (on): a deployment may turn off
	// keeping shells past dsh.
	if !slices.Equal(plugin.Provides, []host.Key{"terminals"}) || plugin.Config == nil || !plugin.Config().(*terminal.Config).Durable || plugin.Summary == "" {
		t.Fatalf("plugin registration = %+v", plugin)
	}
	var svc *terminal.Service
	reg := host.NewRegistry()
	reg.Register(plugin)
	reg.Register(host.Plugin{
		Name:   "stub-backend",
		Inject: []host.Key{terminal.ServiceKey},
		Apply: func(pctx *host.Context, _ any) (any, error) {
			s, err := host.Service[*terminal.Service](pctx, terminal.ServiceKey)
			if err != nil {
				return nil, err
			}
			unregister, err := s.RegisterBackend(b)
			if err != nil {
				return nil, err
			}
			pctx.Defer(func(context.Context) error { unregister(); return nil })
			svc = s
			return nil, nil
		},
	})
	// The backend comes first in the document; injection orders the load.
	d, err := host.ParseDeployment("test.yaml", []byte("- name: stub-backend\n- name: terminal\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Load(t.Context(), d, host.WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h, svc
}

func TestPluginUnload(t *testing.T) {
	t.Run("host close disposes owners, then the service", func(t *testing.T) {
		b := &stubBackend{typ: "stub"}
		h, svc := loadWithStubBackend(t, b)
		owner := newOwner(t, h, "agent")
		mustSpawn(t, svc, owner, "stub", "")

		if err := h.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantReasons(t, b.session(0), "PTY owner disposed")
		_, err := svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "stub"})
		wantErr(t, err, terminal.ErrServiceClosing, "")
	})

	t.Run("unloading closes the sessions of owners that outlive it", func(t *testing.T) {
		b := &stubBackend{typ: "stub"}
		h, svc := loadWithStubBackend(t, b)
		// The owner comes from another host, so it stays live while this
		// host unloads its plugins.
		owner := newOwner(t, newHost(t), "agent")
		mustSpawn(t, svc, owner, "stub", "")

		if err := h.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantReasons(t, b.session(0), "PTY service disposed")
		if svc.HasActivity(owner) {
			t.Fatal("activity remains after unload")
		}
		// The service removed its cleanup from the owner.
		if err := owner.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantReasons(t, b.session(0), "PTY service disposed")
	})
}
