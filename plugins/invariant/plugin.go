package invariant

import (
	"context"
	"fmt"

	"github.com/dshdev/dsh/host"
)

func init() {
	host.Register(host.Plugin{
		Name:     PluginName,
		Summary:  "the invariants service: package-owned runtime checks, run after every tool call",
		Inject:   []host.Key{host.ToolsKey},
		Provides: []host.Key{ServiceKey},
		Config:   func() any { return DefaultConfig() },
		Apply:    host.Typed(apply),
	})
}

// apply provides the service, runs it after every tool call, and once more
// when the plugin unloads. It checks the packages registered with it and
// every plugin instance of the host that has invariants (host.Checker).
func apply(pctx *host.Context, cfg *Config) (any, error) {
	svc, err := New(cfg, pctx.Logger())
	if err != nil {
		return nil, err
	}
	svc.instances = pctx.Instances
	tools, err := host.Service[*host.Tools](pctx, host.ToolsKey)
	if err != nil {
		return nil, err
	}
	remove := tools.AddCheck(svc.Check)
	pctx.Defer(func(ctx context.Context) error {
		remove()
		if err := svc.Check(ctx); err != nil {
			return fmt.Errorf("on unload: %w", err)
		}
		return nil
	})
	return nil, pctx.Provide(ServiceKey, svc)
}

// Augment adds the invariants service to d, unless d has it: what
// `dsh serve --check-invariants` and the test harnesses do to a deployment.
// The service finds the plugins' invariants on their instances.
func Augment(d *host.Deployment) {
	var has func(list []*host.Entry) bool
	has = func(list []*host.Entry) bool {
		for _, e := range list {
			if e.Name == PluginName || has(e.Children) {
				return true
			}
		}
		return false
	}
	if !has(d.Entries) {
		d.Entries = append(d.Entries, &host.Entry{ID: PluginName, Path: PluginName, Name: PluginName})
	}
}
