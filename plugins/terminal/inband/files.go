package inband

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// filesScript keeps a session's files at the far end: see its own
// comments.
//
//go:embed files.sh
var filesScript string

// FarResult is what a program run beside the shell did: its output, its
// error output and its exit status.
type FarResult struct {
	Stdout, Stderr []byte
	Code           int
}

// FarRun runs argv at the far end, beside the shell and as its user, with
// stdin as its input (another session of the SSH connection, another exec
// in the container). The error is the transport's; a program that ran and
// failed has a FarResult with its status.
type FarRun func(ctx context.Context, argv []string, stdin []byte) (FarResult, error)

// ShellCommand is argv as one command line for a far end that runs
// commands through a POSIX shell (an SSH exec request): each word single
// quoted, after exec.
func ShellCommand(argv []string) string {
	var b strings.Builder
	b.WriteString("exec")
	for _, a := range argv {
		b.WriteByte(' ')
		b.WriteString(Quote(a))
	}
	return b.String()
}

// FarFiles is a session's directory of files at the far end, which
// Session.WriteFile writes through (Options.WriteFile): made with the first
// file by mktemp, 0700, in the far end's $TMPDIR or /tmp; replaced by a new
// one when a command has removed it (never re-used by name: another user
// may have made one there since); removed by Purge. It needs bash and
// coreutils at the far end. Safe for concurrent use.
type FarFiles struct {
	run FarRun
	mu  sync.Mutex
	dir string // "" until the first file
}

// NewFarFiles keeps files at the far end run reaches.
func NewFarFiles(run FarRun) *FarFiles { return &FarFiles{run: run} }

// ErrFilesGone: the file to add to, or the directory of files, is no
// longer there (a command removed it).
var ErrFilesGone = errors.New("inband: the session's file is gone")

func filesArgv(op, dir, name string) []string {
	return []string{"bash", "--noprofile", "--norc", "-c", filesScript, "dsh-files", op, dir, name}
}

// Write does what req asks (see termapi.FileRequest) and returns the
// file's path at the far end.
func (f *FarFiles) Write(ctx context.Context, req termapi.FileRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	op := "create"
	switch {
	case req.Remove:
		op = "remove"
	case req.Append:
		op = "append"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dir == "" && op != "create" {
		return "", fmt.Errorf("%w: %s: no file of that name was written", ErrFilesGone, req.Name)
	}
	for attempt := 0; ; attempt++ {
		// With no directory yet, the script makes one and says where.
		made := f.dir == ""
		res, err := f.run(ctx, filesArgv(op, f.dir, req.Name), req.Data)
		if err != nil {
			return "", fmt.Errorf("write %s at the far end: %w", req.Name, err)
		}
		if made {
			dir := madeDir(res.Stdout)
			if !strings.HasPrefix(dir, "/") || strings.ContainsRune(dir, 0) {
				return "", fmt.Errorf("make a directory of files at the far end: exit status %d: %q %s", res.Code, res.Stdout, bytes.TrimSpace(res.Stderr))
			}
			f.dir = dir
		}
		path := f.dir + "/" + req.Name
		switch res.Code {
		case 0:
			return path, nil
		case 3:
			f.dir = ""
			if op == "create" && attempt == 0 {
				continue
			}
			return "", fmt.Errorf("%w: %s: its directory was removed", ErrFilesGone, path)
		case 4:
			return "", fmt.Errorf("%w: %s", ErrFilesGone, path)
		}
		return "", fmt.Errorf("write %s at the far end: exit status %d: %s", path, res.Code, bytes.TrimSpace(res.Stderr))
	}
}

// madeDir finds the line "dir PATH" in what files.sh printed, after
// whatever the far end's startup files printed, and returns PATH.
func madeDir(out []byte) string {
	for line := range strings.Lines(string(out)) {
		if dir, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "dir "); ok {
			return dir
		}
	}
	return ""
}

// Purge removes the directory of files, if one was made.
func (f *FarFiles) Purge(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dir == "" {
		return nil
	}
	res, err := f.run(ctx, filesArgv("purge", f.dir, ""), nil)
	if err == nil && res.Code != 0 {
		err = fmt.Errorf("exit status %d: %s", res.Code, bytes.TrimSpace(res.Stderr))
	}
	if err != nil {
		return fmt.Errorf("remove the directory of files %s at the far end: %w", f.dir, err)
	}
	f.dir = ""
	return nil
}
