//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// TestCloseLeavesNothing starts processes that try to outlive the shell and
// checks that Close ends every one of them, with the cgroup and with the
// process tracker alone.
func TestCloseLeavesNothing(t *testing.T) {
	escapes := []struct {
		name, cmd  string
		cgroupOnly bool
	}{
		{"TERM-ignoring job", `(trap "" TERM; sleep 1000) & echo $!`, false},
		{"TERM- and HUP-ignoring job", `(trap "" TERM HUP; sleep 1000) & echo $!`, false},
		{"nohup and disown", `nohup sleep 1000 >/dev/null 2>&1 & disown; echo $!`, false},
		{"double fork", `( (sleep 1000 & echo $! > dbl) ); cat dbl`, false},
		{"new session", `mkfifo sid; setsid sh -c 'echo $$ > sid; exec sleep 1000' & read pid < sid; echo $pid`, true},
	}
	for _, mode := range []string{"cgroup", "tracker"} {
		t.Run(mode, func(t *testing.T) {
			b := newTestBackend(t, nil)
			if mode == "tracker" {
				b.noCgroup.Store(true)
			}
			s := spawnUnmanaged(t, b, t.TempDir())
			if mode == "cgroup" && s.target.Cgroup == nil {
				s.Close(context.Background(), "skip")
				t.Skip("cgroup v2 is not available here")
			}
			var captured []proc.Identity
			for _, e := range escapes {
				if e.cgroupOnly && mode != "cgroup" {
					t.Logf("%s: only a cgroup can catch it", e.name)
					continue
				}
				res := mustPrompt(t, s, e.cmd)
				captured = append(captured, reportedPID(t, res.Viewport))
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			if err := s.Close(ctx, "test"); err != nil {
				t.Fatalf("close: %v", err)
			}
			for i, id := range append(captured, s.target.Shell) {
				if id.Alive() {
					t.Errorf("process %v (%d) survived Close", id, i)
				}
			}
			if cg := s.target.Cgroup; cg != nil {
				if _, err := os.Stat(cg.Path()); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("cgroup %s still exists: %v", cg.Path(), err)
				}
			}
		})
	}
}

// spawnUnmanaged spawns a session the test closes itself.
func spawnUnmanaged(t *testing.T, b *Backend, cwd string) *session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	ts, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-close", OwnerID: "owner", Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	return ts.(*session)
}

func TestCloseIsSharedAndIdempotent(t *testing.T) {
	s := spawnUnmanaged(t, newTestBackend(t, nil), "")
	sn := start(t, s, "sleep 100", sendOpts{})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			errs[i] = s.Close(ctx, "concurrent")
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("close %d: %v", i, err)
		}
	}
	if res := wait(t, sn); res.Reason != termapi.WaitSessionExit {
		t.Errorf("live send settled %s, want session_exit", res.Reason)
	}
	if err := s.Close(context.Background(), "again"); err != nil {
		t.Errorf("close after close: %v", err)
	}
	if _, err := s.StartSend(context.Background(), termapi.SendRequest{Text: "true"}); !errors.Is(err, termapi.ErrSessionClosing) {
		t.Errorf("send after close: %v, want ErrSessionClosing", err)
	}
	if st := s.Status(); !st.Exited {
		t.Errorf("status after close: %v", st)
	}
}

// TestNoLeaks: a session's descriptors and goroutines are all gone after
// Close, whatever state it was in.
func TestNoLeaks(t *testing.T) {
	b := newTestBackend(t, nil)
	// Warm up what the runtime opens once (the poller) before counting.
	warm := spawnUnmanaged(t, b, "")
	if err := warm.Close(context.Background(), "warm-up"); err != nil {
		t.Fatal(err)
	}
	ignore := goleak.IgnoreCurrent()
	before := openFDs(t)
	for _, cmd := range []string{"true", "sleep 100", "cat", "yes", "exit 0"} {
		s := spawnUnmanaged(t, b, "")
		start(t, s, cmd, sendOpts{})
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		err := s.Close(ctx, "leak check")
		cancel()
		if err != nil {
			t.Fatalf("%s: close: %v", cmd, err)
		}
	}
	if after := openFDs(t); after != before {
		t.Errorf("open descriptors: %d before, %d after", before, after)
	}
	goleak.VerifyNone(t, ignore)
}

func TestSpawnFailures(t *testing.T) {
	token := "dsh-spawn-failure-" + strings.ReplaceAll(t.Name(), "/", "-")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	silent := func(c *Config) { c.ShellArgs = []string{"-c", "exec sleep 1000 # " + token} }
	cause := errors.New("caller gave up")
	tests := []struct {
		name  string
		edit  func(*Config)
		cwd   string
		ctx   func() (context.Context, context.CancelFunc)
		check func(error) bool
	}{
		{"missing cwd", nil, "/nonexistent/dir", nil, func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
		{"cwd is a file", nil, file, nil, func(err error) bool { return strings.Contains(err.Error(), "not a directory") }},
		{"shell exits", func(c *Config) { c.ShellArgs = []string{"-c", "exit 4"} }, "", nil,
			func(err error) bool {
				return strings.Contains(err.Error(), "exited during startup (exited with code 4)")
			}},
		{"no prompt before the timeout", func(c *Config) { silent(c); c.TimeoutMs = 300 }, "", nil,
			func(err error) bool { return strings.Contains(err.Error(), "did not reach its prompt") }},
		{"cancelled before", nil, "", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(cause)
			return ctx, func() {}
		}, func(err error) bool { return errors.Is(err, cause) }},
		{"cancelled during startup", silent, "", func() (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(context.Background(), 200*time.Millisecond, cause)
		}, func(err error) bool { return errors.Is(err, cause) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBackend(t, tt.edit)
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			s, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-fail", OwnerID: "owner", Cwd: tt.cwd})
			if err == nil {
				s.Close(context.Background(), "unexpected")
				t.Fatal("spawn succeeded")
			}
			if !tt.check(err) {
				t.Errorf("error %q is not the expected one", err)
			}
			if pids := processesWith(t, token); len(pids) > 0 {
				t.Errorf("processes left behind: %v", pids)
			}
			if n := len(b.sessions.List()); n != 0 {
				t.Errorf("backend still owns %d sessions", n)
			}
		})
	}
}

func TestBackendClose(t *testing.T) {
	b := newTestBackend(t, nil)
	var shells []proc.Identity
	for range 3 {
		s := spawnUnmanaged(t, b, "")
		start(t, s, "sleep 100", sendOpts{})
		shells = append(shells, s.target.Shell)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range shells {
		if id.Alive() {
			t.Errorf("shell %v survived the backend's close", id)
		}
	}
	_, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "late", OwnerID: "owner"})
	if !errors.Is(err, termapi.ErrBackendClosed) {
		t.Errorf("spawn after close: %v", err)
	}
}

// TestKillAll: KillAll reaches every session of the backend, synchronously.
func TestKillAll(t *testing.T) {
	b := newTestBackend(t, nil)
	s := spawnUnmanaged(t, b, "")
	res := mustPrompt(t, s, `(trap "" TERM HUP; sleep 1000) & echo $!`)
	job := reportedPID(t, res.Viewport)
	b.KillAll()
	// KillAll does not wait; Close does, and finds nothing left to do.
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := s.Close(ctx, "after kill"); err != nil {
		t.Fatal(err)
	}
	if job.Alive() || s.target.Shell.Alive() {
		t.Errorf("job alive %v, shell alive %v", job.Alive(), s.target.Shell.Alive())
	}
	if st := s.Status(); st.Signal != "SIGKILL" {
		t.Errorf("shell status %v, want killed by SIGKILL", st)
	}
}

// processesWith lists processes whose command line contains token.
func processesWith(t *testing.T, token string) []int {
	t.Helper()
	snap, err := proc.Scan()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, st := range snap.Descendants(0) {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(st.PID), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), token) {
			pids = append(pids, st.PID)
		}
	}
	return pids
}

// TestShellStartFailureKeepsCgroups: a shell that cannot start for a reason
// of its own (here: it does not exist) does not turn cgroups off for the
// sessions after it.
func TestShellStartFailureKeepsCgroups(t *testing.T) {
	b := newTestBackend(t, func(c *Config) { c.ShellPath = filepath.Join(t.TempDir(), "no-such-shell") })
	cg := b.newCgroup("probe")
	if cg == nil {
		t.Skip("cgroup v2 is not available here")
	}
	if err := cg.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-missing", OwnerID: "owner"}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("spawn of a missing shell: %v, want fs.ErrNotExist", err)
	}
	if b.noCgroup.Load() {
		t.Error("a missing shell turned cgroups off for the backend")
	}
}

// TestCommandsCannotLeaveTheirCgroup: a command that writes its own pid
// to a cgroup outside its shell's leaf (the parent's cgroup.procs, dsh's
// own) would survive the session's close, which kills the leaf. The
// shell is born in a cgroup namespace rooted at its leaf. Where the cgroup2
// hierarchy is mounted with nsdelegate (systemd does that), namespaces are
// delegation boundaries and the kernel refuses the move; elsewhere the
// shell still gets its namespace, but the move succeeds, and the test says
// so and stops. Creating the namespace needs CAP_SYS_ADMIN: the test runs
// as root and is skipped otherwise.
func TestCommandsCannotLeaveTheirCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a cgroup namespace needs CAP_SYS_ADMIN")
	}
	b := newTestBackend(t, nil)
	s := spawn(t, b, t.TempDir())
	if s.target.Cgroup == nil {
		t.Skip("cgroup v2 is not available here")
	}
	// The shell is in a namespace of its own, rooted at its leaf.
	if out, _ := mustExec(t, s, `cat /proc/self/cgroup | grep '^0::'; readlink /proc/self/ns/cgroup`); !strings.HasPrefix(out, "0::/\n") || strings.Contains(out, mustReadlink(t, "/proc/self/ns/cgroup")) {
		t.Fatalf("the shell's cgroup view: %q, want a namespace of its own rooted at its leaf", out)
	}
	if !nsDelegate(t) {
		t.Skip("the cgroup2 hierarchy is not mounted with nsdelegate: a cgroup namespace is no boundary for moves here")
	}
	leaf := s.target.Cgroup.Path()
	for _, target := range []string{filepath.Dir(leaf), filepath.Dir(filepath.Dir(leaf))} {
		procs := filepath.Join(target, "cgroup.procs")
		out, _ := mustExec(t, s, fmt.Sprintf(`setsid sh -c 'echo $$ > %q' 2>/dev/null && echo escaped || echo contained`, procs))
		if strings.TrimSpace(out) != "contained" {
			t.Fatalf("a command moved itself to %s: %q", target, out)
		}
	}
}

func mustReadlink(t *testing.T, path string) string {
	t.Helper()
	target, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// nsDelegate reports whether the cgroup2 hierarchy is mounted with
// nsdelegate.
func nsDelegate(t *testing.T) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.Contains(line, " - cgroup2 ") {
			return strings.Contains(line, "nsdelegate")
		}
	}
	return false
}
