package private

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
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

// ownerPrefix names the directories of OwnerDir.
const ownerPrefix = "owner-"

// OwnerDir returns the directory of one owner (agent) in dsh's private
// directory, creating it 0700: what belongs to that owner and its shells
// may read (its saved outputs) goes there. A sandboxed shell sees this
// directory of its owner's and nothing else of dsh's private directory,
// so the name is a function of the owner's id alone: the backend that
// starts the shell and the tool that saves the outputs find it apart.
func OwnerDir(owner string) (string, error) {
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

// RemoveOwnerDir removes the owner's directory of OwnerDir if it is
// empty and nothing in this process holds it (HoldOwnerDir), and creates
// nothing.
func RemoveOwnerDir(owner string) {
	holds.Lock()
	defer holds.Unlock()
	if holds.n[owner] > 0 {
		return
	}
	for _, base := range bases() {
		_ = os.Remove(filepath.Join(base, "dsh", ownerPrefix+ownerName(owner)))
	}
}

// holds counts, per owner, the holders of its directory in this process:
// a sandboxed shell binds it at its start, so a shell of the same owner
// that closes meanwhile must not remove it, empty as it may be.
var holds struct {
	sync.Mutex
	n map[string]int
}

// HoldOwnerDir is OwnerDir, held until release is called: RemoveOwnerDir
// leaves it alone meanwhile. release removes it if it is empty and no one
// else holds it.
func HoldOwnerDir(owner string) (path string, release func(), err error) {
	holds.Lock()
	if holds.n == nil {
		holds.n = make(map[string]int)
	}
	holds.n[owner]++
	holds.Unlock()
	path, err = OwnerDir(owner)
	var once sync.Once
	release = func() {
		once.Do(func() {
			holds.Lock()
			if holds.n[owner]--; holds.n[owner] == 0 {
				delete(holds.n, owner)
			}
			holds.Unlock()
			RemoveOwnerDir(owner)
		})
	}
	if err != nil {
		release()
		return "", nil, err
	}
	return path, release, nil
}
