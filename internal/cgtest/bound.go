//go:build linux

package cgtest

// A Box bounds both tasks and memory, for tests that make processes
// multiply (a fork bomb) as well as grow, and can hold the test process
// itself, so that what it starts is born inside.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// v1Root is where cgroup v1's controllers are mounted, one directory each.
const v1Root = "/sys/fs/cgroup"

// Box is a pids and memory cgroup (cgroup v1) made for one test.
type Box struct {
	dirs map[string]string // controller → directory
}

var boxSeq atomic.Uint64

// NewBox makes a cgroup v1 pids cgroup bounded to pids tasks and a memory
// cgroup bounded to memory bytes (swap included where accounted), below
// this process's own, and removes them at the test's end once every
// process in them has been killed. It skips the test where cgroup v1's
// pids and memory controllers are not mounted or not writable, and fails
// it there when DSH_REQUIRE_LIMITS=1 (CI, where they must be).
func NewBox(t testing.TB, pids int, memory int64) *Box {
	t.Helper()
	b, err := TryBox(t, pids, memory)
	if err != nil {
		if os.Getenv("DSH_REQUIRE_LIMITS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return b
}

// TryBox is NewBox, but it returns an error where NewBox skips the test.
func TryBox(t testing.TB, pids int, memory int64) (*Box, error) {
	t.Helper()
	b := &Box{dirs: map[string]string{}}
	name := fmt.Sprintf("dsh-test-box-%d-%d", os.Getpid(), boxSeq.Add(1))
	for _, c := range []string{"pids", "memory"} {
		own, err := ownV1(c)
		if err == nil {
			dir := filepath.Join(v1Root, c, own, name)
			if err = os.Mkdir(dir, 0o755); err == nil {
				b.dirs[c] = dir
				continue
			}
		}
		for _, dir := range b.dirs {
			os.Remove(dir)
		}
		return nil, fmt.Errorf("cgtest: no cgroup v1 %s cgroup for a box: %w", c, err)
	}
	t.Cleanup(func() {
		if err := b.remove(); err != nil {
			t.Errorf("cgtest: %v", err)
		}
	})
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(write(filepath.Join(b.dirs["pids"], "pids.max"), strconv.Itoa(pids)))
	must(write(filepath.Join(b.dirs["memory"], "memory.limit_in_bytes"), strconv.FormatInt(memory, 10)))
	if err := write(filepath.Join(b.dirs["memory"], "memory.memsw.limit_in_bytes"), strconv.FormatInt(memory, 10)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return b, nil
}

// ownV1 is this process's cgroup in controller c's v1 hierarchy.
func ownV1(c string) (string, error) {
	if _, err := os.Stat(filepath.Join(v1Root, c, "cgroup.procs")); err != nil {
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
		for name := range strings.SplitSeq(parts[1], ",") {
			if name == c {
				return parts[2], nil
			}
		}
	}
	return "", fmt.Errorf("this process is in no %s cgroup", c)
}

// Add moves process pid, all its threads, into the box; what it starts
// from then on is born there.
func (b *Box) Add(pid int) error {
	for _, dir := range b.dirs {
		if err := write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// Enter moves the test process itself into the box until the test ends:
// everything it starts, and cgroups it makes below its own, are bounded by
// the box.
func (b *Box) Enter(t testing.TB) {
	t.Helper()
	back := map[string]string{}
	for c := range b.dirs {
		own, err := ownV1(c)
		if err != nil {
			t.Fatal(err)
		}
		back[c] = filepath.Join(v1Root, c, own)
	}
	if err := b.Add(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	// Registered after the box's removal, so it runs first.
	t.Cleanup(func() {
		for _, dir := range back {
			if err := write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
				t.Errorf("cgtest: leave the box: %v", err)
			}
		}
	})
}

// PeakTasks is the most tasks the box has held at once (pids.peak), or -1
// where the kernel does not say.
func (b *Box) PeakTasks() int {
	data, err := os.ReadFile(filepath.Join(b.dirs["pids"], "pids.peak"))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return -1
	}
	return n
}

// Tasks is how many tasks the box holds now.
func (b *Box) Tasks() (int, error) {
	data, err := os.ReadFile(filepath.Join(b.dirs["pids"], "pids.current"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// PidsDir is the box's pids cgroup directory.
func (b *Box) PidsDir() string { return b.dirs["pids"] }

// remove kills whatever is left in the box (and below it), waits for it to
// go and removes the box's cgroups, children first.
func (b *Box) remove() error {
	deadline := time.Now().Add(30 * time.Second)
	var errs []error
	for _, dir := range b.dirs {
		for {
			err := removeTree(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, err)
				break
			}
			time.Sleep(20 * time.Millisecond) // the kernel reaps asynchronously; nothing to wait on in v1
		}
	}
	return errors.Join(errs...)
}

// removeTree kills the processes of dir and below and removes the
// directories, deepest first.
func removeTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			p, _ := os.FindProcess(pid)
			_ = p.Kill()
		}
	}
	return os.Remove(dir)
}

func write(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0); err != nil {
		return fmt.Errorf("cgtest: write %s to %s: %w", value, path, err)
	}
	return nil
}
