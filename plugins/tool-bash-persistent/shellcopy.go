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
	switch {
	case !r.st.copyFiles:
		return nil
	case r.resetting:
		return func(string) (string, error) { return "", errShellReset }
	}
	return r.copyToShell
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
			return path, nil
		}
	}
}
