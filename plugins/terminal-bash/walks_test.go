//go:build linux

package terminalbash

import (
	"sync"
	"testing"
	"time"

	"github.com/dshdev/dsh/internal/proc"
)

// TestSharedWalks: sessions that probe within one interval share one walk
// of /proc; once it is older than a session's interval, the next probe
// walks again.
func TestSharedWalks(t *testing.T) {
	var w sharedWalks
	now := time.Now()
	const sessions = 8
	snaps := make([]*proc.Snapshot, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			snap, at, err := w.get(now, time.Hour)
			if err != nil {
				t.Error(err)
				return
			}
			if at.Before(now) {
				t.Errorf("walk made at %v, before the probe at %v", at, now)
			}
			snaps[i] = snap
		})
	}
	wg.Wait()
	if w.count != 1 {
		t.Fatalf("%d sessions probing at once walked /proc %d times, want 1", sessions, w.count)
	}
	for i, s := range snaps {
		if s != snaps[0] {
			t.Fatalf("session %d got another walk", i)
		}
	}
	if _, _, err := w.get(now.Add(2*time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	if w.count != 2 {
		t.Fatalf("a walk older than the interval was reused (%d walks, want 2)", w.count)
	}
	// A session with a shorter interval does not take a walk older than it.
	if _, _, err := w.get(now.Add(2*time.Hour+time.Second), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if w.count != 3 {
		t.Fatalf("%d walks, want 3", w.count)
	}
}
