package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Headroom is how far above the live heap the heap goal is kept at least.
const Headroom = 32 << 20

// defaultPercent is GOGC's default, which Start never goes below.
const defaultPercent = 100

// maxPercent bounds GOGC while the live heap is tiny.
const maxPercent = 10000

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
// live heap, within [100, 10000].
func Percent(live uint64) int {
	if live == 0 {
		return maxPercent
	}
	p := Headroom * 100 / live
	return int(min(max(p, defaultPercent), maxPercent))
}
