//go:build linux

package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Limits bound what one shell and everything it starts may use together. A
// zero field sets no bound.
type Limits struct {
	Memory int64   // bytes
	Pids   int     // processes and threads at once
	CPU    float64 // cores
}

// ErrLimitUnavailable is wrapped by the error that says why a limit cannot
// be enforced on this machine.
var ErrLimitUnavailable = errors.New("cannot be enforced here")

// The controllers a limit needs, by Limits field.
const (
	ctlMemory = "memory"
	ctlPids   = "pids"
	ctlCPU    = "cpu"
)

var limitControllers = []string{ctlMemory, ctlPids, ctlCPU}

// LimitHost is how this machine enforces limits: per controller, cgroup v2
// where the controller is delegated to dsh's cgroup, else cgroup v1 where
// that controller's hierarchy is mounted and dsh may create cgroups in it.
// It is found once, at load (FindLimitHost); a controller that neither
// offers is recorded with the reason, which Check reports.
type LimitHost struct {
	// v1 maps a controller to dsh's own cgroup in its v1 hierarchy.
	v1 map[string]string
	// v2 is set when cgroup v2 serves some controllers: the directory the
	// shells' leaves go in (dsh's cgroup/dsh) has them in its
	// subtree_control.
	v2    bool
	v2ctl map[string]bool
	// why says, per controller neither serves, what is missing.
	why map[string]string
	// tasksBound is the lowest task bound of dsh's own pids cgroups and the
	// kernel's (pid_max, threads-max); shellTasks is what all shells may
	// have together, so that dsh keeps Headroom tasks for its threads.
	tasksBound, shellTasks int
}

// Headroom is how many tasks dsh keeps for itself below the lowest bound on
// its tasks (its pids cgroups, pid_max, threads-max, RLIMIT_NPROC): all the
// shells together stop forking that far below it, so that a fork bomb in one
// of them cannot stop dsh from making a thread (which the Go runtime cannot
// survive). A quarter of a bound below 1024.
func Headroom(bound int) int { return min(256, max(bound/4, 1)) }

// FindLimitHost looks at this machine's cgroups once. It never fails: what
// it cannot use is recorded per controller, for Check to report. cgroup v2
// controllers are turned on for the shells (which can move dsh into a
// leaf of its own cgroup, see enableV2) only for the limits need sets: the
// configured ones. A controller v2 could give but need does not ask for is
// served by cgroup v1 where that has it, and is unavailable otherwise.
func FindLimitHost(need Limits) *LimitHost {
	h := &LimitHost{v1: map[string]string{}, v2ctl: map[string]bool{}, why: map[string]string{}}
	mountinfo, err1 := os.ReadFile("/proc/self/mountinfo")
	self, err2 := os.ReadFile("/proc/self/cgroup")
	if err := errors.Join(err1, err2); err != nil {
		for _, c := range limitControllers {
			h.why[c] = err.Error()
		}
		return h
	}
	v2why := h.findV2(mountinfo, self, need.controllers())
	v1 := cgroup1Dirs(mountinfo, self)
	for _, c := range limitControllers {
		if h.v2ctl[c] {
			continue
		}
		dir, ok := v1[c]
		if !ok {
			h.why[c] = fmt.Sprintf("no %s controller: %s, and cgroup v1 has no %s hierarchy mounted", c, v2why[c], c)
			continue
		}
		if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK, unix.AT_EACCESS); err != nil {
			h.why[c] = fmt.Sprintf("no %s controller: %s, and dsh may not create cgroups in %s (cgroup v1): %v", c, v2why[c], dir, err)
			continue
		}
		h.v1[c] = dir
	}
	h.tasksBound = h.findTasksBound(v1)
	if h.tasksBound > 0 {
		h.shellTasks = h.tasksBound - Headroom(h.tasksBound)
	}
	return h
}

// findV2 enables, where dsh's cgroup v2 is given them, the controllers in
// the directory that holds the shells' leaves, and says for the others why
// not.
func (h *LimitHost) findV2(mountinfo, self []byte, need []string) map[string]string {
	why := map[string]string{}
	base, err := cgroup2Dir(mountinfo, self)
	if err != nil {
		for _, c := range limitControllers {
			why[c] = err.Error()
		}
		return why
	}
	avail := strings.Fields(readString(filepath.Join(base, "cgroup.controllers")))
	var want []string
	for _, c := range limitControllers {
		switch {
		case !slices.Contains(avail, c):
			why[c] = fmt.Sprintf("cgroup v2 does not give dsh's cgroup %s the %s controller (it has: %s)", base, c, strings.Join(avail, " "))
		case !slices.Contains(need, c):
			why[c] = fmt.Sprintf("cgroup v2 gives dsh's cgroup %s the %s controller, but dsh turns it on only for a limit its config sets (terminal-bash's limits.%s)", base, c, c)
		default:
			want = append(want, c)
		}
	}
	if len(want) == 0 {
		return why
	}
	if err := enableV2(base, want); err != nil {
		for _, c := range want {
			why[c] = err.Error()
		}
		return why
	}
	h.v2 = true
	for _, c := range want {
		h.v2ctl[c] = true
	}
	return why
}

// enableV2 turns controllers on for the children of base and of base/dsh,
// where the shells' leaves are. cgroup v2 allows that only in a cgroup
// without processes of its own: where dsh's cgroup has them, dsh moves
// itself into a leaf of its own first, as a delegated service must.
func enableV2(base string, ctls []string) error {
	enable := func(dir string) error {
		var b strings.Builder
		for _, c := range ctls {
			b.WriteString("+" + c + " ")
		}
		return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.TrimSpace(b.String())), 0)
	}
	err := enable(base)
	if errors.Is(err, unix.EBUSY) {
		if err = moveSelfToLeaf(base); err == nil {
			if err = enable(base); err != nil {
				err = fmt.Errorf("cgroup v2: cannot hand controllers to the shells' cgroups: %s holds processes other than dsh (run dsh in a cgroup of its own with the controllers delegated, e.g. systemd-run --user --scope -p Delegate=yes): %w", base, err)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("cgroup v2: enable %s in %s: %w", strings.Join(ctls, " "), base, err)
	}
	parent := filepath.Join(base, cgroupParent)
	if err := unix.Mkdir(parent, 0o755); err != nil && err != unix.EEXIST {
		return fmt.Errorf("cgroup v2: %w", mkdirError(parent, err))
	}
	if err := enable(parent); err != nil {
		return fmt.Errorf("cgroup v2: enable %s in %s: %w", strings.Join(ctls, " "), parent, err)
	}
	leafBase.Store(&base)
	return nil
}

// moveSelfToLeaf moves this process into base/dsh-self-<owner tag>, so
// that base has no processes of its own. It refuses when base holds other
// processes: moving dsh would not empty it.
func moveSelfToLeaf(base string) error {
	pids, err := readPids(filepath.Join(base, "cgroup.procs"))
	if err != nil {
		return err
	}
	if slices.ContainsFunc(pids, func(pid int) bool { return pid != os.Getpid() }) {
		return fmt.Errorf("cgroup v2: %s holds processes other than dsh, so it cannot hand controllers to the shells' cgroups: start dsh alone in a cgroup with the controllers delegated (systemd-run --user --scope -p Delegate=yes dsh serve …)", base)
	}
	tag, err := ownerTag(os.Getpid())
	if err != nil {
		return err
	}
	leaf := filepath.Join(base, "dsh-self-"+tag)
	if err := unix.Mkdir(leaf, 0o755); err != nil && err != unix.EEXIST {
		return mkdirError(leaf, err)
	}
	// The leaves of shells stay below base, not below the new leaf.
	leafBase.Store(&base)
	return os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
}

// cgroup1Dirs maps each limit controller mounted as cgroup v1 to this
// process's cgroup directory in that hierarchy.
func cgroup1Dirs(mountinfo, self []byte) map[string]string {
	own := map[string]string{} // controller → path in its hierarchy
	for line := range bytes.Lines(self) {
		f := strings.SplitN(strings.TrimSpace(string(line)), ":", 3)
		if len(f) != 3 || f[1] == "" {
			continue
		}
		for c := range strings.SplitSeq(f[1], ",") {
			own[c] = f[2]
		}
	}
	out := map[string]string{}
	for line := range strings.Lines(string(mountinfo)) {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(fs) < 3 || fs[0] != "cgroup" {
			continue
		}
		root, mnt := unescapeMount(fields[3]), unescapeMount(fields[4])
		for opt := range strings.SplitSeq(fs[2], ",") {
			path, mine := own[opt]
			if !slices.Contains(limitControllers, opt) || !mine {
				continue
			}
			if _, done := out[opt]; done {
				continue
			}
			if rel, ok := cutPathPrefix(path, root); ok {
				out[opt] = filepath.Join(mnt, rel)
			}
		}
	}
	return out
}

// findTasksBound is the lowest bound on tasks over dsh's pids cgroups (its
// own and every ancestor's, v1 or v2), pid_max and threads-max; 0 when
// none can be read.
func (h *LimitHost) findTasksBound(v1 map[string]string) int {
	bound := math.MaxInt
	lower := func(path string) {
		if v, err := strconv.Atoi(strings.TrimSpace(readString(path))); err == nil && v > 0 {
			bound = min(bound, v)
		}
	}
	lower("/proc/sys/kernel/pid_max")
	lower("/proc/sys/kernel/threads-max")
	var dirs []string
	if d, ok := v1[ctlPids]; ok {
		dirs = append(dirs, d)
	}
	if b := leafBase.Load(); b != nil {
		dirs = append(dirs, *b)
	} else if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		if self, err := os.ReadFile("/proc/self/cgroup"); err == nil {
			if d, err := cgroup2Dir(mi, self); err == nil {
				dirs = append(dirs, d)
			}
		}
	}
	for _, d := range dirs {
		for dir := d; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
				break // above the mount
			}
			lower(filepath.Join(dir, "pids.max"))
			if dir == "/" {
				break
			}
		}
	}
	if bound == math.MaxInt {
		return 0
	}
	return bound
}

// ShellTasks is how many tasks all shells may have together: the lowest
// bound on dsh's tasks less Headroom; 0 when none is known.
func (h *LimitHost) ShellTasks() int { return h.shellTasks }

// Check says which of l this machine cannot enforce, and why, as an error
// wrapping ErrLimitUnavailable; nil when it can enforce all of l.
func (h *LimitHost) Check(l Limits) error {
	var errs []error
	for _, c := range l.controllers() {
		if why, bad := h.why[c]; bad {
			errs = append(errs, fmt.Errorf("%s limit %w: %s", c, ErrLimitUnavailable, why))
		}
	}
	return errors.Join(errs...)
}

// Mechanism says how the controller of a limit is enforced: "cgroup v2",
// "cgroup v1" or "" when it is not.
func (h *LimitHost) Mechanism(controller string) string {
	switch {
	case h.v2ctl[controller]:
		return "cgroup v2"
	case h.v1[controller] != "":
		return "cgroup v1"
	}
	return ""
}

func (l Limits) controllers() []string {
	var out []string
	if l.Memory > 0 {
		out = append(out, ctlMemory)
	}
	if l.Pids > 0 {
		out = append(out, ctlPids)
	}
	if l.CPU > 0 {
		out = append(out, ctlCPU)
	}
	return out
}

// leafBase, once set, is the cgroup v2 directory below which the shells'
// leaves go (base/dsh/<leaf>): dsh's cgroup as it was before dsh moved
// itself into a leaf of its own.
var leafBase atomic.Pointer[string]

// readString reads a small file, "" on error.
func readString(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(data)
}

// Leaves are the cgroups one shell's limits live in: its cgroup v2 leaf
// (the Cgroup, which also holds it for cleanup) where v2 serves a
// controller, and one leaf per cgroup v1 hierarchy that serves one. The
// pids leaf is made whenever a pids controller exists, limit or not: the
// shells' common parent bounds them all below dsh's own bound.
type Leaves struct {
	host   *LimitHost
	limits Limits
	v2     *Cgroup
	v1     map[string]string // controller → leaf directory
	// at holds the counters at the last Hits, to report what is new;
	// oomFile and pidsFile stay open for them (a pread costs a
	// microsecond, an open and a read several).
	mu                sync.Mutex
	at                hitCounts
	oomFile, pidsFile *os.File
}

type hitCounts struct{ oom, pidsMax int64 }

// NewLeaves makes the cgroups of a shell named name (a LeafName) under
// the limits l, which Check must have accepted. cg is the shell's cgroup
// v2 leaf (nil where there is none); where v2 serves a controller it must
// be there. Start the shell with Fork.
func (h *LimitHost) NewLeaves(name string, l Limits, cg *Cgroup) (*Leaves, error) {
	if err := h.Check(l); err != nil {
		return nil, err
	}
	lv := &Leaves{host: h, limits: l, v2: cg, v1: map[string]string{}}
	for _, c := range limitControllers {
		need := slices.Contains(l.controllers(), c) || c == ctlPids
		switch {
		case !need:
		case h.v2ctl[c]:
			if cg == nil {
				lv.Close()
				return nil, fmt.Errorf("%s limit: %w: no cgroup v2 leaf for the shell", c, ErrLimitUnavailable)
			}
			// The shared parent is removed with its last leaf and made
			// again without controllers: turn them on (again); existing
			// leaves get their files at once.
			parent := filepath.Dir(cg.Path())
			if err := writeFile(filepath.Join(parent, "cgroup.subtree_control"), "+"+c); err != nil {
				lv.Close()
				return nil, fmt.Errorf("%s limit: %w", c, err)
			}
			if c == ctlPids && h.shellTasks > 0 {
				if err := writeFile(filepath.Join(parent, "pids.max"), strconv.Itoa(h.shellTasks)); err != nil {
					lv.Close()
					return nil, fmt.Errorf("pids: bound the shells' tasks: %w", err)
				}
			}
		case h.v1[c] != "":
			parent := filepath.Join(h.v1[c], cgroupParent)
			leaf := filepath.Join(parent, name)
			var err error
			// Another dsh removing the shared parent with its last leaf
			// can do so between the two mkdirs: then again.
			for range 8 {
				if err = h.makeV1Parent(c, parent); err != nil {
					lv.Close()
					return nil, err
				}
				err = unix.Mkdir(leaf, 0o755)
				if err == unix.EEXIST && unix.Rmdir(leaf) == nil {
					err = unix.Mkdir(leaf, 0o755)
				}
				if err != unix.ENOENT {
					break
				}
			}
			if err != nil {
				lv.Close()
				return nil, fmt.Errorf("%s limit: %w", c, mkdirError(leaf, err))
			}
			lv.v1[c] = leaf
		}
	}
	if err := lv.apply(); err != nil {
		lv.Close()
		return nil, err
	}
	return lv, nil
}

var v1SweepOnce sync.Map // parent directory → *sync.Once

// makeV1Parent makes the shells' common v1 cgroup of controller c, sweeps
// the stale leaves of dead dsh processes from it once, and bounds the
// tasks of all shells (pids) so that dsh keeps its headroom.
func (h *LimitHost) makeV1Parent(c, parent string) error {
	if err := unix.Mkdir(parent, 0o755); err != nil && err != unix.EEXIST {
		return fmt.Errorf("%s limit: %w", c, mkdirError(parent, err))
	}
	once, _ := v1SweepOnce.LoadOrStore(parent, new(sync.Once))
	once.(*sync.Once).Do(func() { sweepStale(parent, killLeafV1) })
	if c == ctlPids && h.shellTasks > 0 {
		if err := writeFile(filepath.Join(parent, "pids.max"), strconv.Itoa(h.shellTasks)); err != nil {
			return fmt.Errorf("pids: bound the shells' tasks: %w", err)
		}
	}
	return nil
}

// apply writes the limits into the leaves.
func (lv *Leaves) apply() error {
	l := lv.limits
	type setting struct{ ctl, file, value string }
	var v1, v2 []setting
	if l.Memory > 0 {
		m := strconv.FormatInt(l.Memory, 10)
		v1 = append(v1, setting{ctlMemory, "memory.limit_in_bytes", m}, setting{ctlMemory, "memory.memsw.limit_in_bytes", m})
		v2 = append(v2, setting{ctlMemory, "memory.max", m}, setting{ctlMemory, "memory.swap.max", "0"})
	}
	if l.Pids > 0 {
		p := strconv.Itoa(l.Pids)
		v1 = append(v1, setting{ctlPids, "pids.max", p})
		v2 = append(v2, setting{ctlPids, "pids.max", p})
	}
	if l.CPU > 0 {
		const period = 100000
		quota := strconv.FormatInt(int64(math.Ceil(l.CPU*period)), 10)
		v1 = append(v1, setting{ctlCPU, "cpu.cfs_period_us", strconv.Itoa(period)}, setting{ctlCPU, "cpu.cfs_quota_us", quota})
		v2 = append(v2, setting{ctlCPU, "cpu.max", quota + " " + strconv.Itoa(period)})
	}
	for _, s := range v1 {
		if dir, ok := lv.v1[s.ctl]; ok {
			if err := writeFile(filepath.Join(dir, s.file), s.value); err != nil && !optional(s.file, err) {
				return fmt.Errorf("%s limit: %w", s.ctl, err)
			}
		}
	}
	for _, s := range v2 {
		if lv.host.v2ctl[s.ctl] && lv.v2 != nil {
			if err := writeFile(filepath.Join(lv.v2.Path(), s.file), s.value); err != nil && !optional(s.file, err) {
				return fmt.Errorf("%s limit: %w", s.ctl, err)
			}
		}
	}
	return nil
}

// optional reports a file a kernel may lack (swap accounting off).
func optional(file string, err error) bool {
	return (file == "memory.memsw.limit_in_bytes" || file == "memory.swap.max") && errors.Is(err, fs.ErrNotExist)
}

func writeFile(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0); err != nil {
		return fmt.Errorf("write %s to %s: %w", value, path, err)
	}
	return nil
}

// Limits are the limits the leaves enforce.
func (lv *Leaves) Limits() Limits { return lv.limits }

// Fork runs start, which must fork the shell from the calling thread (as
// exec.Cmd.Start does), on a thread that has joined the cgroup v1 leaves,
// so that the shell is born in them: not even its first instruction runs
// outside. The thread goes back to dsh's own cgroups afterwards; a thread
// that cannot is retired with its goroutine, never reused. (cgroup v2
// needs none of this: the shell is cloned into its leaf, see Cgroup.FD.)
func (lv *Leaves) Fork(start func() error) error {
	if len(lv.v1) == 0 {
		return start()
	}
	type outcome struct{ err error }
	done := make(chan outcome, 1)
	go func() {
		runtime.LockOSThread()
		tid := strconv.Itoa(unix.Gettid())
		var joined []string
		back := func() bool {
			ok := true
			for _, c := range joined {
				if writeFile(filepath.Join(lv.host.v1[c], "tasks"), tid) != nil {
					ok = false
				}
			}
			return ok
		}
		var err error
		for _, c := range sortedKeys(lv.v1) {
			if err = writeFile(filepath.Join(lv.v1[c], "tasks"), tid); err != nil {
				err = fmt.Errorf("%s limit: join the shell's cgroup: %w", c, err)
				break
			}
			joined = append(joined, c)
		}
		if err == nil {
			err = start()
		}
		if back() {
			runtime.UnlockOSThread()
		}
		done <- outcome{err}
	}()
	return (<-done).err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Renamable reports whether Rename can name the leaves anew: not when a
// cgroup v2 controller enforces one of the limits, whose settings are in
// the v2 leaf (cgroup v2 renames nothing, and a move would leave them).
func (lv *Leaves) Renamable() bool {
	for _, c := range lv.limits.controllers() {
		if lv.host.v2ctl[c] {
			return false
		}
	}
	return true
}

// Rename gives the cgroup v1 leaves the name name (a LeafName), which
// cgroup v1 does in place: the processes, the limits and the open
// counters stay. The v2 leaf is the Cgroup's to move (Cgroup.Move).
func (lv *Leaves) Rename(name string) error {
	if !lv.Renamable() {
		return fmt.Errorf("rename the shell's cgroups: %w: a cgroup v2 controller holds its limits", ErrLimitUnavailable)
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	for c, dir := range lv.v1 {
		to := filepath.Join(filepath.Dir(dir), name)
		if err := unix.Rename(dir, to); err != nil {
			return fmt.Errorf("rename the shell's %s cgroup: %w", c, &os.LinkError{Op: "rename", Old: dir, New: to, Err: err})
		}
		lv.v1[c] = to
	}
	return nil
}

// Procs lists the processes in the cgroup v1 pids leaf (every process the
// shell ever started that is still alive, whatever it did), or nil
// without one.
func (lv *Leaves) Procs() ([]int, error) {
	lv.mu.Lock()
	dir, ok := lv.v1[ctlPids]
	lv.mu.Unlock()
	if !ok {
		return nil, nil
	}
	return readPids(filepath.Join(dir, "cgroup.procs"))
}

func readPids(path string) ([]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Hits reports which limits the shell's processes ran into since the
// previous call, with their values: Memory when the OOM killer ended one
// of them, Pids when a fork or clone was refused. CPU is never reported:
// a CPU limit slows a command down and ends nothing.
func (lv *Leaves) Hits() Limits {
	if lv.limits.Memory == 0 && lv.limits.Pids == 0 {
		return Limits{}
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	now := lv.counts()
	var hit Limits
	if lv.limits.Memory > 0 && now.oom > lv.at.oom {
		hit.Memory = lv.limits.Memory
	}
	if lv.limits.Pids > 0 && now.pidsMax > lv.at.pidsMax {
		hit.Pids = lv.limits.Pids
	}
	lv.at = now
	return hit
}

// counts reads the cumulative counters of limit hits. Caller holds mu.
func (lv *Leaves) counts() hitCounts {
	var c hitCounts
	if lv.limits.Memory > 0 {
		if lv.oomFile == nil {
			if dir, ok := lv.v1[ctlMemory]; ok {
				lv.oomFile, _ = os.Open(filepath.Join(dir, "memory.oom_control"))
			} else if lv.host.v2ctl[ctlMemory] && lv.v2 != nil {
				lv.oomFile, _ = os.Open(filepath.Join(lv.v2.Path(), "memory.events"))
			}
		}
		c.oom = keyed(lv.oomFile, "oom_kill")
	}
	if lv.limits.Pids > 0 {
		if lv.pidsFile == nil {
			if dir, ok := lv.v1[ctlPids]; ok {
				lv.pidsFile, _ = os.Open(filepath.Join(dir, "pids.events"))
			} else if lv.host.v2ctl[ctlPids] && lv.v2 != nil {
				lv.pidsFile, _ = os.Open(filepath.Join(lv.v2.Path(), "pids.events"))
			}
		}
		c.pidsMax = keyed(lv.pidsFile, "max")
	}
	return c
}

// keyed reads the value of "key N" in a flat-keyed cgroup file, open as
// f; 0 when it is not there.
func keyed(f *os.File, key string) int64 {
	if f == nil {
		return 0
	}
	var buf [512]byte
	n, err := f.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0
	}
	for line := range strings.Lines(string(buf[:n])) {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// Close removes the cgroup v1 leaves (the v2 leaf is the Cgroup's to
// remove). A leaf with processes left cannot be removed: Close reports it
// and a later call tries again.
func (lv *Leaves) Close() error {
	lv.mu.Lock()
	for _, f := range []*os.File{lv.oomFile, lv.pidsFile} {
		if f != nil {
			f.Close()
		}
	}
	lv.oomFile, lv.pidsFile = nil, nil
	defer lv.mu.Unlock() // a Rename may run at the same time
	var errs []error
	for c, dir := range lv.v1 {
		if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
			errs = append(errs, &fs.PathError{Op: "rmdir", Path: dir, Err: err})
			continue
		}
		delete(lv.v1, c)
		// The shared parent goes with its last leaf.
		unix.Rmdir(filepath.Dir(dir))
	}
	return errors.Join(errs...)
}

// killLeafV1 ends the processes of a cgroup v1 leaf, which has no
// cgroup.kill: one by one, sparing dsh's own.
func killLeafV1(leaf string) {
	pids, _ := readPids(filepath.Join(leaf, "cgroup.procs"))
	for _, pid := range pids {
		if !protectedPID(pid) {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// NoLimitHost is a host that enforces no limit, each for reason: where
// cgroups cannot be looked at, and for tests.
func NoLimitHost(reason string) *LimitHost {
	h := &LimitHost{v1: map[string]string{}, v2ctl: map[string]bool{}, why: map[string]string{}}
	for _, c := range limitControllers {
		h.why[c] = reason
	}
	return h
}
