package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// What confines a shell must not be writable from inside the confinement:
// a sandboxed shell that rewrites its deployment (mode:
// danger-full-access) or replaces a plugin executable runs unconfined at
// the next start. Nor may another user change them, as sshd's StrictModes
// refuses an authorized_keys file they could write.

// CheckTrust refuses a plan whose deployment file (deploymentFile, "" for
// none) or plugin executables lie below a directory a plugin lets its
// shells write (Plugin.ShellWritable, given workdir; "" is the working
// directory), or could be written by a user other than this one and root
// (the file, or a directory above it). The error wraps ErrUntrusted and
// names the file, the directory and the entry.
func CheckTrust(plan *Plan, deploymentFile, workdir string) error {
	if workdir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("%w: working directory: %v", ErrUntrusted, err)
		}
		workdir = wd
	}
	type guarded struct{ path, what string }
	var files []guarded
	if deploymentFile != "" {
		files = append(files, guarded{deploymentFile, "the deployment file"})
	}
	for _, s := range plan.Steps {
		if s.Executable != "" {
			files = append(files, guarded{s.Executable, fmt.Sprintf("the executable of entry %q", s.Entry.Path)})
		}
	}
	if len(files) == 0 {
		return nil
	}
	for i, f := range files {
		real, err := realPath(f.path)
		if errors.Is(err, fs.ErrNotExist) && f.path == deploymentFile {
			// A document given with a file's name but not read from it:
			// nothing there to rewrite.
			files[i].path = ""
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %s %s: %v", ErrUntrusted, f.what, f.path, err)
		}
		files[i].path = real
		if err := ownedSafely(real); err != nil {
			return fmt.Errorf("%w: %s %s: %v", ErrUntrusted, f.what, f.path, err)
		}
	}
	for _, s := range plan.Steps {
		if s.Plugin.ShellWritable == nil {
			continue
		}
		for _, dir := range s.Plugin.ShellWritable(s.Config, workdir) {
			real, err := realPath(dir)
			if err != nil {
				continue // nothing there to write below
			}
			for _, f := range files {
				if f.path != "" && below(f.path, real) {
					return fmt.Errorf("%w: %s %s lies below %s, which entry %q lets its shells write: keep deployments and plugin executables outside the workspace and the writable paths", ErrUntrusted, f.what, f.path, dir, s.Entry.Path)
				}
			}
		}
	}
	return nil
}

// realPath is path absolute and with its symlinks resolved.
func realPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// below reports whether path is dir or lies below it.
func below(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// ownedSafely checks that path and every directory above it belong to
// this user or root and that nobody else may write them; a sticky
// directory (/tmp) may be open to all, since only the owner of a name in
// it may replace what is there.
func ownedSafely(path string) error {
	uid := uint32(os.Geteuid())
	for p, leaf := path, true; ; p, leaf = filepath.Dir(p), false {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return errors.New("no owner known")
		}
		switch {
		case st.Uid != uid && st.Uid != 0:
			return fmt.Errorf("%s belongs to uid %d, neither this user nor root", p, st.Uid)
		case fi.Mode().Perm()&0o022 != 0 && (leaf || fi.Mode()&fs.ModeSticky == 0):
			return fmt.Errorf("%s may be written by other users (mode %#o); chmod go-w it", p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
