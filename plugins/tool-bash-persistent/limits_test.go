//go:build linux

package bashtool_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dshdev/dsh/internal/cgtest"
	"github.com/dshdev/dsh/internal/proc"
)

// boxed puts the test process, and so every shell it starts, in a cgroup
// of its own, so that a fork bomb or a memory hog the code under test
// fails to stop cannot take the machine. It skips where that cannot be
// made or where this machine cannot enforce the limits l. Tests that use
// it are not parallel: while the process is in the box, so is every shell
// it starts.
func boxed(t *testing.T, l proc.Limits) {
	t.Helper()
	box := cgtest.NewBox(t, 800, 2<<30)
	box.Enter(t)
	if err := proc.FindLimitHost(l).Check(l); err != nil {
		if os.Getenv("DSH_REQUIRE_LIMITS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// TestTimeoutEndsWhatTheCommandStarted: under interrupt, a command that
// times out takes its background jobs with it; a job of an earlier call
// keeps running.
func TestTimeoutEndsWhatTheCommandStarted(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "{timeoutMs: 1000, timeoutAction: interrupt}", "")
	o := hs.owner(t, "started")
	out := hs.run(t, o, "sleep 1000 & echo pid=$!")
	_, after, _ := strings.Cut(out, "pid=")
	early, err := strconv.Atoi(strings.TrimSpace(after))
	if err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	got := hs.run(t, o, "sleep 1001 & sleep 1002 & echo started; sleep 100")
	want := "\nstarted\n" +
		"[The command was interrupted with SIGINT when it timed out. The shell and its state are kept: current directory, variables, functions, background jobs.]\n" +
		"[The command had left 2 processes running (background jobs and what they started); they were ended too. Jobs from earlier commands are kept.]"
	if !strings.HasPrefix(got, timeoutHeader("1")+"\n") || !strings.HasSuffix(got, want) {
		t.Fatalf("timeout result:\n%s", got)
	}
	if !alive(early) {
		t.Error("the earlier call's job was ended")
	}
	if got := hs.run(t, o, "jobs -r"); !strings.Contains(got, "sleep 1000") || strings.Contains(got, "sleep 1001") || strings.Contains(got, "sleep 1002") {
		t.Errorf("jobs running after the timeout: %q", got)
	}
}

// TestForkBombEndsAtTimeout: a fork bomb runs into the shell's process
// limit, and at the timeout, under interrupt, everything it started is
// ended: the model is told both, and the shell is usable at once.
func TestForkBombEndsAtTimeout(t *testing.T) {
	boxed(t, proc.Limits{Pids: 64})
	hs := newHarness(t, "{timeoutMs: 2000, timeoutAction: interrupt}", "{limits: {pids: 64}}")
	o := hs.owner(t, "bomb")
	hs.expect(t, o, "export K=1", "")
	got := hs.run(t, o, "b(){ b & b & wait; }; b 2>/dev/null")
	for _, want := range []string{
		timeoutHeader("2"),
		"[The shell's processes reached their limit of 64 processes and threads, so starting more failed.]",
		"[The command ended as it timed out. The shell and its state are kept.]",
		"they were ended too.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the result lacks %q:\n%s", want, got)
		}
	}
	hs.expect(t, o, "echo K=$K; jobs", "K=1")
}

// TestMemoryLimitIsNamed: a memory hog is killed at the shell's memory
// limit, the model is told which limit and its value, and the shell is
// kept.
func TestMemoryLimitIsNamed(t *testing.T) {
	boxed(t, proc.Limits{Memory: 512 << 20})
	hs := newHarness(t, "", "{limits: {memory: 512MiB}}")
	o := hs.owner(t, "hog")
	hs.expect(t, o, "export K=1", "")
	got := hs.run(t, o, `python3 -c 'x = b"x" * (2 << 30)'`)
	want := "[The shell's processes reached their memory limit (512MiB), so the kernel killed one of them (normally the largest).]\n[exit code: 137]"
	if !strings.HasSuffix(got, want) {
		t.Errorf("result:\n%s", diff(got, want))
	}
	hs.expect(t, o, "echo K=$K", "K=1")
	// A call that hits nothing says nothing of limits.
	hs.expect(t, o, "echo fine", "fine")
	// The shell itself holding the memory is the largest process: it is
	// killed, and the owner's shell is reset.
	got = hs.run(t, o, `x=$(head -c 1000000000 /dev/zero | tr '\0' a); echo not reached`)
	want = "[The shell's processes reached their memory limit (512MiB), so the kernel killed one of them (normally the largest).]\n[shell killed by signal: SIGKILL]\nThe persistent bash shell was reset; the next bash call starts from the workspace with a fresh current directory and environment."
	if !strings.HasSuffix(got, want) {
		t.Errorf("result:\n%s", diff(got, want))
	}
	hs.expect(t, o, "echo K=${K-unset}", "K=unset")
}
