package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Headroom is how far above the live heap the heap goal is kept at least,
// and, while the live heap is small, at most.
const Headroom = 32 << 20

// defaultPercent is GOGC's default, which Start never goes below.
const defaultPercent = 100

// heapMinimum is the runtime's heap goal floor at GOGC=100: the goal is
// never below heapMinimum×GOGC/100, whatever the live heap. So GOGC=10000
// would let 400 MiB of garbage pile up before a collection, even with a
// live heap of a megabyte.
const heapMinimum = 4 << 20

// Start begins tuning, unless the environment sets GOGC or GOMEMLIMIT. It
// returns a function that stops the tuning and puts GOGC back.
func Start() (stop func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	t := &tuner{sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.adjust()
	t.arm()
	return func() {
		t.stopped.Store(true)
		debug.SetGCPercent(defaultPercent)
	}
}

// tuner adjusts GOGC after every collection. The finalizer goroutine runs
// it, once per cycle, so nothing else touches it.
type tuner struct {
	sample  []metrics.Sample
	stopped atomic.Bool
}

// sentinel is garbage whose finalizer runs once the next collection has
// found it unreachable. It has a pointer, so that it is not batched with
// other tiny objects whose lives would delay it.
type sentinel struct{ t *tuner }

// arm makes the next collection call adjust.
func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if !s.t.stopped.Load() {
			s.t.adjust()
			s.t.arm()
		}
	})
}

// adjust sets GOGC for the live heap the last collection found.
func (t *tuner) adjust() {
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	debug.SetGCPercent(Percent(live))
}

// Percent is the GOGC that puts the heap goal Headroom above live bytes of
// live heap, and never lower than GOGC's default: the runtime's goal is the
// larger of live×(1+GOGC/100) and heapMinimum×GOGC/100, so GOGC is bounded
// by both. While the live heap is small the goal is live+Headroom (before
// the first collection, Headroom); once it is large (Headroom or more), the
// default's twice the live heap.
func Percent(live uint64) int {
	// heapMinimum×p/100 ≤ live+Headroom.
	p := (live + Headroom) * 100 / heapMinimum
	if live > 0 {
		// live×p/100 ≤ Headroom.
		p = min(p, Headroom*100/live)
	}
	return int(max(p, defaultPercent))
}
