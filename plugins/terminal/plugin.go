package terminal

import "github.com/dshdev/dsh/host"

// PluginName is the plugin a deployment names to get the terminals service.
const PluginName = "terminal"

// ServiceKey is the key the service is provided under; consumers inject it
// and look it up with host.Service[*terminal.Service].
const ServiceKey host.Key = "terminals"

func init() {
	host.Register(host.Plugin{
		Name:     PluginName,
		Summary:  "Owner-fenced terminal sessions over registered backends (the terminals service)",
		Provides: []host.Key{ServiceKey},
		Config:   func() any { return DefaultConfig() },
		Apply:    host.Typed(apply),
	})
}

// apply provides a fresh service. The service is the plugin's instance:
// the host closes it, awaited, when the plugin unloads (every session
// still open is closed with reason "PTY service disposed"), checks it
// (Invariants) and measures it (Collect).
func apply(pctx *host.Context, cfg *Config) (any, error) {
	svc := NewService()
	svc.durable = cfg.Durable
	return svc, pctx.Provide(ServiceKey, svc)
}
