package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 800},
		{1 << 10, 800},
		{1 << 20, 825},
		{16 << 20, 200},
		{32 << 20, 100},
		{1 << 30, 100},
	} {
		if got := Percent(tc.live); got != tc.want {
			t.Errorf("Percent(%d) = %d, want %d", tc.live, got, tc.want)
		}
	}
}

// TestHeapGoalIsBounded: the heap goal the runtime computes from Percent
// is at most Headroom above the live heap while that is small, before the
// first collection too (issue 26, item 3: GOGC=10000 set a first goal of
// 400 MiB), and twice the live heap once it is large.
func TestHeapGoalIsBounded(t *testing.T) {
	for _, live := range []uint64{0, 1 << 10, 1 << 20, 3 << 20, 8 << 20, 16 << 20, 32 << 20, 1 << 30} {
		p := uint64(Percent(live))
		goal := max(live*(100+p)/100, heapMinimum*p/100)
		if bound := max(live+Headroom, 2*live); goal > bound+(1<<20) {
			t.Errorf("live %d: GOGC %d gives a goal of %d, more than %d", live, p, goal, bound)
		}
	}
}

// TestStartBoundsTheGoal: once Start has run, the runtime's own heap goal
// is within Headroom of the live heap, before and after a collection.
func TestStartBoundsTheGoal(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	stop := Start()
	defer func() {
		stop()
		debug.SetGCPercent(defaultPercent)
	}()
	sample := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}}
	check := func(when string) {
		t.Helper()
		metrics.Read(sample)
		goal, live := sample[0].Value.Uint64(), sample[1].Value.Uint64()
		// The runtime adds stacks and globals to the live heap.
		if goal > live+Headroom+(4<<20) {
			t.Errorf("%s: the heap goal is %d MiB with %d MiB live, more than %d MiB above it", when, goal>>20, live>>20, Headroom>>20)
		}
	}
	check("after Start")
	runtime.GC()
	waitFor(t, func() bool {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return p > defaultPercent
	})
	check("after a collection")
}

// TestStartFollowsCollections checks that Start raises GOGC for a small
// live heap, that it runs again after each collection, and that stop puts
// the default back.
func TestStartFollowsCollections(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	stop := Start()
	if p := debug.SetGCPercent(-1); p <= defaultPercent {
		t.Fatalf("GOGC with a small live heap = %d, want more than %d", p, defaultPercent)
	}
	debug.SetGCPercent(defaultPercent)
	// The finalizer of the collection after this one sets GOGC again.
	for range 3 {
		runtime.GC()
	}
	waitFor(t, func() bool {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return p > defaultPercent
	})
	stop()
	if p := debug.SetGCPercent(-1); p != defaultPercent {
		t.Fatalf("GOGC after stop = %d, want %d", p, defaultPercent)
	}
	debug.SetGCPercent(defaultPercent)
}

func TestOperatorSettingWins(t *testing.T) {
	t.Setenv("GOGC", "50")
	before := debug.SetGCPercent(77)
	defer debug.SetGCPercent(before)
	Start()()
	if p := debug.SetGCPercent(77); p != 77 {
		t.Fatalf("GOGC = %d after Start with GOGC set, want it untouched (77)", p)
	}
}

// waitFor runs collections until cond holds; the finalizer goroutine
// acts after a collection, at its own pace.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		runtime.GC()
		runtime.Gosched()
	}
	t.Fatal("the tuner never ran after a collection")
}
