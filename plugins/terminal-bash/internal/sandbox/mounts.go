//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Landlock decides who may write a file's content, not who may change its
// mode, owner, times or extended attributes: no Landlock ABI has a right
// for those. The mount namespace closes that gap. Every mount is made
// read-only, which refuses chmod, chown, utimes and setxattr with EROFS on
// any file below it, and the writable paths are bound back read-write on
// top, where a build still chmods and touches what it makes. Device nodes
// stay usable on a read-only mount: writing /dev/null or a terminal is not
// a change of the file system.
//
// The same namespace hides what a shell must not read although it may
// read everything else (dsh's private directory, behind an empty tmpfs),
// keeps the git metadata of writable repositories read-only (hooks and
// config run code outside the sandbox the next time the user runs git),
// and gives the shell a devpts instance of its own.

// isolateFiles sets up this process's mount namespace for p. It needs
// CAP_SYS_ADMIN in the namespace's user namespace.
func isolateFiles(p Policy) error {
	// Nothing done here may reach dsh's namespace, nor anything mounted
	// there later reach this one unrestricted.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	writable := slices.Clone(p.WritableDirs)
	slices.SortFunc(writable, func(a, b string) int { return len(a) - len(b) })
	// A directory below another writable one (or named twice) is
	// writable through it already, and moving its copy onto the other's
	// would fail (ELOOP); one below the private directory is covered by
	// the tmpfs and bound back after it.
	var outside, inside []string // of the private directory
	for _, dir := range writable {
		switch {
		case p.Private != "" && within(dir, p.Private):
			if !slices.Contains(inside, dir) {
				inside = append(inside, dir)
			}
		case !slices.ContainsFunc(outside, func(o string) bool { return within(dir, o) }):
			outside = append(outside, dir)
		}
	}
	writable = append(slices.Clone(outside), inside...)
	// The writable trees are copied before everything turns read-only,
	// and the copies put back on top afterwards.
	clones := make(map[string]int, len(writable))
	defer func() {
		for _, fd := range clones {
			unix.Close(fd)
		}
	}()
	for _, dir := range writable {
		fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("writable directory %s: %w", dir, err)
		}
		clones[dir] = fd
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("make every mount read-only (mount_setattr needs Linux 5.12): %w", err)
	}
	attach := func(dir string) error {
		if err := unix.MoveMount(clones[dir], "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("bind writable directory %s: %w", dir, err)
		}
		return nil
	}
	for _, dir := range outside {
		if err := attach(dir); err != nil {
			return err
		}
	}
	for _, dir := range outside {
		if err := protectGit(dir); err != nil {
			return err
		}
	}
	if p.Private != "" {
		if err := hidePrivate(p.Private, p.Keep); err != nil {
			return err
		}
	}
	for _, dir := range inside {
		if err := attach(dir); err != nil {
			return err
		}
	}
	if err := privateDevpts(); err != nil {
		return err
	}
	// The working directory was entered before the mounts: enter it
	// again, through them, or a shell started in its workspace would
	// find it read-only.
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	if err := unix.Chdir(wd); err != nil {
		return fmt.Errorf("working directory %s: %w", wd, err)
	}
	return nil
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// hidePrivate covers dir with an empty read-only tmpfs and binds the kept
// directories below it back, read-only.
func hidePrivate(dir string, keep []string) error {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil // nothing to hide
	}
	clones := make([]int, 0, len(keep))
	defer func() {
		for _, fd := range clones {
			unix.Close(fd)
		}
	}()
	rels := make([]string, 0, len(keep))
	for _, k := range keep {
		rel, err := filepath.Rel(dir, k)
		if err != nil || !within(k, dir) || rel == "." {
			return fmt.Errorf("%s is not below the private directory %s", k, dir)
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, k, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("keep %s: %w", k, err)
		}
		clones = append(clones, fd)
		rels = append(rels, rel)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=64k"); err != nil {
		return fmt.Errorf("hide the private directory %s: %w", dir, err)
	}
	for i, rel := range rels {
		at := filepath.Join(dir, rel)
		if err := os.MkdirAll(at, 0o700); err != nil {
			return fmt.Errorf("keep %s: %w", at, err)
		}
		if err := unix.MoveMount(clones[i], "", unix.AT_FDCWD, at, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("keep %s: %w", at, err)
		}
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, dir, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("hide the private directory %s: %w", dir, err)
	}
	return nil
}

// protectGit keeps what makes git run programs read-only in the
// repository at the top of a writable directory, and in its submodules:
// the hooks directory and the config (core.hooksPath, core.fsmonitor,
// aliases, filters). Commits still work; the git directory itself becomes
// a mount point, which cannot be renamed or removed, so no fresh one can
// take its place.
func protectGit(dir string) error {
	gitPath := filepath.Join(dir, ".git")
	fi, err := os.Lstat(gitPath)
	switch {
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission):
		// Out of this user's reach, and so of the shell's.
		return nil
	case err != nil:
		return fmt.Errorf("protect %s: %w", gitPath, err)
	case fi.Mode().IsRegular():
		// A worktree's or submodule's gitfile: it names the git directory.
		return readOnlyBind(gitPath)
	case !fi.IsDir():
		return nil
	}
	gitDirs := []string{gitPath}
	modules := filepath.Join(gitPath, "modules")
	_ = filepath.WalkDir(modules, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == modules {
			return nil
		}
		if _, err := os.Lstat(filepath.Join(path, "HEAD")); err == nil {
			gitDirs = append(gitDirs, path)
		}
		return nil
	})
	for _, g := range gitDirs {
		if err := unix.Mount(g, g, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("protect %s: %w", g, err)
		}
		// A missing hooks directory would be the agent's to create. Where
		// this user may not create it, neither may the shell.
		_ = os.Mkdir(filepath.Join(g, "hooks"), 0o755)
		for _, name := range []string{"hooks", "config", "config.worktree"} {
			if err := readOnlyBind(filepath.Join(g, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// readOnlyBind binds path onto itself, read-only.
func readOnlyBind(path string) error {
	if _, err := os.Lstat(path); err != nil {
		return err
	}
	if err := unix.Mount(path, path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("protect %s: %w", path, err)
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, path, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("protect %s: %w", path, err)
	}
	return nil
}

// privateDevpts mounts a devpts instance of the shell's own at /dev/pts,
// and points /dev/ptmx at it: the terminals of dsh's user are out of
// sight, and a program that needs a new terminal (script, expect)
// gets one there.
func privateDevpts() error {
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount a devpts instance of the shell's own at /dev/pts: %w", err)
	}
	if fi, err := os.Lstat("/dev/ptmx"); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		if err := unix.Mount("/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/ptmx to the shell's devpts instance: %w", err)
		}
	}
	return nil
}
