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

func apply(pctx *host.Context, cfg *Config) error {
	svc, err := New(cfg, pctx.Logger())
	if err != nil {
		return err
	}
	tools, err := host.Service[*host.Tools](pctx, host.ToolsKey)
	if err != nil {
		return err
	}
	remove := tools.AddCheck(svc.Check)
	pctx.Defer(func(context.Context) error { remove(); return nil })
	return pctx.Provide(ServiceKey, svc)
}

// Install registers a package's checks with the invariants service the
// companion plugin injected, for as long as the plugin is loaded: its
// unload runs them one last time, and fails if they fail.
func Install(pctx *host.Context, name string, checks ...Check) error {
	svc, err := host.Service[*Service](pctx, ServiceKey)
	if err != nil {
		return err
	}
	unregister, err := svc.Register(name, checks...)
	if err != nil {
		return err
	}
	pctx.Defer(func(ctx context.Context) error {
		if err := unregister(ctx); err != nil {
			return fmt.Errorf("on unload: %w", err)
		}
		return nil
	})
	return nil
}

// Augment adds the invariants service to d, unless d has it, and the
// companion of every entry whose plugin has one in reg (its name with
// CompanionSuffix), beside that entry, so that the companion sees the same
// realm. It is what `dsh serve --check-invariants` and the test harnesses
// do to a deployment.
func Augment(d *host.Deployment, reg *host.Registry) {
	var has func(list []*host.Entry) bool
	has = func(list []*host.Entry) bool {
		for _, e := range list {
			if e.Name == PluginName || has(e.Children) {
				return true
			}
		}
		return false
	}
	present := has(d.Entries)
	d.Entries = addCompanions(d.Entries, "", reg)
	if !present {
		d.Entries = append(d.Entries, &host.Entry{ID: PluginName, Path: PluginName, Name: PluginName})
	}
}

func addCompanions(list []*host.Entry, parent string, reg *host.Registry) []*host.Entry {
	present := make(map[string]bool, len(list))
	for _, e := range list {
		present[e.Name] = true
	}
	out := list
	for _, e := range list {
		if e.IsGroup() {
			e.Children = addCompanions(e.Children, e.Path, reg)
			continue
		}
		name := e.Name + CompanionSuffix
		if e.Disabled || present[name] {
			continue
		}
		if _, ok := reg.Lookup(name); !ok {
			continue
		}
		id := e.ID + CompanionSuffix
		path := id
		if parent != "" {
			path = parent + ":" + id
		}
		out = append(out, &host.Entry{ID: id, Path: path, Name: name})
		present[name] = true
	}
	return out
}
