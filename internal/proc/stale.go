//go:build linux

package proc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// OwnerTag names this process for what it leaves in a directory shared
// with other processes of its user: "<pid namespace>-<pid>-<start time>",
// as cgroup leaves are named (LeafName). A later process can then tell for
// certain that the one that made a thing is gone (OwnerGone).
func OwnerTag() (string, error) { return ownerTag(os.Getpid()) }

// OwnerGone reports whether the process an OwnerTag names, at the start of
// name (the tag, "-", anything), is certainly gone: it is of this pid
// namespace (a pid means nothing across namespaces) and its pid is free
// or belongs to a process started at another time. A name without a tag,
// a process that lives (or is a zombie not yet reaped), or one that
// cannot be read is not gone.
func OwnerGone(name string) bool {
	ns, owner, ok := parseLeaf(name)
	if !ok || owner.PID == os.Getpid() {
		return false
	}
	self, err := pidNamespace()
	if err != nil || ns != self {
		return false
	}
	st, err := ReadStat(owner.PID)
	switch {
	case err == nil:
		return st.StartTime != owner.StartTime
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ESRCH):
		return true
	}
	return false
}

// SweepGone removes the directories in dir named prefix+OwnerTag+"-…" whose
// owner is gone (OwnerGone), that belong to this user and are not
// symlinks: what a process killed outright (SIGKILL) left behind. It
// returns the paths it removed. Anything else is left alone: a directory
// kept too long only costs space, a wrong removal breaks a live process.
func SweepGone(dir, prefix string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() || !OwnerGone(rest) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(path)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
			continue
		}
		if os.RemoveAll(path) == nil {
			removed = append(removed, path)
		}
	}
	return removed
}
