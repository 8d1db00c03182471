//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/dshdev/dsh/internal/private"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// hostFiles is a session's directory of files (Session.WriteFile): made
// on first use in its owner's directory of dsh's private directory
// (private.HoldOwnerDir, held from then until the session closes), which
// the shell reads as it is, sandboxed too, and removed when the session
// closes. Files are made through the directory
// held open, so nothing put at a name beforehand is written to; a
// directory a command removed is replaced by a new one, never re-made by
// name. Safe for concurrent use.
type hostFiles struct {
	owner string
	mu    sync.Mutex
	dir   string
	base  string   // the owner's directory, held (release)
	root  *os.Root // dir, held open; nil until the first file
	// release lets go of the owner's directory; nil until the first file.
	release func()
}

// write does what req asks and returns the file's path.
func (f *hostFiles) write(req termapi.FileRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if f.root == nil {
			if req.Remove || req.Append {
				return "", fmt.Errorf("terminal-bash: file %s: no file of that name was written: %w", req.Name, fs.ErrNotExist)
			}
			if err := f.open(); err != nil {
				return "", err
			}
		}
		path := filepath.Join(f.dir, req.Name)
		err := f.apply(req)
		switch {
		case err == nil:
			return path, nil
		case errors.Is(err, fs.ErrNotExist) && !req.Append && !req.Remove && attempt == 0:
			// The directory has gone (a command's rm -rf): a new one.
			f.root.Close()
			f.root, f.dir = nil, ""
			continue
		case errors.Is(err, fs.ErrNotExist) && req.Remove:
			return path, nil
		}
		return "", fmt.Errorf("terminal-bash: file %s: %w", path, err)
	}
}

// apply writes or removes the file through the held directory.
func (f *hostFiles) apply(req termapi.FileRequest) error {
	if req.Remove {
		return f.root.Remove(req.Name)
	}
	flags := os.O_WRONLY | os.O_APPEND
	if !req.Append {
		// Made anew: nothing put at the name is written through. In a
		// directory that has gone, the create fails (fs.ErrNotExist).
		if err := f.root.Remove(req.Name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	file, err := f.root.OpenFile(req.Name, flags, 0o600)
	if err != nil {
		return err
	}
	_, err = file.Write(req.Data)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	return err
}

// open makes the directory in the owner's directory and holds it.
func (f *hostFiles) open() error {
	if f.release == nil {
		base, release, err := private.HoldOwnerDir(f.owner)
		if err != nil {
			return fmt.Errorf("terminal-bash: the owner's directory: %w", err)
		}
		f.base, f.release = base, release
	}
	base := f.base
	dir, err := os.MkdirTemp(base, "dsh-files-")
	if err != nil {
		return fmt.Errorf("terminal-bash: a directory of files: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		os.Remove(dir)
		return fmt.Errorf("terminal-bash: a directory of files: %w", err)
	}
	f.dir, f.root = dir, root
	return nil
}

// purge removes the directory and everything in it.
func (f *hostFiles) purge() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.release != nil {
		// After the files are gone: the owner's directory goes with the
		// last holder, if it is empty then.
		defer f.release()
		f.release = nil
	}
	if f.root == nil {
		return nil
	}
	f.root.Close()
	dir := f.dir
	f.root, f.dir = nil, ""
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("terminal-bash: remove the session's files: %w", err)
	}
	return nil
}

// WriteFile writes a file where the shell can read it: in the session's
// directory of files in its owner's directory. See termapi.Session.
func (s *session) WriteFile(_ context.Context, req termapi.FileRequest) (string, error) {
	if s.files == nil {
		return termapi.Unsupported{}.WriteFile(context.Background(), req)
	}
	s.mu.Lock()
	err := s.usableLocked()
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	return s.files.write(req)
}
