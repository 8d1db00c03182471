//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func checkAll(checks map[string]func(context.Context) error) error {
	var errs []error
	for _, check := range checks {
		if err := check(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// The invariants hold for ordinary sessions, and catch a session that
// says its shell runs when the shell is gone, and one whose status goes
// from exited back to running.
func TestInvariantsCatchTheirViolations(t *testing.T) {
	b := newTestBackend(t, nil)
	checks := b.Invariants()
	s := spawn(t, b, "")
	mustExec(t, s, "seq 1 50")
	if err := checkAll(checks); err != nil {
		t.Fatalf("healthy sessions: %v", err)
	}

	// A scrollback past the bounds its session was configured with.
	s.mu.Lock()
	cfg := s.cfg
	s.cfg.scrollLines = 10
	s.mu.Unlock()
	err := checkAll(checks)
	s.mu.Lock()
	s.cfg = cfg
	s.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "the config allows 10 and") {
		t.Fatalf("an oversized scrollback was not caught: %v", err)
	}

	// A shell identity that names no live process, on a running session
	// whose reaper (of the real shell) has nothing to report.
	restore := reapBound
	reapBound = 10 * time.Millisecond
	defer func() { reapBound = restore }()
	// Under the lock: the read loop's tracking reads the identity too.
	s.mu.Lock()
	real := s.target.Shell
	s.target.Shell = proc.Identity{PID: real.PID, StartTime: real.StartTime + 1}
	s.mu.Unlock()
	err = checkAll(checks)
	s.mu.Lock()
	s.target.Shell = real
	s.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "says its shell") {
		t.Fatalf("a vanished shell was not caught: %v", err)
	}

	other := spawn(t, b, "")
	if _, res := execute(t, other, "exit 4"); res.Reason != termapi.WaitSessionExit {
		t.Fatalf("exit settled %s", res.Reason)
	}
	if err := checkAll(checks); err != nil {
		t.Fatalf("an exited session: %v", err)
	}
	other.mu.Lock()
	saved := other.status
	other.status = termapi.Running
	other.mu.Unlock()
	err = checkAll(checks)
	other.mu.Lock()
	other.status = saved
	other.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "reported its shell exited, and now running") {
		t.Fatalf("a status that came back was not caught: %v", err)
	}
}
