//go:build linux

package proc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestCgroup2Dir(t *testing.T) {
	const (
		hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
			"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
			"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
		unified   = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
		container = "30 23 0:26 /kube/pod1 /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n"
		escaped   = "30 23 0:26 / /mnt/c\\040g rw - cgroup2 none rw\n"
		v1only    = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	)
	for _, tt := range []struct {
		name, mountinfo, self, want string
	}{
		{"hybrid, root cgroup", hybrid, "4:memory:/x\n0::/\n", "/sys/fs/cgroup/unified"},
		{"unified, user scope", unified, "0::/user.slice/user-1000.slice/session-2.scope\n", "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope"},
		{"mount of a subtree", container, "0::/kube/pod1/app\n", "/sys/fs/cgroup/app"},
		{"mount of exactly our cgroup", container, "0::/kube/pod1\n", "/sys/fs/cgroup"},
		{"escaped mount point", escaped, "0::/a\n", "/mnt/c g/a"},
	} {
		got, err := cgroup2Dir([]byte(tt.mountinfo), []byte(tt.self))
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		name, mountinfo, self string
	}{
		{"no cgroup2 mount", v1only, "4:memory:/x\n0::/\n"},
		{"not in a v2 hierarchy", hybrid, "4:memory:/x\n"},
		{"our cgroup outside the mounted subtree", container, "0::/kube/pod10\n"},
		{"relative path", unified, "0::x\n"},
	} {
		if got, err := cgroup2Dir([]byte(tt.mountinfo), []byte(tt.self)); !errors.Is(err, ErrCgroupUnavailable) {
			t.Errorf("%s: %q, %v; want ErrCgroupUnavailable", tt.name, got, err)
		}
	}
}

func TestNewCgroupRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", ".", "..", "a/b"} {
		if c, err := NewCgroup(name); err == nil {
			c.Close()
			t.Errorf("NewCgroup(%q) succeeded", name)
		}
	}
}

// testCgroup makes a cgroup for the test, or skips it where cgroup v2 is
// not usable.
func testCgroup(t testing.TB) *Cgroup {
	t.Helper()
	c, err := newTestCgroup(t)
	if err != nil {
		t.Skipf("no per-shell cgroup here, the tracker is all there is: %v", err)
	}
	return c
}

// newTestCgroup makes a cgroup that is emptied and removed when the test
// ends. Only ErrCgroupUnavailable is returned; other failures fail the
// test.
func newTestCgroup(t testing.TB) (*Cgroup, error) {
	t.Helper()
	c, err := NewCgroup(fmt.Sprintf("test-%d-%s", os.Getpid(), filepath.Base(t.TempDir())))
	if errors.Is(err, ErrCgroupUnavailable) {
		return nil, err
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !c.isRemoved() {
			c.Kill()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			c.WaitEmpty(ctx)
			if err := c.Close(); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return c, nil
}

// TestCgroupHoldsEscapes: the setsid process that no tracker can find
// after the fact is in the cgroup, and cgroup.kill ends it with the rest.
func TestCgroupHoldsEscapes(t *testing.T) {
	fds := fdCount(t)
	c := testCgroup(t)
	sh := startShell(t, c)
	nohup, double, setsid := escapes(t, sh)
	procs, err := c.Procs()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []Identity{sh.id, nohup, double, setsid} {
		if !slices.Contains(procs, id.PID) {
			t.Errorf("cgroup procs %v miss %v", procs, id)
		}
	}

	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := c.WaitEmpty(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []Identity{sh.id, nohup, double, setsid} {
		if id.Alive() {
			t.Errorf("%v survived cgroup.kill", id)
		}
	}
	if procs, err := c.Procs(); err != nil || len(procs) != 0 {
		t.Errorf("after WaitEmpty: procs %v, %v", procs, err)
	}
	sh.close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the leaf is still there: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if c.FD() != -1 {
		t.Errorf("FD after Close = %d", c.FD())
	}
	if got := fdCount(t); got != fds {
		t.Errorf("open descriptors: %d before, %d after", fds, got)
	}
}

// startInCgroup starts a plain child inside c.
func startInCgroup(t *testing.T, c *Cgroup, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: c.FD()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

func TestCgroupWaitEmptyRespectsContext(t *testing.T) {
	c := testCgroup(t)
	startInCgroup(t, c, "sleep", "1000")

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := c.WaitEmpty(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitEmpty past its deadline: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.WaitEmpty(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("WaitEmpty cancelled: %v", err)
	}
	if err := c.Close(); err == nil {
		t.Error("Close removed a populated cgroup")
	}
}

// TestCgroupSharedParent: shells of several dsh processes create and remove
// their leaves under the one dsh directory at the same time, and the last
// to leave removes the directory while others are about to create theirs.
func TestCgroupSharedParent(t *testing.T) {
	probe := testCgroup(t) // skips where cgroups cannot be used
	prefix := filepath.Base(probe.Path()) + "-"
	if err := probe.Close(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			for j := range 8 {
				c, err := NewCgroup(fmt.Sprintf("%s%d-%d", prefix, i, j))
				if err == nil {
					err = c.Close()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(probe.Path()))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			t.Errorf("leaf %s left behind", e.Name())
		}
	}
}

// TestCgroupStaleLeaf: a leaf left by a dsh that died is reused when it is
// empty and refused while it holds processes.
func TestCgroupStaleLeaf(t *testing.T) {
	c := testCgroup(t)
	name := filepath.Base(c.Path())
	startInCgroup(t, c, "sleep", "1000")
	if dup, err := NewCgroup(name); err == nil {
		dup.Close()
		t.Fatal("NewCgroup took over a leaf that holds a process")
	} else if errors.Is(err, ErrCgroupUnavailable) {
		t.Errorf("a busy leaf reported as ErrCgroupUnavailable: %v", err)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := c.WaitEmpty(ctx); err != nil {
		t.Fatal(err)
	}
	// c is now what a dead dsh leaves behind: an empty leaf.
	again, err := NewCgroup(name)
	if err != nil {
		t.Fatalf("NewCgroup over an empty leftover: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close() // its leaf is already gone
}

// TestSweepStale: the leaves of a dsh that died without cleaning up are
// removed, and their processes killed; a live dsh's leaves, and the leaves
// of a dsh in another pid namespace (whose pid means nothing here), are
// left alone.
func TestSweepStale(t *testing.T) {
	probe := testCgroup(t) // skips where cgroups are unavailable
	parent := filepath.Dir(probe.Path())
	ns, err := pidNamespace()
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := dead.Process.Pid                // exited and reaped: no such process now
	other := exec.Command("sleep", "1000") // a live process, not a dsh
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	live, err := IdentityOf(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(name string) *Cgroup {
		t.Helper()
		c, err := NewCgroup(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// populate starts a process in c and returns a channel that says when
	// it has exited.
	populate := func(c *Cgroup) <-chan error {
		t.Helper()
		p := exec.Command("sleep", "1000")
		p.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.FD()}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		done := make(chan struct{})
		go func() { exited <- p.Wait(); close(done) }()
		t.Cleanup(func() { p.Process.Kill(); <-done })
		return exited
	}
	empty := leaf(fmt.Sprintf("%d-%d-1-empty", ns, pid))
	busy := leaf(fmt.Sprintf("%d-%d-1-busy", ns, pid))
	busyGone := populate(busy)
	// A live pid with another start time: the owner's pid was recycled.
	reused := leaf(fmt.Sprintf("%d-%d-%d-reused", ns, live.PID, live.StartTime+1))
	// Another namespace's dsh, pid unknown here: its shell must live.
	foreign := leaf(fmt.Sprintf("%d-%d-1-foreign", ns+1, pid))
	foreignGone := populate(foreign)
	// An older dsh's name: not judged either.
	old := leaf(fmt.Sprintf("%d-old", pid))

	sweepStale(parent, killLeaf)
	for _, c := range []*Cgroup{empty, reused} {
		if _, err := os.Stat(c.Path()); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the empty stale leaf %s is still there: %v", filepath.Base(c.Path()), err)
		}
	}
	select {
	case <-busyGone:
	case <-time.After(deadline):
		t.Fatal("the shell of a dead dsh survived the sweep")
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := busy.WaitEmpty(ctx); err != nil {
		t.Fatal(err)
	}
	sweepStale(parent, killLeaf) // the next sweep removes the now empty leaf
	if _, err := os.Stat(busy.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the killed stale leaf is still there: %v", err)
	}
	select {
	case err := <-foreignGone:
		t.Fatalf("the sweep killed another pid namespace's shell: %v", err)
	default:
	}
	for _, c := range []*Cgroup{probe, foreign, old} {
		if _, err := os.Stat(c.Path()); err != nil {
			t.Errorf("the sweep touched %s: %v", filepath.Base(c.Path()), err)
		}
	}
}

// TestCgroupMove: the leaf's processes move to a leaf of the new name
// (cgroup v2 renames nothing), the old leaf goes, and the Cgroup refers to
// the new one from then on: its procs, its descriptor, its kill.
func TestCgroupMove(t *testing.T) {
	c := testCgroup(t)
	old := c.Path()
	cmd := startInCgroup(t, c, "sleep", "1000")
	name := filepath.Base(old) + "-moved"
	if err := c.Move(name); err != nil {
		t.Fatal(err)
	}
	if filepath.Base(c.Path()) != name {
		t.Errorf("path %s after the move, want the name %s", c.Path(), name)
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old leaf %s: %v", old, err)
	}
	procs, err := c.Procs()
	if err != nil || !slices.Equal(procs, []int{cmd.Process.Pid}) {
		t.Errorf("procs %v (%v), want %d", procs, err, cmd.Process.Pid)
	}
	// A child forked from the descriptor now is born in the new leaf.
	kid := startInCgroup(t, c, "sleep", "1000")
	procs, _ = c.Procs()
	if !slices.Contains(procs, kid.Process.Pid) {
		t.Errorf("procs %v lack the child started after the move, %d", procs, kid.Process.Pid)
	}
	if err := c.Move("bad/name"); err == nil {
		t.Error("moved to a name with a slash")
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := c.WaitEmpty(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
