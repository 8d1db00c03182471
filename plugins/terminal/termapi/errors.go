package termapi

import (
	"errors"
	"fmt"
)

// Errors that callers branch on. Messages wrap them with the session id or
// backend type.
var (
	ErrNoSession         = errors.New("terminal: unknown session")
	ErrSendActive        = errors.New("terminal: session already has an active send")
	ErrSessionClosing    = errors.New("terminal: session is closing")
	ErrSessionExited     = errors.New("terminal: session has exited")
	ErrUnsupportedSignal = errors.New("terminal: unsupported signal")
	ErrNoForeground      = errors.New("terminal: cannot resolve the foreground process group")
	ErrRefuseKillShell   = errors.New("terminal: refusing to SIGKILL the terminal shell; close the session instead")
	ErrShellBusy         = errors.New("terminal: the shell is not at its prompt")
	// ErrBackendClosed: the backend has been closed and starts nothing.
	ErrBackendClosed = errors.New("terminal: the backend is closed")
	// ErrSandboxUnsupported: the backend cannot enforce the sandbox mode a
	// spawn asks for (Policy.Check).
	ErrSandboxUnsupported = errors.New("terminal: the backend cannot enforce this sandbox mode")
	// ErrLimitsUnsupported: the backend cannot enforce the resource limits
	// a spawn asks for (Policy.Check).
	ErrLimitsUnsupported = errors.New("terminal: the backend cannot enforce these limits")
	// ErrInvalidSandboxMode: not one of SandboxModes.
	ErrInvalidSandboxMode = errors.New("terminal: invalid sandbox mode")
	// ErrBadFileName: a FileRequest's name is not a plain file name
	// (ValidFileName).
	ErrBadFileName = errors.New("terminal: invalid file name")
	// ErrNoUnit: Resume found no work whose end its caller lost.
	ErrNoUnit = errors.New("terminal: nothing to resume")
	// ErrUnresumed: the session's keeper holds the end of work its last
	// caller lost, which a new send would bury: Resume it first.
	ErrUnresumed = errors.New("terminal: the session holds work its last caller lost; resume it first")
)

// CleanupError reports that a backend's startup failed and cleaning up what
// it had started failed too: something may still be running.
type CleanupError struct {
	StartErr   error
	CleanupErr error
}

func (e *CleanupError) Error() string {
	return fmt.Sprintf("terminal startup failed (%v) and its cleanup failed too (%v)", e.StartErr, e.CleanupErr)
}

// Unwrap returns both errors, so errors.Is matches either.
func (e *CleanupError) Unwrap() []error { return []error{e.StartErr, e.CleanupErr} }

// kindError is an error with its own message that still matches a sentinel
// under errors.Is.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }
