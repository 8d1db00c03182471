//go:build linux

package terminalbash

import (
	"context"
	"fmt"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
)

// PluginName is the name deployments use for this plugin.
const PluginName = "terminal-bash"

func init() {
	host.Register(host.Plugin{
		Name:    PluginName,
		Summary: "PTY backend running an interactive bash per terminal session",
		Inject:  []host.Key{terminal.ServiceKey},
		Config:  func() any { return DefaultConfig() },
		Apply:   host.Typed(apply),
	})
}

// apply registers one Backend with the terminals service. On unload the
// backend is unregistered first, so no new session can start, and then
// every session it still owns is closed; if that fails, whatever is left
// is killed outright rather than left behind.
func apply(pctx *host.Context, cfg *Config) error {
	b, err := NewBackend(cfg, pctx.Logger())
	if err != nil {
		return err
	}
	// Deferred first, so it runs after AddBackend's unregistering.
	pctx.Defer(func(ctx context.Context) error {
		if err := b.Close(ctx); err != nil {
			b.KillAll()
			return err
		}
		return nil
	})
	if err := terminal.AddBackend(pctx, b); err != nil {
		return fmt.Errorf("terminal-bash: %w", err)
	}
	return nil
}
