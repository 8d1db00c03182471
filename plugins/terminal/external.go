package terminal

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
)

// RegisterExternal makes the default host registry load deployment
// entries that name an executable as external backends (see LoadExternal).
// The standard plugin set calls it.
func RegisterExternal() { host.RegisterExternal(LoadExternal) }

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
		Inject:  []host.Key{ServiceKey},
		Config:  func() any { return &map[string]any{} },
		Apply: host.Typed(func(pctx *host.Context, cfg *map[string]any) (any, error) {
			return applyExternal(pctx, path, *cfg)
		}),
	}, nil
}

// applyExternal starts the executable and registers the backend it
// serves. The client is the entry's instance: the host stops the process
// once AddBackend has unregistered it.
func applyExternal(pctx *host.Context, path string, cfg map[string]any) (any, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("config of %s: %w", path, err)
	}
	c, err := backendplugin.Open(pctx.Lifetime(), path, raw, backendplugin.Options{Logger: pctx.Logger()})
	if err != nil {
		return nil, err
	}
	if err := AddBackend(pctx, c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
