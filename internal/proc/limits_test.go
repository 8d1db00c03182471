//go:build linux

package proc

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/cgtest"
)

func TestCgroup1Dirs(t *testing.T) {
	mountinfo := []byte(`30 23 0:26 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids
31 23 0:27 / /sys/fs/cgroup/memory rw,relatime shared:10 - cgroup cgroup rw,memory
32 23 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:11 - cgroup cgroup rw,cpu,cpuacct
33 23 0:29 /sub /mnt/fs rw,relatime shared:11 - cgroup cgroup rw,freezer
34 23 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
`)
	self := []byte(`8:pids:/a
4:memory:/b/c
2:cpu,cpuacct:/
6:freezer:/sub/x
0::/
`)
	got := cgroup1Dirs(mountinfo, self)
	want := map[string]string{
		"pids":   "/sys/fs/cgroup/pids/a",
		"memory": "/sys/fs/cgroup/memory/b/c",
		"cpu":    "/sys/fs/cgroup/cpu,cpuacct",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for c, d := range want {
		if got[c] != d {
			t.Errorf("%s: %q, want %q", c, got[c], d)
		}
	}
}

func TestHeadroom(t *testing.T) {
	for bound, want := range map[int]int{32768: 256, 1024: 256, 512: 128, 8: 2, 1: 1} {
		if got := Headroom(bound); got != want {
			t.Errorf("Headroom(%d) = %d, want %d", bound, got, want)
		}
	}
}

// limitHost is the machine's, or a skip where it enforces none of the
// limits (no cgroup v1 controllers, no delegated v2). DSH_REQUIRE_LIMITS=1
// fails instead; DSH_REQUIRE_CGROUP2=1 fails unless cgroup v2 serves them
// all, for a CI with a delegated cgroup v2.
func limitHost(t *testing.T, l Limits) *LimitHost {
	t.Helper()
	h := FindLimitHost(l)
	if err := h.Check(l); err != nil {
		if os.Getenv("DSH_REQUIRE_LIMITS") == "1" || os.Getenv("DSH_REQUIRE_CGROUP2") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if os.Getenv("DSH_REQUIRE_CGROUP2") == "1" {
		for _, c := range l.controllers() {
			if m := h.Mechanism(c); m != "cgroup v2" {
				t.Fatalf("the %s limit is enforced by %s, want cgroup v2", c, m)
			}
		}
	}
	t.Logf("limits enforced by: memory %q, pids %q, cpu %q", h.Mechanism(ctlMemory), h.Mechanism(ctlPids), h.Mechanism(ctlCPU))
	return h
}

// enterBox puts the test process in a box of cgtest's where cgroup v1 can
// make one. Where it cannot (a cgroup v2 host), the tests that call it
// still run: their own limits are small, and what they start is bounded
// in number and size even if the code under test failed.
func enterBox(t *testing.T) {
	t.Helper()
	if box, err := cgtest.TryBox(t, 300, 512<<20); err == nil {
		box.Enter(t)
	} else {
		t.Log(err)
	}
}

func newLeavesForTest(t *testing.T, h *LimitHost, l Limits) *Leaves {
	t.Helper()
	name, err := LeafName("limits-test-" + strconv.Itoa(int(boxTestSeq.Add(1))))
	if err != nil {
		t.Fatal(err)
	}
	var cg *Cgroup
	if h.v2 {
		if cg, err = NewCgroup(name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cg.Kill(); eventually(t, "the v2 leaf to empty", func() bool { return cg.Close() == nil }) })
	}
	lv, err := h.NewLeaves(name, l, cg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eventually(t, "the leaves to be removed", func() bool {
			pids, _ := lv.Procs()
			for _, pid := range pids {
				syscallKill(pid)
			}
			return lv.Close() == nil
		})
	})
	return lv
}

// A shell started through Fork is born in its leaves, and its processes
// cannot exceed the pids limit; Hits says so once, with the value.
func TestLeavesPidsLimit(t *testing.T) {
	enterBox(t)
	l := Limits{Pids: 8}
	h := limitHost(t, l)
	lv := newLeavesForTest(t, h, l)
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	// Python gives up on a refused fork at once; bash would retry for half
	// a minute.
	cmd := exec.Command("python3", "-c", `
import os, subprocess
kids = []
for i in range(30):
    try:
        kids.append(subprocess.Popen(["sleep", "60"]))
    except OSError:
        pass
print("started", flush=True)
for k in kids:
    k.wait()
`)
	cmd.Stdout = out
	if err := lv.Fork(cmd.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	eventually(t, "the script to give up forking", func() bool {
		data, _ := os.ReadFile(out.Name())
		return strings.Contains(string(data), "started")
	})
	pids, err := lv.Procs()
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) == 0 || len(pids) > 8 {
		t.Errorf("%d processes in the leaf, want 1 to 8", len(pids))
	}
	if hit := lv.Hits(); hit.Pids != 8 || hit.Memory != 0 {
		t.Errorf("Hits = %+v, want the pids limit 8", hit)
	}
	if hit := lv.Hits(); hit != (Limits{}) {
		t.Errorf("Hits again = %+v, want nothing new", hit)
	}
	// The thread that forked went back: dsh itself is not in the leaf.
	self, _ := os.ReadFile("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/cgroup")
	if strings.Contains(string(self), "limits-test") {
		t.Errorf("the test process is in a shell's leaf: %s", self)
	}
	threads, _ := filepath.Glob("/proc/self/task/*/cgroup")
	for _, th := range threads {
		data, _ := os.ReadFile(th)
		if strings.Contains(string(data), "limits-test") {
			t.Errorf("thread %s stayed in a shell's leaf: %s", th, data)
		}
	}
}

// A memory hog in the leaves is ended by the OOM killer, its shell kept,
// and Hits reports the memory limit.
func TestLeavesMemoryLimit(t *testing.T) {
	enterBox(t)
	l := Limits{Memory: 64 << 20, Pids: 64, CPU: 0.5}
	h := limitHost(t, l)
	lv := newLeavesForTest(t, h, l)
	cmd := exec.Command("bash", "-c", `python3 -c 'x = b"x" * (400 << 20)'; echo "status $?"`)
	var b strings.Builder
	cmd.Stdout = &b
	if err := lv.Fork(cmd.Start); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the shell itself died: %v (%s)", err, b.String())
	}
	if got := strings.TrimSpace(b.String()); got != "status 137" {
		t.Errorf("the hog's status: %q, want status 137 (SIGKILL)", got)
	}
	if hit := lv.Hits(); hit.Memory != 64<<20 {
		t.Errorf("Hits = %+v, want the memory limit", hit)
	}
}

// A limit without its controller is refused with what is missing.
func TestLimitHostCheck(t *testing.T) {
	h := &LimitHost{why: map[string]string{"memory": "no memory controller: reasons"}, v1: map[string]string{"pids": "/x"}}
	err := h.Check(Limits{Memory: 1 << 30, Pids: 10})
	if !errors.Is(err, ErrLimitUnavailable) || !strings.Contains(err.Error(), "memory limit cannot be enforced here: no memory controller: reasons") {
		t.Errorf("Check = %v", err)
	}
	if strings.Contains(err.Error(), "pids") {
		t.Errorf("Check names pids, which is served: %v", err)
	}
	if err := h.Check(Limits{Pids: 10}); err != nil {
		t.Errorf("Check(pids) = %v", err)
	}
}

var boxTestSeq atomic.Uint64

func syscallKill(pid int) { _ = unix.Kill(pid, unix.SIGKILL) }

// EndSince ends a fork bomb started after the mark, at its limit, and
// leaves the earlier job alone.
func TestEndSinceForkBomb(t *testing.T) {
	box := cgtest.NewBox(t, 400, 512<<20)
	box.Enter(t)
	l := Limits{Pids: 64}
	h := limitHost(t, l)
	lv := newLeavesForTest(t, h, l)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	early := filepath.Join(dir, "early")
	cmd := exec.Command("bash", "-c", `sleep 1000 & echo $! >`+early+`; read <`+fifo+`; b(){ b & b & wait; }; b 2>/dev/null`)
	if err := lv.Fork(cmd.Start); err != nil {
		t.Fatal(err)
	}
	shellDone := make(chan error, 1)
	go func() { shellDone <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-shellDone
	})
	var sleepPID int
	eventually(t, "the early job", func() bool {
		data, _ := os.ReadFile(early)
		sleepPID, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		return sleepPID > 0
	})
	sleepID, err := IdentityOf(sleepPID)
	if err != nil {
		t.Fatal(err)
	}
	shell, err := IdentityOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	mark := Now()
	if err := os.WriteFile(fifo, []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bomb to reach the limit", func() bool { return lv.Hits().Pids > 0 })
	n, err := EndSince(t.Context(), shell, mark, 0, lv.Procs)
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("ended %d processes, want the bomb's dozens", n)
	}
	if !sleepID.Alive() {
		t.Error("the earlier job was ended too")
	}
	pids, _ := lv.Procs()
	for _, pid := range pids {
		if pid != shell.PID && pid != sleepPID {
			st, _ := ReadStat(pid)
			t.Errorf("left in the leaf: %d %+v", pid, st)
		}
	}
}

// BenchmarkLeavesFork is what a shell's start pays for its limits' cgroups
// (cgroup v1 here: a leaf made and removed, and the forking thread moved in
// and out), over a plain fork and exec of true.
func BenchmarkLeavesFork(b *testing.B) {
	h := FindLimitHost(Limits{Pids: 64})
	if err := h.Check(Limits{Pids: 64}); err != nil {
		b.Skip(err)
	}
	for _, limited := range []bool{false, true} {
		name := "plain"
		if limited {
			name = "leaves"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				cmd := exec.Command("/bin/true")
				if !limited {
					if err := cmd.Run(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				leaf, _ := LeafName("bench-" + strconv.Itoa(i))
				lv, err := h.NewLeaves(leaf, Limits{Pids: 64}, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := lv.Fork(cmd.Start); err != nil {
					b.Fatal(err)
				}
				cmd.Wait()
				if err := lv.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSweepStaleV1: in a cgroup v1 hierarchy, which has no cgroup.kill, a
// dead dsh's populated leaf has its processes killed one by one and is
// removed by the next sweep; another pid namespace's leaf is left alone.
func TestSweepStaleV1(t *testing.T) {
	h := limitHost(t, Limits{Pids: 64})
	if h.Mechanism(ctlPids) != "cgroup v1" {
		t.Skipf("pids are limited by %s here, not cgroup v1", h.Mechanism(ctlPids))
	}
	ns, err := pidNamespace()
	if err != nil {
		t.Fatal(err)
	}
	parent := filepath.Join(h.v1[ctlPids], "dsh-sweep-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := dead.Process.Pid // exited and reaped: no such process now
	// populate makes the leaf name and starts a process in it; the channel
	// says when it has exited.
	populate := func(name string) (string, <-chan error) {
		t.Helper()
		leaf := filepath.Join(parent, name)
		if err := os.Mkdir(leaf, 0o755); err != nil {
			t.Fatal(err)
		}
		p := exec.Command("sleep", "1000")
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		done := make(chan struct{})
		go func() { exited <- p.Wait(); close(done) }()
		t.Cleanup(func() {
			p.Process.Kill()
			<-done
			os.Remove(leaf)
		})
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(p.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
		return leaf, exited
	}
	t.Cleanup(func() { os.Remove(parent) }) // after the leaves' cleanups
	busy, busyGone := populate(strconv.FormatUint(ns, 10) + "-" + strconv.Itoa(pid) + "-1-busy")
	_, foreignGone := populate(strconv.FormatUint(ns+1, 10) + "-" + strconv.Itoa(pid) + "-1-foreign")

	sweepStale(parent, killLeafV1)
	select {
	case <-busyGone: // reaped, so its leaf is empty
	case <-time.After(deadline):
		t.Fatal("the shell of a dead dsh survived the sweep")
	}
	sweepStale(parent, killLeafV1) // the next sweep removes the now empty leaf
	if _, err := os.Stat(busy); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed stale leaf is still there: %v", err)
	}
	select {
	case err := <-foreignGone:
		t.Fatalf("the sweep killed another pid namespace's shell: %v", err)
	default:
	}
}

// TestLeavesRename: cgroup v1 renames the leaves in place, the shell and
// its limit with them; where cgroup v2 holds a limit, Rename refuses.
func TestLeavesRename(t *testing.T) {
	l := Limits{Pids: 64}
	h := limitHost(t, l)
	lv := newLeavesForTest(t, h, l)
	cmd := exec.Command("sleep", "1000")
	if err := lv.Fork(cmd.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	name, err := LeafName("limits-test-renamed")
	if err != nil {
		t.Fatal(err)
	}
	if !lv.Renamable() {
		if err := lv.Rename(name); !errors.Is(err, ErrLimitUnavailable) {
			t.Errorf("Rename with a cgroup v2 limit: %v", err)
		}
		return
	}
	old := lv.v1[ctlPids]
	if err := lv.Rename(name); err != nil {
		t.Fatal(err)
	}
	dir := lv.v1[ctlPids]
	if filepath.Base(dir) != name {
		t.Errorf("the pids leaf is %s, want the name %s", dir, name)
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old leaf %s: %v", old, err)
	}
	if max, _ := os.ReadFile(filepath.Join(dir, "pids.max")); strings.TrimSpace(string(max)) != "64" {
		t.Errorf("pids.max %q after the rename, want 64", max)
	}
	if pids, err := lv.Procs(); err != nil || !slices.Contains(pids, cmd.Process.Pid) {
		t.Errorf("procs %v (%v) lack the shell %d", pids, err, cmd.Process.Pid)
	}
}
