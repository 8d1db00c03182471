// Package plugin registers the shell backend (package terminalbash) as
// the plugin "terminal-bash": import it for its side effect. The backend
// itself links no host, so that cmd/dsh-backend-bash can serve it as an
// executable of its own.
package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	terminalbash "github.com/dshdev/dsh/plugins/terminal-bash"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Name is the name deployments use for this plugin.
const Name = "terminal-bash"

func init() {
	// The same backend, served by dsh's own binary as a keeper: durable
	// shells live there (see apply).
	backendplugin.RegisterBuiltin(Name, NewBackendFromJSON)
	host.Register(host.Plugin{
		Name:    Name,
		Summary: "PTY backend running an interactive bash per terminal session",
		Inject:  []host.Key{terminal.ServiceKey},
		Config:  func() any { return terminalbash.DefaultConfig() },
		Apply:   host.Typed(apply),
		ShellWritable: func(cfg any, workdir string) []string {
			c, ok := cfg.(*terminalbash.Config)
			if !ok {
				return nil
			}
			return c.Sandbox.WritableRoots(workdir)
		},
	})
}

// apply registers one backend with the terminals service. The backend is
// the plugin's instance: on unload it is unregistered first, so no new
// session can start, and then the host closes it, which ends every session
// it still owns (see Backend.Close); the host also runs its invariants.
//
// When the terminals service keeps shells (terminal.KeeperFor), the
// backend runs in a keeper instead: dsh's own binary, serving this plugin
// with this config, in a process that outlives dsh. The instance is then
// the keeper's client, whose close leaves the keeper and its shells be.
func apply(pctx *host.Context, cfg *terminalbash.Config) (any, error) {
	plan, keep, err := terminal.KeeperFor(pctx)
	if err != nil {
		return nil, err
	}
	if keep {
		return applyKept(pctx, cfg, plan)
	}
	b, err := terminalbash.NewBackend(cfg, pctx.Logger())
	if err != nil {
		return nil, err
	}
	if err := terminal.AddBackend(pctx, b); err != nil {
		return b, err
	}
	return b, nil
}

// NewBackendFromJSON decodes the config strictly over the defaults, as the
// host does for the plugin, and builds the backend: what a keeper of this
// plugin serves, and what cmd/dsh-backend-bash serves.
func NewBackendFromJSON(_ context.Context, raw json.RawMessage) (termapi.Backend, error) {
	cfg, err := terminalbash.ConfigFromJSON(raw)
	if err != nil {
		return nil, err
	}
	// A keeper lives on with no dsh and lists what it keeps to the next
	// one: it keeps sessions, not shells waiting for an owner.
	cfg.WarmShells = 0
	return terminalbash.NewBackend(cfg, backendplugin.Logger(0))
}

// applyKept finds or starts the keeper of this entry and registers it as
// the backend.
func applyKept(pctx *host.Context, cfg *terminalbash.Config, plan terminal.KeeperPlan) (any, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("keeping shells: %w", err)
	}
	c, err := backendplugin.OpenKeeper(pctx.Lifetime(), backendplugin.KeeperOptions{
		Dir: plan.Dir, Name: plan.Name, Path: self, Builtin: Name, Config: raw, Keep: plan.Keep, Logger: pctx.Logger(),
	})
	if err != nil {
		return nil, fmt.Errorf("keeping shells: %w", err)
	}
	if err := terminal.AddBackend(pctx, c); err != nil {
		return c, err
	}
	return c, nil
}
