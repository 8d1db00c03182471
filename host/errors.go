package host

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Load and call failures wrap one of these, so callers can
// branch with errors.Is while users read the full message.
var (
	ErrUnknownPlugin    = errors.New("host: unknown plugin")
	ErrDuplicateID      = errors.New("host: duplicate entry id")
	ErrMissingProvider  = errors.New("host: no provider for service")
	ErrDuplicateService = errors.New("host: service has been registered")
	ErrCycle            = errors.New("host: dependency cycle")
	ErrInvalidConfig    = errors.New("host: invalid config")
	ErrInvalidEntry     = errors.New("host: invalid deployment entry")
	ErrNotInjected      = errors.New("host: service not injected")
	ErrClosed           = errors.New("host: closed")
	ErrOwnerClosed      = errors.New("host: owner closed")
	ErrOwnerExists      = errors.New("host: owner exists")
	ErrUnknownTool      = errors.New("host: unknown tool")
	ErrDuplicateTool    = errors.New("host: tool already registered")
	ErrInvalidArguments = errors.New("invalid arguments")
	ErrToolPanic        = errors.New("host: tool panicked")
	// ErrUntrusted: the deployment file or a plugin executable could be
	// changed by a shell the deployment confines, or by another user.
	ErrUntrusted = errors.New("host: untrusted deployment")
	// ErrCheckFailed: a check added with Tools.AddCheck failed after a
	// call, which is then an error result.
	ErrCheckFailed = errors.New("host: a check after the call failed")
)

// kindError is an error with its own message that still matches a sentinel
// under errors.Is, so messages read naturally without the sentinel's text.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// KindErrorf formats a message and marks it as an instance of kind: the
// message reads as it is, and errors.Is(err, kind) holds. Plugins use it
// for their own sentinels too.
func KindErrorf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

var errorf = KindErrorf

// DeploymentError locates a problem in a deployment document: the file, the
// line, and the id of the entry it concerns (empty for document-level
// problems).
type DeploymentError struct {
	File   string
	Line   int
	Entry  string // the entry's address, parent:child for nested entries
	Plugin string // the entry's plugin name, when known
	Err    error
}

func (e *DeploymentError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	// The plugin is named once: in parentheses when the entry's id does
	// not say it already, and not again at the start of its own message
	// (a Validate error says "terminal-bash: rows must be …").
	msg := fmt.Sprint(e.Err)
	if e.Plugin != "" {
		msg = strings.TrimPrefix(msg, e.Plugin+": ")
	}
	switch {
	case e.Entry != "" && e.Plugin != "" && e.Plugin != e.Entry && !strings.HasSuffix(e.Entry, ":"+e.Plugin):
		return fmt.Sprintf("%s: entry %q (%s): %s", loc, e.Entry, e.Plugin, msg)
	case e.Entry != "":
		return fmt.Sprintf("%s: entry %q: %s", loc, e.Entry, msg)
	}
	return fmt.Sprintf("%s: %s", loc, msg)
}

func (e *DeploymentError) Unwrap() error { return e.Err }
