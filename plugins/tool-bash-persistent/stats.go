package bashtool

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are what one instance of the tool has done since it loaded.
type counters struct {
	// resets counts shells closed by a call (a timeout under reset, a dead
	// or stuck shell, a cancellation), not those closed with their owner.
	resets atomic.Uint64
	// stdinInterrupts counts commands interrupted because they waited for
	// input.
	stdinInterrupts atomic.Uint64
	// timeouts counts calls that ran past timeoutMs, whatever the action.
	timeouts atomic.Uint64
	// memoryHits and pidsHits count calls during which the shell's
	// processes ran into their memory limit (the OOM killer ended one) or
	// their process limit (a fork was refused).
	memoryHits, pidsHits atomic.Uint64
	// commandsEnded counts processes a command had left running that a
	// timeout ended.
	commandsEnded atomic.Uint64
}

// The tool's metrics. The descriptions are shared by every instance, so
// that whoever exports them can add up the instances of one process.
var (
	resetsDesc = prometheus.NewDesc("dsh_bash_resets_total",
		"Shells the bash tool closed during a call (timeout under reset, a dead or stuck shell, a cancellation).", nil, nil)
	stdinInterruptsDesc = prometheus.NewDesc("dsh_bash_stdin_interrupts_total",
		"Commands the bash tool interrupted because they waited for input.", nil, nil)
	timeoutsDesc = prometheus.NewDesc("dsh_bash_timeouts_total",
		"bash calls that ran past timeoutMs.", nil, nil)
	memoryHitsDesc = prometheus.NewDesc("dsh_bash_memory_limit_hits_total",
		"bash calls during which the shell's processes ran into their memory limit (the OOM killer ended one).", nil, nil)
	pidsHitsDesc = prometheus.NewDesc("dsh_bash_pids_limit_hits_total",
		"bash calls during which the shell's processes ran into their process limit (a fork was refused).", nil, nil)
	endedDesc = prometheus.NewDesc("dsh_bash_timeout_ended_processes_total",
		"Processes a timed-out command had left running (background jobs, daemons, forks) that the bash tool ended.", nil, nil)
)

// Describe implements prometheus.Collector.
func (p *plugin) Describe(ch chan<- *prometheus.Desc) {
	ch <- resetsDesc
	ch <- stdinInterruptsDesc
	ch <- timeoutsDesc
	ch <- memoryHitsDesc
	ch <- pidsHitsDesc
	ch <- endedDesc
}

// Collect implements prometheus.Collector.
func (p *plugin) Collect(ch chan<- prometheus.Metric) {
	for _, c := range []struct {
		desc  *prometheus.Desc
		value *atomic.Uint64
	}{
		{resetsDesc, &p.stats.resets},
		{stdinInterruptsDesc, &p.stats.stdinInterrupts},
		{timeoutsDesc, &p.stats.timeouts},
		{endedDesc, &p.stats.commandsEnded},
		{memoryHitsDesc, &p.stats.memoryHits},
		{pidsHitsDesc, &p.stats.pidsHits},
	} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.value.Load()))
	}
}
