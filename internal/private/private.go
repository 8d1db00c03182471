package private

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNotPrivate is the error of a directory another user owns or can
// write, or a symlink standing where the directory should be.
var ErrNotPrivate = errors.New("not private to this user")

// Dir returns dsh's private directory, creating it: $XDG_RUNTIME_DIR/dsh,
// else dsh in the user cache directory ($XDG_CACHE_HOME or ~/.cache). Both
// lie below directories only this user can write, so a path in it cannot
// be re-created by anyone else even if a command deletes it (a shared
// sticky directory such as /tmp or /dev/shm offers no such thing: whoever
// gets there first after a deletion owns the name). The directory must be
// this user's, not a symlink, and is made 0700.
func Dir() (string, error) {
	var errs []error
	for _, base := range bases() {
		dir := filepath.Join(base, "dsh")
		if err := ensure(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		return dir, nil
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("neither XDG_RUNTIME_DIR nor a home directory is set"))
	}
	return "", fmt.Errorf("no private directory for dsh: %w", errors.Join(errs...))
}

func bases() []string {
	var out []string
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		out = append(out, d)
	}
	if d, err := os.UserCacheDir(); err == nil && filepath.IsAbs(d) {
		out = append(out, d)
	}
	return out
}

// ensure creates dir 0700 if it is missing and checks that it is private.
func ensure(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := Check(dir); err != nil {
		return err
	}
	// Ours, but perhaps made by hand with a wider mode: narrow it.
	return os.Chmod(dir, 0o700)
}

// Check reports whether dir is a directory of this user, not a symlink,
// that no other user can write (ErrNotPrivate otherwise).
func Check(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink: %w", dir, ErrNotPrivate)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: %w", dir, ErrNotPrivate)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d: %w", dir, st.Uid, ErrNotPrivate)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by others (mode %#o): %w", dir, fi.Mode().Perm(), ErrNotPrivate)
	}
	return nil
}

// ownerPrefix names the directories of ownerDir.
const ownerPrefix = "owner-"

// ownerDir returns the directory of one owner (agent) in dsh's private
// directory, creating it 0700: what belongs to that owner and its shells
// may read (its saved outputs) goes there. A sandboxed shell sees this
// directory of its owner's and nothing else of dsh's private directory,
// so the name is a function of the owner's id alone: the backend that
// starts the shell and the tool that saves the outputs find it apart.
func ownerDir(owner string) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, ownerPrefix+ownerName(owner))
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := Check(path); err != nil {
		return "", err
	}
	return path, nil
}

// ownerName is owner as a file name: itself when it is short and plain
// (dsh's owner ids are), else a hash of it.
func ownerName(owner string) string {
	plain := owner != "" && len(owner) <= 64 && owner[0] != '.'
	for _, r := range owner {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			plain = false
			break
		}
	}
	if plain {
		return owner
	}
	sum := sha256.Sum256([]byte(owner))
	return "h" + hex.EncodeToString(sum[:16])
}

// RemoveOwnerDir removes the owner's directory if it is empty and no one
// holds it (HoldOwnerDir, in any process), and creates nothing.
func RemoveOwnerDir(owner string) {
	for _, base := range bases() {
		removeUnheld(filepath.Join(base, "dsh", ownerPrefix+ownerName(owner)))
	}
}

// removeUnheld removes the directory at path if it is empty and no one
// holds a shared lock on it. The exclusive lock is taken without waiting:
// a holder means the directory is in use, which is the answer.
func removeUnheld(path string) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return
	}
	if same(fd, path) {
		_ = os.Remove(path) // fails, as it should, if it is not empty
	}
}

// HoldOwnerDir returns the owner's directory (ownerDir), held until
// release is called: RemoveOwnerDir, in this process or another, leaves
// it alone meanwhile. release removes it if it is empty and no one else
// holds it.
//
// The hold is a shared flock on the directory: the kernel counts holders
// across processes (two dsh processes may serve owners of the same id)
// and drops a dead process's hold with its descriptors.
func HoldOwnerDir(owner string) (path string, release func(), err error) {
	for range 100 {
		path, err = ownerDir(owner)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed between ownerDir's mkdir and its check
		}
		if err != nil {
			return "", nil, err
		}
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue // removed since ownerDir made it
		}
		if err != nil {
			return "", nil, fmt.Errorf("hold %s: %w", path, err)
		}
		if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
			unix.Close(fd)
			return "", nil, fmt.Errorf("hold %s: %w", path, err)
		}
		if !same(fd, path) {
			// A remover had it locked, and removed it, between our open and
			// our lock: what we hold is gone from the tree. Start again.
			unix.Close(fd)
			continue
		}
		var once sync.Once
		return path, func() {
			once.Do(func() {
				unix.Close(fd)
				RemoveOwnerDir(owner)
			})
		}, nil
	}
	return "", nil, fmt.Errorf("hold %s: removed under us 100 times running", path)
}

// same reports whether the open directory fd is still the one at path.
func same(fd int, path string) bool {
	var open, named unix.Stat_t
	if unix.Fstat(fd, &open) != nil || unix.Lstat(path, &named) != nil {
		return false
	}
	return open.Dev == named.Dev && open.Ino == named.Ino
}
