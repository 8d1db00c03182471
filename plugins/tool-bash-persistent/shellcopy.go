package bashtool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// A saved output is for the model to read with its next command, so it
// must be where the owner's shell can read it. dsh keeps its own copy in
// the owner's directory of its private directory, which a local shell
// reads as it is (Capabilities.HostFiles). A shell elsewhere (on another
// host, in a container) gets a copy of it from its backend
// (Session.WriteFile), and the result names that copy.

// copyBound bounds copying one saved output to the shell's side.
const copyBound = 2 * time.Minute

// copyPart is how much of a saved output one WriteFile carries.
const copyPart = 3 << 20

var (
	errNoShell    = errors.New("the shell is gone")
	errShellReset = errors.New("the shell is reset, and the files it could read go with it")
)

// copyForShell returns what copies a saved output where the owner's shell
// can read it, or nil when the shell reads dsh's own copy (or its backend
// cannot write files for it). A shell this call resets takes its files
// with it (another host's session, a container), so then there is nothing
// to copy to.
func (r *run) copyForShell() func(local string) (string, error) {
	if !r.st.copyFiles {
		return nil
	}
	r.dropEvictedCopies()
	if r.resetting {
		return func(string) (string, error) { return "", errShellReset }
	}
	return r.copyToShell
}

// dropEvictedCopies removes, where the shell runs, the copies of the saved
// outputs that were removed here to make room (maxSavedBytesPerOwner), so
// the shell's side stays within dsh's bounds too; and forgets copies made
// for shells the owner no longer has (theirs went with them).
func (r *run) dropEvictedCopies() {
	a := &r.p.saved
	a.mu.Lock()
	evicted := r.st.saved.evicted
	r.st.saved.evicted = nil
	a.mu.Unlock()
	id := r.st.shellID
	for _, name := range evicted {
		if r.st.copies[name] == id && id != "" && !r.resetting {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.parent), copyBound)
			if _, err := r.terms().WriteFile(ctx, r.owner(), id, termapi.FileRequest{Name: name, Remove: true}); err != nil {
				r.p.logger.Warn("removing the shell's copy of a saved output", "owner", r.owner().ID(), "file", name, "err", err)
			}
			cancel()
		}
		delete(r.st.copies, name)
	}
	for name, shell := range r.st.copies {
		if shell != id {
			delete(r.st.copies, name)
		}
	}
}

// copyToShell copies the saved output at local, a file of the owner's
// output directory, to the owner's shell's side, and returns the path the
// shell reads it by.
func (r *run) copyToShell(local string) (string, error) {
	id := r.st.shellID
	if id == "" || r.st.outRoot == nil {
		return "", errNoShell
	}
	name := filepath.Base(local)
	f, err := r.st.outRoot.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.parent), copyBound)
	defer cancel()
	buf := make([]byte, copyPart)
	path := ""
	for first := true; ; first = false {
		n, err := io.ReadFull(f, buf)
		end := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !end {
			return "", err
		}
		if n > 0 || first {
			path, err = r.terms().WriteFile(ctx, r.owner(), id, termapi.FileRequest{Name: name, Data: buf[:n], Append: !first})
			if err != nil {
				return "", fmt.Errorf("copy %s to the shell's side: %w", name, err)
			}
		}
		if end {
			if r.st.copies == nil {
				r.st.copies = make(map[string]string)
			}
			r.st.copies[name] = id
			return path, nil
		}
	}
}
