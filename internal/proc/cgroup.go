//go:build linux

package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrCgroupUnavailable reports that no per-shell cgroup can be made here:
// there is no cgroup v2 hierarchy, this process may not create or populate
// cgroups in it, or the kernel lacks cgroup.kill (Linux < 5.14). Callers
// then rely on the Tracker alone.
var ErrCgroupUnavailable = errors.New("cgroup v2 unavailable")

// cgroupParent is the directory, below this process's own cgroup, that
// holds one leaf per shell. Several dsh processes may share it.
const cgroupParent = "dsh"

// Cgroup is a cgroup v2 leaf holding one shell and everything it starts.
// No process can leave a cgroup by forking, setsid or reparenting, so
// killing the cgroup reaches whatever the shell ever started; only a
// process with the rights to write cgroup.procs elsewhere can move out.
//
// The leaf has no controllers enabled: it is used for membership and
// cgroup.kill only, which keeps clear of the "no internal processes" rule
// and needs no delegation of controllers.
type Cgroup struct {
	path string // the leaf

	mu      sync.Mutex
	fd      int // O_PATH directory fd, -1 once closed
	removed bool
}

// NewCgroup creates the leaf <cgroup2 mount>/<own cgroup>/dsh/<name>. name
// must be unique among the shells of every dsh process sharing this
// cgroup, and start with this process's owner tag (LeafName makes one) so
// that a later sweep can tell whether its owner is gone. Start the shell
// inside it with SysProcAttr{UseCgroupFD: true, CgroupFD: c.FD()}.
func NewCgroup(name string) (*Cgroup, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return nil, fmt.Errorf("cgroup name %q: not a single path element", name)
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCgroupUnavailable, err)
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCgroupUnavailable, err)
	}
	base, err := cgroup2Dir(mountinfo, self)
	if err != nil {
		return nil, err
	}
	if b := leafBase.Load(); b != nil {
		base = *b // dsh moved itself into a leaf of its own (enableV2)
	}
	// Moving a process between cgroups, which CLONE_INTO_CGROUP does for
	// the shell, needs write access to cgroup.procs of the common ancestor:
	// our own cgroup.
	if err := unix.Faccessat(unix.AT_FDCWD, filepath.Join(base, "cgroup.procs"), unix.W_OK, unix.AT_EACCESS); err != nil {
		return nil, fmt.Errorf("%w: %s is not writable: %w", ErrCgroupUnavailable, base, err)
	}
	parent := filepath.Join(base, cgroupParent)
	sweepOnce.Do(func() { sweepStale(parent, killLeaf) })
	c := &Cgroup{path: filepath.Join(parent, name), fd: -1}
	if err := c.create(); err != nil {
		unix.Rmdir(parent) // fails, as it should, while a sibling uses it
		return nil, err
	}
	return c, nil
}

var sweepOnce sync.Once

// LeafName is a leaf name for this process's shell called suffix:
// "<pid namespace>-<pid>-<start time>-<suffix>". A sweep can then tell a
// dead owner for certain: only an owner in its own pid namespace is
// judged, by pid and start time, which no recycled pid repeats.
func LeafName(suffix string) (string, error) {
	tag, err := ownerTag(os.Getpid())
	if err != nil {
		return "", err
	}
	return tag + "-" + suffix, nil
}

// ownerTag is "<pid namespace inode>-<pid>-<start time>" of pid.
func ownerTag(pid int) (string, error) {
	ns, err := pidNamespace()
	if err != nil {
		return "", err
	}
	id, err := IdentityOf(pid)
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(ns, 10) + "-" + strconv.Itoa(id.PID) + "-" + strconv.FormatUint(id.StartTime, 10), nil
}

// pidNamespace is the inode number of this process's pid namespace.
func pidNamespace() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0, fmt.Errorf("pid namespace: %w", err)
	}
	return st.Ino, nil
}

// parseLeaf reads the owner of a leaf LeafName named.
func parseLeaf(name string) (ns uint64, owner Identity, ok bool) {
	f := strings.SplitN(name, "-", 4)
	if len(f) != 4 {
		return 0, Identity{}, false
	}
	ns, err1 := strconv.ParseUint(f[0], 10, 64)
	pid, err2 := strconv.Atoi(f[1])
	start, err3 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || pid <= 0 {
		return 0, Identity{}, false
	}
	return ns, Identity{PID: pid, StartTime: start}, true
}

// sweepStale deals with the leaves that dead dsh processes left behind: a
// dsh killed with SIGKILL never runs its cleanup, and its shells live on in
// their leaves. Only leaves whose owner is certainly dead are touched: an
// owner of this pid namespace (a pid means nothing across namespaces, and
// dsh instances in containers may share a cgroup) whose pid is gone or
// belongs to a process started at another time. An empty one is removed,
// a populated one killed (and removed by a later sweep, once the kernel
// has reaped its processes). Leaves named otherwise (by an older dsh) are
// left alone: a leaf kept too long only delays a cleanup, a wrong kill
// ends a live dsh's shells. kill ends a populated leaf's processes: the
// way differs between cgroup v2 and v1.
func sweepStale(parent string, kill func(leaf string)) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	self, err := pidNamespace()
	if err != nil {
		return
	}
	for _, e := range ents {
		ns, owner, ok := parseLeaf(e.Name())
		if !e.IsDir() || !ok || ns != self || owner.PID == os.Getpid() {
			continue
		}
		if st, err := ReadStat(owner.PID); err == nil && st.StartTime == owner.StartTime {
			continue // alive, or a zombie not yet reaped: not ours to judge
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ESRCH) {
			continue // cannot tell
		}
		leaf := filepath.Join(parent, e.Name())
		if unix.Rmdir(leaf) == nil {
			continue
		}
		kill(leaf)
	}
}

// killLeaf ends every process of a cgroup v2 leaf at once.
func killLeaf(leaf string) {
	_ = os.WriteFile(filepath.Join(leaf, "cgroup.kill"), []byte("1"), 0)
}

// create makes the leaf, and the shared parent when needed, and opens it.
func (c *Cgroup) create() error {
	parent := filepath.Dir(c.path)
	var err error
	// Another dsh closing its last shell removes an empty parent, which
	// can happen between our two mkdirs; then the parent is made again.
	for range 8 {
		if err = unix.Mkdir(parent, 0o755); err != nil && err != unix.EEXIST {
			return mkdirError(parent, err)
		}
		if err = unix.Mkdir(c.path, 0o755); err == unix.EEXIST {
			// A leftover from a dsh that died before its Close. It can
			// only be removed when it is empty, which also proves that
			// nobody uses it.
			if rmErr := unix.Rmdir(c.path); rmErr != nil {
				return fmt.Errorf("cgroup %s already exists and is in use: %w", c.path, rmErr)
			}
			err = unix.Mkdir(c.path, 0o755)
		}
		if err != unix.ENOENT {
			break
		}
	}
	if err != nil {
		return mkdirError(c.path, err)
	}
	fail := func(err error) error {
		unix.Rmdir(c.path)
		return err
	}
	if _, err := os.Stat(filepath.Join(c.path, "cgroup.kill")); err != nil {
		return fail(fmt.Errorf("%w: no cgroup.kill (Linux 5.14+): %w", ErrCgroupUnavailable, err))
	}
	if err := unix.Faccessat(unix.AT_FDCWD, filepath.Join(c.path, "cgroup.procs"), unix.W_OK, unix.AT_EACCESS); err != nil {
		return fail(fmt.Errorf("%w: %s is not writable: %w", ErrCgroupUnavailable, c.path, err))
	}
	fd, err := unix.Open(c.path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("open cgroup %s: %w", c.path, err))
	}
	c.fd = fd
	return nil
}

func mkdirError(path string, err error) error {
	switch err {
	case unix.EACCES, unix.EPERM, unix.EROFS:
		return fmt.Errorf("%w: mkdir %s: %w", ErrCgroupUnavailable, path, err)
	}
	return &fs.PathError{Op: "mkdir", Path: path, Err: err}
}

// cgroup2Dir locates this process's cgroup v2 directory from the texts of
// /proc/self/mountinfo and /proc/self/cgroup.
func cgroup2Dir(mountinfo, self []byte) (string, error) {
	var own string
	found := false
	for line := range bytes.Lines(self) {
		if p, ok := bytes.CutPrefix(bytes.TrimRight(line, "\n"), []byte("0::")); ok {
			own, found = string(p), true
			break
		}
	}
	if !found || !strings.HasPrefix(own, "/") {
		return "", fmt.Errorf("%w: not in a cgroup v2 hierarchy", ErrCgroupUnavailable)
	}
	for line := range strings.Lines(string(mountinfo)) {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fields, fstype := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(fstype) < 1 || fstype[0] != "cgroup2" {
			continue
		}
		root, mnt := unescapeMount(fields[3]), unescapeMount(fields[4])
		// A mount of a subtree (container, bind mount) shows our path
		// below its root.
		rel, ok := cutPathPrefix(own, root)
		if !ok {
			continue
		}
		return filepath.Join(mnt, rel), nil
	}
	return "", fmt.Errorf("%w: no cgroup2 mount holds %s", ErrCgroupUnavailable, own)
}

// cutPathPrefix returns path relative to root when root is path or one of
// its ancestors.
func cutPathPrefix(path, root string) (string, bool) {
	if root == "/" {
		return path, true
	}
	rest, ok := strings.CutPrefix(path, root)
	switch {
	case !ok || (rest != "" && rest[0] != '/'):
		return "", false
	case rest == "":
		return "/", true
	}
	return rest, true
}

// unescapeMount undoes the octal escapes (\040 for a space, ...) of
// mountinfo paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Path is the leaf's directory.
func (c *Cgroup) Path() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.path
}

// Move gives the leaf's processes a new leaf called name, beside the
// current one, and removes the current one: how a shell started before
// its session had a name (a warm pool's) gets the leaf named after its
// session. cgroup v2 renames no cgroup (EPERM), so the processes move,
// which is a write to cgroup.procs per process and no exec. The leaf must
// hold only processes that do not fork meanwhile (an idle shell); one
// left behind fails the move, and the old leaf stays. FD then refers to
// the new leaf.
func (c *Cgroup) Move(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("cgroup name %q: not a single path element", name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 || c.removed {
		return fmt.Errorf("cgroup %s: closed", c.path)
	}
	next := &Cgroup{path: filepath.Join(filepath.Dir(c.path), name), fd: -1}
	if err := next.create(); err != nil {
		return err
	}
	pids, err := readPids(filepath.Join(c.path, "cgroup.procs"))
	if err == nil {
		procs := filepath.Join(next.path, "cgroup.procs")
		for _, pid := range pids {
			if err = writeFile(procs, strconv.Itoa(pid)); err != nil && !errors.Is(err, unix.ESRCH) {
				break
			}
			err = nil
		}
	}
	if err == nil {
		if err = unix.Rmdir(c.path); err != nil {
			err = &fs.PathError{Op: "rmdir", Path: c.path, Err: err}
		}
	}
	if err != nil {
		// Back where they were, so that the old leaf still holds them all.
		if back, rerr := readPids(filepath.Join(next.path, "cgroup.procs")); rerr == nil {
			for _, pid := range back {
				writeFile(filepath.Join(c.path, "cgroup.procs"), strconv.Itoa(pid))
			}
		}
		unix.Close(next.fd)
		unix.Rmdir(next.path)
		return fmt.Errorf("move cgroup %s to %s: %w", c.path, name, err)
	}
	unix.Close(c.fd)
	c.path, c.fd = next.path, next.fd
	return nil
}

// FD is an O_PATH directory descriptor of the leaf, for
// syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}: the kernel then
// creates the shell inside the cgroup (clone3 CLONE_INTO_CGROUP), so not
// even its first fork happens outside. It stays valid until Close and is -1
// after.
func (c *Cgroup) FD() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fd
}

// Procs returns the processes in the leaf and any cgroups below it, in pid
// order.
func (c *Cgroup) Procs() ([]int, error) {
	var pids []int
	leaf := c.Path()
	err := filepath.WalkDir(leaf, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != leaf && errors.Is(err, fs.ErrNotExist) {
				return nil // a child cgroup removed during the walk
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			if path != leaf && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		for f := range strings.FieldsSeq(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cgroup procs: %w", err)
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

// Kill sends SIGKILL to every process in the cgroup and below, atomically
// with respect to forks (cgroup.kill).
func (c *Cgroup) Kill() error {
	f, err := os.OpenFile(filepath.Join(c.Path(), "cgroup.kill"), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("cgroup kill: %w", err)
	}
	_, err = f.Write([]byte("1"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cgroup kill: %w", err)
	}
	return nil
}

// WaitEmpty returns once no process is left in the cgroup or below, or when
// ctx ends. It sleeps on inotify: the kernel reports a modification of
// cgroup.events whenever its "populated" line changes.
func (c *Cgroup) WaitEmpty(ctx context.Context) error {
	events := filepath.Join(c.Path(), "cgroup.events")
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("cgroup wait: inotify: %w", err)
	}
	f := os.NewFile(uintptr(in), "inotify")
	defer f.Close()
	// Watch before the first look, so a change in between is not lost.
	if _, err := unix.InotifyAddWatch(in, events, unix.IN_MODIFY); err != nil {
		return fmt.Errorf("cgroup wait: watch %s: %w", events, err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		f.SetReadDeadline(deadline)
	}
	stop := onCancel(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 4096)
	for {
		populated, err := readPopulated(events)
		if err != nil {
			return fmt.Errorf("cgroup wait: %w", err)
		}
		if !populated {
			return nil
		}
		if _, err := f.Read(buf); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("cgroup wait: %w", ctx.Err())
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// ctx's deadline, seen by the poller a moment before ctx
				// itself reports it.
				return fmt.Errorf("cgroup wait: %w", context.DeadlineExceeded)
			}
			return fmt.Errorf("cgroup wait: %w", err)
		}
	}
}

// readPopulated reads the "populated" line of cgroup.events.
func readPopulated(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return strings.TrimSpace(v) != "0", nil
		}
	}
	return false, fmt.Errorf("%s has no populated line", path)
}

// Close removes the leaf, and the shared dsh directory when no other shell
// uses it, and closes the descriptor. It fails (EBUSY) while processes are
// left in the cgroup; a later call tries again. Once it has succeeded it
// does nothing.
func (c *Cgroup) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	if c.removed {
		return nil
	}
	if err := unix.Rmdir(c.path); err != nil && err != unix.ENOENT {
		return &fs.PathError{Op: "rmdir", Path: c.path, Err: err}
	}
	c.removed = true
	// The shared parent goes too unless another shell's leaf is in it
	// (EBUSY, ENOTEMPTY) or a concurrent creator is about to use it; such a
	// creator retries its mkdir.
	unix.Rmdir(filepath.Dir(c.path))
	return nil
}

// isRemoved reports whether Close has removed the leaf.
func (c *Cgroup) isRemoved() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removed
}
