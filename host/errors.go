package host

import (
	"errors"
	"fmt"
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
)

// kindError is an error with its own message that still matches a sentinel
// under errors.Is, so messages read naturally without the sentinel's text.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// errorf formats a message and marks it as an instance of kind.
func errorf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

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
	switch {
	case e.Entry != "" && e.Plugin != "":
		return fmt.Sprintf("%s: entry %q (%s): %v", loc, e.Entry, e.Plugin, e.Err)
	case e.Entry != "":
		return fmt.Sprintf("%s: entry %q: %v", loc, e.Entry, e.Err)
	}
	return fmt.Sprintf("%s: %v", loc, e.Err)
}

func (e *DeploymentError) Unwrap() error { return e.Err }

// FieldError is what a config's Validate method returns to name the field at
// fault; the loader then reports the line where that field is set. Field is
// the key path in the document, dot-separated for nested structs.
type FieldError struct {
	Field string
	Err   error
}

// FieldErrorf builds a FieldError with a formatted message.
func FieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }
