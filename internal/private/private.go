package private

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
