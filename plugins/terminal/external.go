package terminal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/envpolicy"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
)

// RegisterExternal makes the default host registry load deployment
// entries that name an executable as external backends (see LoadExternal).
// The standard plugin set calls it.
func RegisterExternal() { host.RegisterExternal(LoadExternal) }

// LoadExternal is the host.ExternalLoader of backend executables. The entry
// injects the terminals service; its config, whatever it holds but
// passEnv, goes to the plugin as JSON; the plugin starts when the entry is
// applied, and registers the backend under the type it declares. A plugin
// that fails its handshake, crashes at start, speaks another protocol
// version or rejects its config fails the load with that cause. (Whether
// the executable may be trusted at all is host.CheckTrust's to decide.)
//
// The plugin process gets dsh's environment without the names that look
// like credentials, and without the SSH agent's (envpolicy.ForPlugin): it
// runs as dsh's user and passes its environment on to its shells. The
// entry's passEnv, a list of globs, passes such names to it all the same
// (passEnv: ["AWS_*"]); passEnv is dsh's, and never reaches the plugin.
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
		ShellWritable: func(cfg any, workdir string) []string {
			m, ok := cfg.(*map[string]any)
			if !ok {
				return nil
			}
			return shellWritable(*m, workdir)
		},
	}, nil
}

// shellWritable reads, from an external backend's config, the host
// directories its shells may write below, as the backends dsh ships
// configure them: a shell backend's (dsh-backend-bash) sandbox in mode
// workspace-write, its workspace and writable directories; a docker
// backend's created containers (image), the workspace and the mounts not
// marked ro. An ssh backend's shells write on another machine, and an
// existing container's mounts are not dsh's to know.
func shellWritable(cfg map[string]any, workdir string) []string {
	str := func(m map[string]any, key string) string { s, _ := m[key].(string); return s }
	list := func(m map[string]any, key string) []string {
		var out []string
		items, _ := m[key].([]any)
		for _, it := range items {
			if s, ok := it.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	orWorkdir := func(dir string) string {
		if dir == "" {
			return workdir
		}
		return dir
	}
	if sb, ok := cfg["sandbox"].(map[string]any); ok {
		if str(sb, "mode") != "workspace-write" {
			return nil
		}
		return append([]string{orWorkdir(str(sb, "workspace"))}, list(sb, "writable")...)
	}
	if str(cfg, "image") == "" {
		return nil
	}
	dirs := []string{orWorkdir(str(cfg, "workspace"))}
	for _, m := range list(cfg, "mounts") {
		parts := strings.Split(m, ":")
		if len(parts) == 2 {
			dirs = append(dirs, parts[0])
		}
	}
	return dirs
}

// passEnvKey is the key of an executable entry's config that dsh takes for
// itself: the globs of names its plugin gets though they look like
// credentials.
const passEnvKey = "passEnv"

// takePassEnv removes passEnv from cfg and returns its globs.
func takePassEnv(cfg map[string]any) ([]string, error) {
	raw, ok := cfg[passEnvKey]
	if !ok {
		return nil, nil
	}
	delete(cfg, passEnvKey)
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a list of variable names or globs, got %T", passEnvKey, raw)
	}
	globs := make([]string, 0, len(list))
	for _, v := range list {
		g, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want a list of variable names or globs, got %v", passEnvKey, v)
		}
		if err := envpolicy.ValidGlob(g); err != nil {
			return nil, fmt.Errorf("%s: %w", passEnvKey, err)
		}
		globs = append(globs, g)
	}
	return globs, nil
}

// applyExternal starts the executable and registers the backend it
// serves. The client is the entry's instance: the host stops the process
// once AddBackend has unregistered it.
//
// When the terminals service keeps shells (KeeperFor), the executable
// runs as the entry's keeper instead, with the same filtered environment:
// it holds its shells' connections (an SSH connection, a Docker exec
// stream) in a process that outlives dsh. An executable that cannot serve
// as a keeper (built before keepers) runs as a plugin, as without keeping,
// and a warning says that its shells end with dsh.
func applyExternal(pctx *host.Context, path string, cfg map[string]any) (any, error) {
	pass, err := takePassEnv(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("config of %s: %w", path, err)
	}
	env := envpolicy.ForPlugin(os.Environ(), pass)
	plan, keep, err := KeeperFor(pctx)
	if err != nil {
		return nil, err
	}
	var c *backendplugin.Client
	if keep {
		c, err = backendplugin.OpenKeeper(pctx.Lifetime(), backendplugin.KeeperOptions{
			Dir: plan.Dir, Name: plan.Name, Path: path, Config: raw, Keep: plan.Keep, Env: env, Logger: pctx.Logger(),
		})
		if errors.Is(err, backendplugin.ErrKeeperUnsupported) {
			pctx.Logger().Warn("this backend executable cannot keep its shells: they end with dsh", "path", path, "err", err)
			c, err = nil, nil
		} else if err != nil {
			return nil, fmt.Errorf("keeping shells: %w", err)
		}
	}
	if c == nil {
		c, err = backendplugin.Open(pctx.Lifetime(), path, raw, backendplugin.Options{Logger: pctx.Logger(), Env: env})
		if err != nil {
			return nil, err
		}
	}
	if err := AddBackend(pctx, c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
