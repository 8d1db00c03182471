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
	"os"
	"strings"
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

// listenSide opens the listener of --metrics or --pprof: a loopback
// address, or a unix socket (see listenUnix) whose peers must be this
// user's processes. What they serve is for the machine's operator, not the
// network.
func listenSide(flag, addr string) (net.Listener, error) {
	if path, ok := isUnixAddr(addr); ok {
		ln, err := listenUnix(path)
		if err != nil {
			return nil, fmt.Errorf("--%s %s: %w", flag, addr, err)
		}
		return &peerListener{Listener: ln, uid: os.Getuid(), logger: slog.New(slog.DiscardHandler)}, nil
	}
	return listenLoopback(flag, addr)
}

// listenLoopback listens on addr, which must be a loopback address.
func listenLoopback(flag, addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usageError{fmt.Errorf("--%s %q: want host:port or unix:PATH: %w", flag, addr, err)}
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

// credentials say who may reach dsh's HTTP endpoints: /mcp and the side
// servers (--metrics, --pprof), which show argv, goroutine dumps and what
// the agents do, and so take the same Host check and bearer token.
type credentials struct {
	front   *mcpfront.Tokens // /mcp's tokens; nil when none is needed
	side    *mcpfront.Tokens // the side servers' on a TCP port
	file    *mcpfront.Tokens // --token-file's, or nil
	allowed []string         // --allowed-host
	// keptPath is the file of the token dsh keeps for itself, if it uses
	// one; frontPath is the same when /mcp takes it.
	keptPath, frontPath string
}

// isUnixListener reports whether ln is a unix socket's.
func isUnixListener(ln net.Listener) bool {
	_, ok := ln.Addr().(*net.UnixAddr)
	return ok
}

// credentials decides the tokens of the front (on ln, nil for stdio) and
// of the side servers. file holds --token-file's tokens. Without them, dsh
// uses one token, kept in the private directory for the next start (see
// tokenFileFor), for every TCP endpoint that needs one: the front unless
// --no-auth, and the side servers unless --no-auth (which the user chose
// for the front on loopback). It is named after the --http address, or
// without one after the first side server's. A unix socket needs no token
// (its peers are checked) unless --token-file gives some.
func (f *serveFlags) credentials(file *mcpfront.Tokens, ln net.Listener, auth bool, sides ...net.Listener) (*credentials, error) {
	c := &credentials{file: file, allowed: f.allowed}
	tcpFront := ln != nil && !isUnixListener(ln)
	var tcpSide string
	for _, s := range []struct {
		ln   net.Listener
		addr string
	}{{sides[0], f.metricsAddr}, {sides[1], f.pprofAddr}} {
		if s.ln != nil && !isUnixListener(s.ln) && tcpSide == "" {
			tcpSide = s.addr
		}
	}
	switch {
	case ln != nil && !tcpFront:
		c.front = file
	case tcpFront && auth:
		c.front = file
	}
	if tcpSide != "" && !f.noAuth {
		c.side = file
	}
	needFront, needSide := tcpFront && auth && file == nil, tcpSide != "" && !f.noAuth && file == nil
	if !needFront && !needSide {
		return c, nil
	}
	named := tcpSide
	if needFront {
		named = f.addr
	}
	path, token, err := tokenFileFor(named, f.rotateToken)
	if err != nil {
		return nil, err
	}
	kept, err := mcpfront.NewTokens(token)
	if err != nil {
		return nil, err
	}
	c.keptPath = path
	if needFront {
		c.front, c.frontPath = kept, path
	}
	if needSide {
		c.side = kept
	}
	return c, nil
}

// guard wraps a side server's handler on ln in the front's checks.
func (c *credentials) guard(ln net.Listener, h http.Handler) http.Handler {
	tokens := c.side
	if isUnixListener(ln) {
		tokens = c.file
	}
	return mcpfront.Guard(h, mcpfront.GuardOptions{Tokens: tokens, ListenHost: listenHost(ln.Addr()), AllowedHosts: c.allowed})
}

// sideLines say where the side servers listen and what they need.
func sideLines(metricsLn, pprofLn net.Listener, c *credentials) []string {
	var lines, names []string
	tcp := false
	for _, s := range []struct {
		ln         net.Listener
		name, path string
	}{{metricsLn, "metrics", "/metrics"}, {pprofLn, "profiles", "/debug/pprof/"}} {
		if s.ln == nil {
			continue
		}
		if isUnixListener(s.ln) {
			lines = append(lines, fmt.Sprintf("%s at %s%s (HTTP path %s)", s.name, unixPrefix, s.ln.Addr(), s.path))
			continue
		}
		lines = append(lines, fmt.Sprintf("%s at http://%s%s", s.name, s.ln.Addr(), s.path))
		names = append(names, s.name)
		tcp = true
	}
	what := strings.Join(names, " and ")
	switch {
	case !tcp:
	case c.side == nil:
		lines = append(lines, fmt.Sprintf("WARNING: --no-auth: %s need no token", what))
	case c.side == c.file:
		lines = append(lines, fmt.Sprintf(`%s need "Authorization: Bearer <token>" with a token of --token-file`, what))
	case c.side == c.front:
		lines = append(lines, fmt.Sprintf(`%s need "Authorization: Bearer <token>" with the token /mcp takes (in %s)`, what, c.keptPath))
	default:
		lines = append(lines, fmt.Sprintf(`%s need "Authorization: Bearer <token>"; the token is in %s (kept for the next start: --rotate-token makes a new one)`, what, c.keptPath))
	}
	return lines
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
