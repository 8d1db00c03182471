//go:build linux

package terminalbash

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// awaitWarm waits until n shells wait in b's pool.
func awaitWarm(t testing.TB, b *Backend, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := b.pool.waitReady(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// spawnAs starts a session of owner in cwd, closed at the test's end.
func spawnAs(t testing.TB, b *Backend, spec termapi.SpawnSpec) *session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	ts, err := b.Spawn(ctx, spec)
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	s := ts.(*session)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := s.Close(ctx, "test over"); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// freshProbe is what the model could ask a new shell to tell it apart
// from another: where it is, its variables (exported and not), history,
// its pid, jobs, the directory stack, its cgroups, its descriptors, what
// its first command finds in $_ and $?, its home.
const freshProbe = `echo "status=$? last=$_"; pwd; echo "pid=$$ ppid=$PPID bashpid=$BASHPID"; env | sort; echo ---; ` +
	`declare -p OLDPWD PWD SECONDS SHLVL HISTCMD 2>&1; history; jobs; dirs; set -o | sort; shopt | sort; ` +
	`(builtin set; builtin declare -f) | grep -v '^__dsh_\|^BASH_\|^_=\|^RANDOM=\|^SRANDOM=\|^EPOCH\|^LINENO=\|^PIPESTATUS=\|^BASHPID='; ` +
	`cat /proc/$$/cgroup; ls -l /proc/$$/fd | sed 's/^.*[0-9]:[0-9][0-9] //' | sed 's/dsh-shell-[^/]*/CTL/'; ls -a ~`

// TestWarmShellIsFresh: a session that takes a warm shell answers every
// question the model can ask of a new shell as a shell started for it
// does, once the per-session values (ids, pid, control directory, cgroup
// sequence) are put in common form.
func TestWarmShellIsFresh(t *testing.T) {
	t.Setenv("OLDPWD", "/nonexistent-oldpwd")
	// The shells read their history from it: a file no other test writes.
	hist := filepath.Join(t.TempDir(), "history")
	if err := os.WriteFile(hist, []byte("echo one\necho two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HISTFILE", hist)
	cwd := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(cwd, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cwd, pwdEnv string
	}{
		{"plain", cwd, ""},
		{"through a symlink", link, ""},
		{"inherited PWD", link, link},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.pwdEnv != "" {
				t.Setenv("PWD", tc.pwdEnv)
			}
			fresh := newTestBackend(t, nil)
			warm := newTestBackend(t, func(c *Config) { c.WarmShells = 1 })
			awaitWarm(t, warm, 1)
			pooled := warm.pool.ready[0].pid

			a := spawnAs(t, fresh, termapi.SpawnSpec{SessionID: "pty-probe", OwnerID: "owner-probe", Cwd: tc.cwd})
			b := spawnAs(t, warm, termapi.SpawnSpec{SessionID: "pty-probe", OwnerID: "owner-probe", Cwd: tc.cwd})
			if b.pid != pooled {
				t.Fatalf("the session's shell is %d, not the warm one %d", b.pid, pooled)
			}
			// The second command finds what the first left: history
			// saves the first line only, $_ is the first line's last.
			for _, probe := range []string{freshProbe, `echo "last=$_ seconds=$SECONDS"; history | tail -3; set -o | grep history`} {
				outA, _ := mustExec(t, a, probe)
				outB, _ := mustExec(t, b, probe)
				na, nb := normalizeProbe(outA, a), normalizeProbe(outB, b)
				if na != nb {
					t.Errorf("a warm shell differs from a fresh one:\n%s", lineDiff(na, nb))
				}
			}
		})
	}
}

var (
	cgroupSeqRE = regexp.MustCompile(`-[0-9]+-pty-probe`)
	ptsRE       = regexp.MustCompile(`/dev/pts/[0-9]+`)
	nonceRE     = regexp.MustCompile(`\b[0-9a-f]{16}\b`)
	// SECONDS counts whole seconds of the clock: a shell started (or
	// handed over) just before a second's end says 1 a moment later.
	secondsRE = regexp.MustCompile(`(SECONDS="?|seconds=)[01]\b`)
)

// normalizeProbe puts what differs between any two sessions in common
// form.
func normalizeProbe(out string, s *session) string {
	out = strings.ReplaceAll(out, strconv.Itoa(s.pid), "PID")
	out = strings.ReplaceAll(out, s.ctl.dir, "CTLDIR")
	out = ptsRE.ReplaceAllString(out, "/dev/pts/N")
	out = nonceRE.ReplaceAllString(out, "NONCE")
	out = secondsRE.ReplaceAllString(out, "${1}S")
	return cgroupSeqRE.ReplaceAllString(out, "-SEQ-pty-probe")
}

func lineDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	var d strings.Builder
	for i := range max(len(la), len(lb)) {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			d.WriteString("fresh: " + x + "\nwarm:  " + y + "\n")
		}
	}
	return d.String()
}

// TestWarmPoolRefills: each session that takes a warm shell makes the
// pool start another, and sessions keep taking them.
func TestWarmPoolRefills(t *testing.T) {
	b := newTestBackend(t, func(c *Config) { c.WarmShells = 2 })
	for i := range 4 {
		awaitWarm(t, b, 2)
		b.pool.mu.Lock()
		want := b.pool.ready[0].pid
		b.pool.mu.Unlock()
		s := spawnAs(t, b, termapi.SpawnSpec{SessionID: "pty-r" + strconv.Itoa(i), OwnerID: "owner-r", Cwd: t.TempDir()})
		if s.pid != want {
			t.Fatalf("session %d: shell %d, want the warm %d", i, s.pid, want)
		}
		out, _ := mustExec(t, s, "echo $DSH_PTY_SESSION_ID")
		if !strings.Contains(out, "pty-r"+strconv.Itoa(i)) {
			t.Errorf("session %d says %q", i, out)
		}
	}
	awaitWarm(t, b, 2)
	if got := b.pool.started.Load(); got != 6 {
		t.Errorf("the pool started %d shells for 4 sessions and 2 waiting, want 6", got)
	}
}

// TestWarmPoolSkipsOtherPolicies: a spawn that asks for another size or
// other limits starts a shell of its own and leaves the pool as it was.
func TestWarmPoolSkipsOtherPolicies(t *testing.T) {
	b := newTestBackend(t, func(c *Config) { c.WarmShells = 1 })
	awaitWarm(t, b, 1)
	pooled := b.pool.ready[0].pid
	s := spawnAs(t, b, termapi.SpawnSpec{SessionID: "pty-sized", OwnerID: "o", Policy: termapi.Policy{Size: termapi.Size{Rows: 10, Cols: 50}}})
	if s.pid == pooled {
		t.Fatal("a spawn of another size took the warm shell")
	}
	out, _ := mustExec(t, s, "stty size")
	if !strings.Contains(out, "10 50") {
		t.Errorf("stty size: %q", out)
	}
	awaitWarm(t, b, 1)
	if b.pool.ready[0].pid != pooled {
		t.Error("the warm shell changed")
	}
}

// TestWarmPoolOff: without warm shells no shell starts before a spawn
// asks for one, and a config past the bound is refused.
func TestWarmPoolOff(t *testing.T) {
	b := newTestBackend(t, nil)
	if b.pool != nil {
		t.Fatal("a pool without warmShells")
	}
	cfg := testConfig()
	cfg.WarmShells = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "warmShells") {
		t.Errorf("warmShells -1: %v", err)
	}
	cfg.Sandbox.Mode = termapi.SandboxReadOnly
	cfg.WarmShells = 2
	if sb, err := NewBackend(cfg, nil); err == nil {
		if sb.pool != nil {
			t.Error("a read-only sandbox got a pool")
		}
		sb.Close(context.Background())
	}
}

// TestWarmPoolClose: closing the backend ends the waiting shells, their
// cgroups and control directories with them.
func TestWarmPoolClose(t *testing.T) {
	cfg := testConfig()
	cfg.WarmShells = 3
	b, err := NewBackend(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitWarm(t, b, 3)
	var shells []proc.Identity
	var dirs []string
	for _, s := range b.pool.ready {
		shells = append(shells, s.target.Shell)
		dirs = append(dirs, s.ctl.dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i, sh := range shells {
		if sh.Alive() {
			t.Errorf("warm shell %d alive after close", sh.PID)
		}
		if _, err := os.Stat(dirs[i]); !os.IsNotExist(err) {
			t.Errorf("control directory %s: %v", dirs[i], err)
		}
	}
	if _, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-late", OwnerID: "o"}); err == nil {
		t.Error("spawn after close")
	}
}

// TestWarmShellCgroups: the cgroups of a warm shell are named after the
// session that takes it, and its limits hold there. cgroup v1 leaves are
// renamed; the v2 leaf keeps the pool's name only where the shell has a
// cgroup namespace of its own, in which it is "/" whatever its name.
func TestWarmShellCgroups(t *testing.T) {
	lim := LimitsConfig{Pids: 128}
	b := newTestBackend(t, func(c *Config) { c.WarmShells = 1; c.Limits = lim })
	if b.pool == nil {
		t.Skip("no pool with these limits here: ", b.unpoolable())
	}
	awaitWarm(t, b, 1)
	s := spawnAs(t, b, termapi.SpawnSpec{SessionID: "pty-cg", OwnerID: "o", Cwd: t.TempDir()})
	b.renames.Wait() // the renames the shell cannot see run in the background
	data, err := os.ReadFile("/proc/" + strconv.Itoa(s.pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if !strings.Contains(line, "/dsh/") {
			continue
		}
		leaf := line[strings.LastIndexByte(line, '/')+1:]
		switch {
		case strings.HasSuffix(leaf, "-pty-cg"):
			named++
		case strings.HasPrefix(line, "0::") && ownCgroupNamespace(s.pid):
		default:
			t.Errorf("cgroup %q is not named after the session", line)
		}
		if strings.Contains(line, ":pids:") {
			dir := filepath.Join("/sys/fs/cgroup/pids", line[strings.Index(line, ":pids:")+len(":pids:"):])
			if _, err := os.Stat(dir); err != nil {
				continue // the hierarchy is mounted elsewhere
			}
			if max, _ := os.ReadFile(filepath.Join(dir, "pids.max")); strings.TrimSpace(string(max)) != "128" {
				t.Errorf("pids.max of %s is %q, want 128", dir, max)
			}
		}
	}
	if named == 0 {
		t.Skipf("the shell has no cgroup of dsh's here: %s", data)
	}
	if s.caps.Limits.Pids != 128 {
		t.Errorf("capabilities say limits %+v", s.caps.Limits)
	}
}
