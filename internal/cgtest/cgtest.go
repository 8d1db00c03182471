//go:build linux

// Package cgtest gives a test a cgroup v1 memory group of its own, so that
// a test that makes a process grow (a memory hog, a large output) cannot
// take the machine with it when the code under test fails: the group's
// limit ends it there.
//
// The group is made below the test process's own memory cgroup, so it is
// bounded by whatever bounds the test too. Tests that need one skip where
// cgroup v1's memory controller is not mounted or not writable (no root).
// A Box (NewBox) bounds tasks too, against a fork bomb.
package cgtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// memoryRoot is where cgroup v1's memory controller is mounted.
const memoryRoot = "/sys/fs/cgroup/memory"

// Group is a memory cgroup made for one test.
type Group struct {
	path string
}

var seq atomic.Uint64

// Memory makes a memory cgroup limited to limit bytes (swap included, where
// the kernel accounts it), removed at the test's end once every process in
// it has been killed. It skips the test where that is not possible.
func Memory(t testing.TB, limit int64) *Group {
	t.Helper()
	own, err := ownMemoryCgroup()
	if err != nil {
		t.Skipf("no cgroup v1 memory controller: %v", err)
	}
	path := filepath.Join(memoryRoot, own, fmt.Sprintf("dsh-test-%d-%d", os.Getpid(), seq.Add(1)))
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup: %v", err)
	}
	g := &Group{path: path}
	t.Cleanup(func() {
		if err := g.remove(); err != nil {
			t.Errorf("cgtest: %v", err)
		}
	})
	if err := g.write("memory.limit_in_bytes", strconv.FormatInt(limit, 10)); err != nil {
		t.Fatal(err)
	}
	// With swap, the limit of memory and swap together; without it the
	// file may be missing (swapaccount=0), which is as good.
	if err := g.write("memory.memsw.limit_in_bytes", strconv.FormatInt(limit, 10)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return g
}

// ownMemoryCgroup is this process's memory cgroup, relative to the mount.
func ownMemoryCgroup() (string, error) {
	if _, err := os.Stat(filepath.Join(memoryRoot, "memory.limit_in_bytes")); err != nil {
		return "", err
	}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return parts[2], nil
			}
		}
	}
	return "", errors.New("this process is in no memory cgroup")
}

// Path is the group's directory.
func (g *Group) Path() string { return g.path }

// Add moves the process pid (all its threads) into the group; what it
// starts from then on is born there.
func (g *Group) Add(pid int) error {
	return g.write("cgroup.procs", strconv.Itoa(pid))
}

// OOMKills is how many processes the kernel's OOM killer has ended in the
// group.
func (g *Group) OOMKills() (int, error) {
	data, err := os.ReadFile(filepath.Join(g.path, "memory.oom_control"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("no oom_kill count in memory.oom_control (kernel older than 4.13)")
}

// MaxUsage is the group's peak memory use, in bytes.
func (g *Group) MaxUsage() (int64, error) {
	data, err := os.ReadFile(filepath.Join(g.path, "memory.max_usage_in_bytes"))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

func (g *Group) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(g.path, file), []byte(value), 0); err != nil {
		return fmt.Errorf("cgtest: write %s to %s: %w", value, file, err)
	}
	return nil
}

// remove kills what is left in the group and removes it.
func (g *Group) remove() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(filepath.Join(g.path, "cgroup.procs"))
		if err != nil {
			return err
		}
		pids := strings.Fields(string(data))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v outlived SIGKILL in %s", pids, g.path)
		}
		// A killed process leaves the group when it is reaped, by a
		// parent the test does not control: check again shortly.
		time.Sleep(10 * time.Millisecond)
	}
	return os.Remove(g.path)
}
