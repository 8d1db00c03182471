package backendplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
)

// Register makes the default host registry load deployment entries that
// name an executable as external backends (see LoadExternal). The standard
// plugin set calls it.
func Register() { host.RegisterExternal(LoadExternal) }

// LoadExternal is the host.ExternalLoader of backend executables. The entry
// injects the terminals service; its config, whatever it holds, goes to
// the plugin as JSON; the plugin starts when the entry is applied, and
// registers the backend under the type it declares. A plugin that fails
// its handshake, crashes at start, speaks another protocol version or
// rejects its config fails the load with that cause.
func LoadExternal(name, path string) (host.Plugin, error) {
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return host.Plugin{}, fmt.Errorf("backend executable: %w", err)
	case info.IsDir() || info.Mode()&0o111 == 0:
		return host.Plugin{}, fmt.Errorf("backend executable %s: not an executable file", path)
	}
	return host.Plugin{
		Name:    name,
		Summary: "External terminal backend (" + path + ")",
		Inject:  []string{terminal.ServiceKey},
		Config:  func() any { return &map[string]any{} },
		Apply: host.Typed(func(pctx *host.Context, cfg *map[string]any) error {
			return applyExternal(pctx, path, *cfg)
		}),
	}, nil
}

// backendRegistry is the part of the terminals service an external backend
// uses.
type backendRegistry interface {
	RegisterBackend(terminal.Backend) (unregister func(), err error)
}

func applyExternal(pctx *host.Context, path string, cfg map[string]any) error {
	registry, err := host.Service[backendRegistry](pctx, terminal.ServiceKey)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("config of %s: %w", path, err)
	}
	c, err := Open(pctx.Lifetime(), path, raw, Options{Logger: pctx.Logger()})
	if err != nil {
		return err
	}
	unregister, err := registry.RegisterBackend(c)
	if err != nil {
		_ = c.Close(context.Background())
		return fmt.Errorf("register backend %q of %s: %w", c.Type(), path, err)
	}
	// Deferred cleanups run last first: unregister, then stop the process.
	pctx.Defer(c.Close)
	pctx.Defer(func(context.Context) error {
		unregister()
		return nil
	})
	return nil
}
