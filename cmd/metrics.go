//go:build linux

package dshcmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/mcpfront"
)

// metrics is what --metrics serves, in the Prometheus text format.
type metrics struct {
	reg     *prometheus.Registry
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

func newMetrics(front func() *mcpfront.Front, instances func() []host.Instance) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dsh_tool_calls_total",
			Help: "Tool calls, by tool and outcome (ok, error: an error result the model sees, cancelled: the client cancelled or left).",
		}, []string{"tool", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dsh_tool_call_seconds",
			Help: "How long tool calls took, shell start included.",
			// From a warm `true` (0.1 ms) to a long build.
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12),
		}, []string{"tool"}),
	}
	gauge := func(name, help string, value func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, value)
	}
	m.reg.MustRegister(
		m.calls, m.latency,
		gauge("dsh_sessions", "Open MCP sessions (one owner each).", func() float64 {
			if f := front(); f != nil {
				return float64(f.SessionCount())
			}
			return 0
		}),
		pluginMetrics{instances},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// pluginMetrics exports the metrics of the host's plugin instances that
// are collectors (the terminals service's shells, the bash tool's resets,
// …). The plugins are not imported here: whatever a loaded plugin
// measures is served. Instances of one plugin share their metrics'
// descriptions, and their values are added up, so a deployment that loads
// a plugin twice (in two groups) still serves one series per metric.
type pluginMetrics struct {
	instances func() []host.Instance
}

// Describe sends nothing: what the plugins measure is known once they
// are loaded, after the registry was made, so the collector is unchecked.
func (pluginMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect adds up the values of each description over the instances.
func (c pluginMetrics) Collect(ch chan<- prometheus.Metric) {
	type sum struct {
		kind  prometheus.ValueType
		value float64
	}
	sums := make(map[*prometheus.Desc]*sum)
	var order []*prometheus.Desc
	for _, inst := range c.instances() {
		col, ok := inst.Value.(prometheus.Collector)
		if !ok {
			continue
		}
		got := make(chan prometheus.Metric)
		go func() { col.Collect(got); close(got) }()
		for m := range got {
			var pb dto.Metric
			if m.Write(&pb) != nil {
				continue
			}
			kind, value := prometheus.GaugeValue, pb.GetGauge().GetValue()
			if pb.Counter != nil {
				kind, value = prometheus.CounterValue, pb.GetCounter().GetValue()
			}
			s := sums[m.Desc()]
			if s == nil {
				s = &sum{kind: kind}
				sums[m.Desc()] = s
				order = append(order, m.Desc())
			}
			s.value += value
		}
	}
	for _, d := range order {
		ch <- prometheus.MustNewConstMetric(d, sums[d].kind, sums[d].value)
	}
}

// ObserveCall implements mcpfront.CallObserver.
func (m *metrics) ObserveCall(tool, outcome string, took time.Duration) {
	m.calls.WithLabelValues(tool, outcome).Inc()
	m.latency.WithLabelValues(tool).Observe(took.Seconds())
}

// listenLoopback listens on addr, which must be a loopback address: what
// --metrics and --pprof serve is for the machine's operator, not the
// network.
func listenLoopback(flag, addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usageError{fmt.Errorf("--%s %q: want host:port: %w", flag, addr, err)}
	}
	if !loopbackListen(host) {
		return nil, usageError{fmt.Errorf("--%s %q: only a loopback address is allowed (a profile or the metrics tell a stranger what your agents do)", flag, addr)}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return ln, nil
}

// sideServer serves h on ln until stop is called.
type sideServer struct {
	srv    *http.Server
	served chan error
}

func startSideServer(ln net.Listener, h http.Handler, logger *slog.Logger) *sideServer {
	s := &sideServer{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		served: make(chan error, 1),
	}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s
}

func (s *sideServer) stop(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	if serveErr := <-s.served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// handler serves the metrics at /metrics.
func (m *metrics) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	return mux
}

// pprofHandler serves net/http/pprof at /debug/pprof/.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
