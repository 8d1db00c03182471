package terminalbash

import (
	"context"
	"fmt"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
)

// PluginName is the name deployments use for this plugin.
const PluginName = "terminal-bash"

// backendRegistry is the part of the terminals service this plugin uses.
type backendRegistry interface {
	RegisterBackend(terminal.Backend) (unregister func(), err error)
}

func init() {
	host.Register(host.Plugin{
		Name:    PluginName,
		Summary: "PTY backend running an interactive bash per terminal session",
		Inject:  []string{terminal.ServiceKey},
		Config:  func() any { return DefaultConfig() },
		Apply:   host.Typed(apply),
	})
}

// apply registers one Backend with the terminals service. On unload the
// backend is unregistered first, so no new session can start, and then
// every session it still owns is closed; if that fails, whatever is left
// is killed outright rather than left behind.
func apply(pctx *host.Context, cfg *Config) error {
	registry, err := host.Service[backendRegistry](pctx, terminal.ServiceKey)
	if err != nil {
		return fmt.Errorf("terminal-bash: %w", err)
	}
	b, err := NewBackend(cfg, pctx.Logger())
	if err != nil {
		return err
	}
	unregister, err := registry.RegisterBackend(b)
	if err != nil {
		return fmt.Errorf("terminal-bash: register backend %q: %w", b.Type(), err)
	}
	pctx.Defer(func(ctx context.Context) error {
		if err := b.Close(ctx); err != nil {
			b.KillAll()
			return err
		}
		return nil
	})
	pctx.Defer(func(context.Context) error {
		unregister()
		return nil
	})
	return nil
}
