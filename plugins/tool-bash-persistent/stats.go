package bashtool

import "sync/atomic"

// Counters are what the bash tool has done since the process started,
// across every loaded instance: for metrics.
type Counters struct {
	// Resets counts shells closed by a call (a timeout under reset, a dead
	// or stuck shell, a cancellation), not those closed with their owner.
	Resets uint64
	// StdinInterrupts counts commands interrupted because they waited for
	// input.
	StdinInterrupts uint64
	// Timeouts counts calls that ran past timeoutMs, whatever the action.
	Timeouts uint64
}

var stats struct {
	resets, stdinInterrupts, timeouts atomic.Uint64
}

// Stats returns the counters so far.
func Stats() Counters {
	return Counters{
		Resets:          stats.resets.Load(),
		StdinInterrupts: stats.stdinInterrupts.Load(),
		Timeouts:        stats.timeouts.Load(),
	}
}
