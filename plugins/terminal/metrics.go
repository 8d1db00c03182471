package terminal

import "github.com/prometheus/client_golang/prometheus"

// shellsDesc describes the service's one metric. It is shared by every
// service, so that whoever exports it can add up the services of a process.
var shellsDesc = prometheus.NewDesc("dsh_shells", "Live terminal sessions (shells).", nil, nil)

// Describe implements prometheus.Collector.
func (s *Service) Describe(ch chan<- *prometheus.Desc) { ch <- shellsDesc }

// Collect implements prometheus.Collector: the sessions published and not
// yet closed.
func (s *Service) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	n := len(s.sessions)
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(shellsDesc, prometheus.GaugeValue, float64(n))
}
