//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/internal/cgtest"
	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// limitedBackend is a backend whose shells have limits, inside a box of
// the test's own (so a failure to limit cannot take the machine), or a
// skip where this machine enforces no such limits.
func limitedBackend(t *testing.T, l LimitsConfig) *Backend {
	t.Helper()
	box := cgtest.NewBox(t, 600, 1<<30)
	box.Enter(t)
	if err := proc.FindLimitHost(procLimits(limitsOf(l))).Check(procLimits(limitsOf(l))); err != nil {
		if os.Getenv("DSH_REQUIRE_LIMITS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return newTestBackend(t, func(c *Config) { c.Limits = l })
}

// A memory hog is ended by the OOM killer at the shell's memory limit; the
// shell is kept, and the send's result names the limit.
func TestMemoryLimitEndsTheHog(t *testing.T) {
	b := limitedBackend(t, LimitsConfig{Memory: 64 * config.MiB})
	s := spawn(t, b, t.TempDir())
	if got := s.Capabilities().Limits; got.Memory != 64<<20 {
		t.Fatalf("capabilities: %+v, want the memory limit", got)
	}
	_, res := mustExec(t, s, `python3 -c 'x = b"x" * (400 << 20)'`)
	if res.Exec.ExitCode != 137 {
		t.Errorf("the hog's status %d, want 137 (SIGKILL)", res.Exec.ExitCode)
	}
	if res.LimitsHit != (termapi.Limits{Memory: 64 << 20}) {
		t.Errorf("LimitsHit = %+v, want the memory limit", res.LimitsHit)
	}
	out, res := mustExec(t, s, "echo alive")
	if strings.TrimSpace(out) != "alive" || res.LimitsHit != (termapi.Limits{}) {
		t.Errorf("the next command: %q, %+v", out, res.LimitsHit)
	}
}

// A fork past the pids limit fails, and the send's result names the limit.
func TestPidsLimitRefusesForks(t *testing.T) {
	b := limitedBackend(t, LimitsConfig{Pids: 16})
	s := spawn(t, b, t.TempDir())
	out, res := mustExec(t, s, `python3 -c '
import subprocess
kids, refused = [], 0
for i in range(40):
    try:
        kids.append(subprocess.Popen(["sleep", "60"]))
    except OSError:
        refused += 1
print("refused", refused > 0)
for k in kids:
    k.kill()
'`)
	if !strings.Contains(out, "refused True") {
		t.Errorf("output %q: no fork was refused", out)
	}
	if res.LimitsHit != (termapi.Limits{Pids: 16}) {
		t.Errorf("LimitsHit = %+v, want the pids limit", res.LimitsHit)
	}
}

// The policy's limits win over the configured ones, field by field; one
// below what a shell needs is refused.
func TestPolicyLimits(t *testing.T) {
	b := limitedBackend(t, LimitsConfig{Memory: 256 * config.MiB, Pids: 100})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	ts, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "policy", OwnerID: "o", Cwd: t.TempDir(), Policy: termapi.Policy{Limits: termapi.Limits{Pids: 50, CPU: 0.5}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close(ctx, "test over")
	want := termapi.Limits{Memory: 256 << 20, Pids: 50, CPU: 0.5}
	if got := ts.Capabilities().Limits; got != want {
		t.Errorf("capabilities %+v, want %+v", got, want)
	}
	_, err = b.Spawn(ctx, termapi.SpawnSpec{SessionID: "tiny", OwnerID: "o", Cwd: t.TempDir(), Policy: termapi.Policy{Limits: termapi.Limits{Memory: 1 << 20}}})
	if !errors.Is(err, termapi.ErrLimitsUnsupported) || !strings.Contains(err.Error(), "limits.memory must be 0 (no limit) or at least 16MiB") {
		t.Errorf("a 1 MiB limit: %v", err)
	}
}

// EndCommand ends what the latest command started (a fork bomb at its
// limit here) and keeps an earlier job and the shell.
func TestEndCommandEndsTheBomb(t *testing.T) {
	b := limitedBackend(t, LimitsConfig{Pids: 64})
	s := spawn(t, b, t.TempDir())
	out, _ := mustExec(t, s, "sleep 1000 & echo pid=$!")
	_, after, _ := strings.Cut(out, "pid=")
	early, err := strconv.Atoi(strings.TrimSpace(after))
	if err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	earlyID, err := proc.IdentityOf(early)
	if err != nil {
		t.Fatal(err)
	}
	// The bomb runs in the background, so the shell comes back to its
	// prompt while it multiplies.
	mustExec(t, s, "b(){ b & b & wait; }; b 2>/dev/null & disown")
	eventually(t, "the bomb to reach the limit", func() bool { return s.leaves.Hits().Pids > 0 })
	n, err := s.EndCommand(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("EndCommand ended %d processes, want the bomb's dozens", n)
	}
	if !earlyID.Alive() {
		t.Error("the earlier job was ended too")
	}
	pids, _ := s.members()
	if len(pids) != 2 {
		t.Errorf("left: %v, want the shell and the earlier job", pids)
	}
	out, _ = mustExec(t, s, "echo still here")
	if strings.TrimSpace(out) != "still here" {
		t.Errorf("the shell after EndCommand: %q", out)
	}
}

// A limit the machine cannot enforce fails the load, naming the field and
// what is missing.
func TestUnenforceableLimitFailsTheLoad(t *testing.T) {
	err := checkLimitsAtLoad(proc.NoLimitHost("no memory controller (a test)"), LimitsConfig{Pids: 10, Memory: 64 * config.MiB})
	fe, ok := errors.AsType[*config.FieldError](err)
	if !ok || fe.Field != "limits.memory" || !strings.Contains(err.Error(), "memory limit cannot be enforced here: no memory controller (a test)") {
		t.Errorf("load error %v (%T)", err, err)
	}
	if err := checkLimitsAtLoad(proc.NoLimitHost("none"), LimitsConfig{}); err != nil {
		t.Errorf("no limits: %v", err)
	}
}

// eventually re-checks cond with a short backoff until it holds: for
// kernel states that produce no event (a cgroup counter).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(waitLong)
	for delay := time.Millisecond; !cond(); delay = min(2*delay, 50*time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("gave up after %v waiting for %s", waitLong, what)
		}
		time.Sleep(delay)
	}
}
