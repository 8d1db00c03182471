package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, maxPercent},
		{1 << 10, maxPercent},
		{1 << 20, 3200},
		{16 << 20, 200},
		{32 << 20, 100},
		{1 << 30, 100},
	} {
		if got := Percent(tc.live); got != tc.want {
			t.Errorf("Percent(%d) = %d, want %d", tc.live, got, tc.want)
		}
	}
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
