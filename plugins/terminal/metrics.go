package terminal

import "github.com/prometheus/client_golang/prometheus"

// The service's metrics. Their descriptions are shared by every service,
// so that whoever exports them can add up the services of a process.
var (
	shellsDesc = prometheus.NewDesc("dsh_shells", "Live terminal sessions (shells).", nil, nil)
	warmDesc   = prometheus.NewDesc("dsh_warm_shells", "Shells started and waiting for a new session in the backends' warm pools.", nil, nil)
)

// WarmPool is implemented by backends that keep shells started for new
// sessions: WarmShells is how many wait now.
type WarmPool interface {
	WarmShells() int
}

// Describe implements prometheus.Collector.
func (s *Service) Describe(ch chan<- *prometheus.Desc) {
	ch <- shellsDesc
	ch <- warmDesc
}

// Collect implements prometheus.Collector: the sessions published and not
// yet closed, and the shells waiting in the backends' pools.
func (s *Service) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	n := len(s.sessions)
	var pools []WarmPool
	for _, e := range s.backends {
		if p, ok := e.backend.(WarmPool); ok {
			pools = append(pools, p)
		}
	}
	s.mu.Unlock()
	warm := 0
	for _, p := range pools {
		warm += p.WarmShells()
	}
	ch <- prometheus.MustNewConstMetric(shellsDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(warmDesc, prometheus.GaugeValue, float64(warm))
}
