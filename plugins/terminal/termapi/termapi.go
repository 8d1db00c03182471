package termapi

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Backend starts terminal sessions of one type ("shell" for bash on a PTY).
// Backends register with the terminals service. The interface is plain data
// in and out and context-first, so it can sit behind a gRPC boundary
// (out-of-process backends): no callbacks, no shared host state.
type Backend interface {
	// Type is the registry name, e.g. "shell". Non-empty.
	Type() string
	// Spawn starts a session and returns once it is ready for its first send.
	// If ctx ends first, or startup fails, nothing is left running; if the
	// cleanup of a failed start itself fails, the error is a *CleanupError.
	Spawn(ctx context.Context, spec SpawnSpec) (Session, error)
}

// SpawnSpec is what the service passes to Backend.Spawn.
type SpawnSpec struct {
	// SessionID is minted by the service before the spawn runs.
	SessionID string
	// OwnerID is the id of the owning agent.
	OwnerID string
	// Cwd is the working directory of the session's first process; empty
	// means the backend's default.
	Cwd string
	// Name is optional display metadata.
	Name string
	// Sandbox is the sandbox mode the session must run in (SandboxFullAccess,
	// SandboxWorkspaceWrite, SandboxReadOnly); empty: the backend's own. A
	// backend that cannot enforce the mode fails the spawn, naming it: a
	// mode is never weakened in silence.
	Sandbox string
}

// The sandbox modes, as the original names them.
const (
	SandboxFullAccess     = "danger-full-access"
	SandboxWorkspaceWrite = "workspace-write"
	SandboxReadOnly       = "read-only"
)

// SandboxModes lists the valid modes.
var SandboxModes = []string{SandboxFullAccess, SandboxWorkspaceWrite, SandboxReadOnly}

// SandboxModer is implemented by sessions that run confined: the mode they
// run in. A session that does not implement it runs in SandboxFullAccess.
type SandboxModer interface {
	SandboxMode() string
}

// SandboxModeOf is the sandbox mode s runs in.
func SandboxModeOf(s Session) string {
	if m, ok := s.(SandboxModer); ok && m.SandboxMode() != "" {
		return m.SandboxMode()
	}
	return SandboxFullAccess
}

// RefuseSandbox is the check of a backend that confines nothing: it fails
// a spawn that asks for a mode other than SandboxFullAccess. prefix names
// the backend in the error.
func RefuseSandbox(prefix string, spec SpawnSpec) error {
	if spec.Sandbox == "" || spec.Sandbox == SandboxFullAccess {
		return nil
	}
	return fmt.Errorf("%s: %w: sandbox mode %q", prefix, ErrSandboxUnsupported, spec.Sandbox)
}

// Session is one live terminal owned by a backend. All methods are safe for
// concurrent use.
type Session interface {
	// Motd is what the terminal showed once it became ready (normally the
	// prompt).
	Motd() string
	// PID is the top-level process id, or 0 when there is none.
	PID() int
	// Status reports whether the top-level process is still running.
	Status() Status
	// StartSend writes text (and Enter when req.Submit) and starts waiting
	// for the terminal to settle. At most one send is live per session: a
	// second one fails with ErrSendActive until the first has settled and
	// released its write and interrupt. ctx bounds the whole send: when it
	// ends before the send settles, the send is cancelled as by Send.Cancel.
	StartSend(ctx context.Context, req SendRequest) (Send, error)
	// Read returns a page of the scrollback, counted back from the newest
	// line.
	Read(req ReadRequest) (ReadResult, error)
	// Signal delivers sig to the terminal's foreground process group. It
	// never hard-kills the session's top-level process (SIGKILL while the
	// shell itself is in the foreground is refused): Close does that.
	Signal(ctx context.Context, sig Signal) (SignalResult, error)
	// Close ends the session: it returns when every process the session
	// captured is gone, or reports which survived. It is idempotent;
	// concurrent calls share one close; after a failure a later call retries.
	Close(ctx context.Context, reason string) error
}

// Executor is implemented by sessions that can run a command line as one
// unit and learn how it ended from the shell itself, out of band: a shell
// backend with a command protocol (see the shell backend's package
// documentation for one). A session that is not an Executor can only be
// typed into (StartSend).
type Executor interface {
	// Exec runs req.Command as one command line of the shell and returns
	// the send that follows it. The shell must be at its prompt: the
	// previous command has ended (ErrShellBusy otherwise); the one-send
	// rule and the errors of StartSend apply too.
	//
	// The send settles as any send does. When the command has ended, its
	// result's Exec field says how (ExecCompleted with the exit status, or
	// ExecAbandoned when the shell came back to its prompt without finishing
	// the line, as after an interrupt) and Prompt is set. When it settles
	// earlier (a program waiting for input, silence, the deadline, the shell
	// exiting), Exec.State says whether the command had started; a caller
	// that signals the foreground then waits for the rest with an empty
	// StartSend, whose result carries the same command's Exec field.
	Exec(ctx context.Context, req ExecRequest) (Send, error)
}

// ExecRequest is the input of Executor.Exec.
type ExecRequest struct {
	// Command is shell text, run as one unit in the shell's own context:
	// any number of lines, here-documents and all; a syntax error is the
	// command's failure, never a shell waiting for more input. Non-empty,
	// without NUL bytes.
	Command string
	// Timeout bounds this send; zero means the backend's configured bound.
	Timeout time.Duration
	// Stream is SendRequest.Stream.
	Stream bool
}

// ExecState is how far a command started by Exec has got.
type ExecState string

const (
	// ExecPending: the command has been handed to the shell, which has not
	// taken it. If the shell exits now, the command never ran.
	ExecPending ExecState = "pending"
	// ExecRunning: the shell has taken the command and it has not ended.
	ExecRunning ExecState = "running"
	// ExecCompleted: the command line ran to its end; ExitCode is its
	// status, as the shell reported it out of band.
	ExecCompleted ExecState = "completed"
	// ExecAbandoned: the shell is back at its prompt but the command line
	// did not run to its end (an interrupt ended it, or it replaced the
	// shell's plumbing). ExitCode is the status the shell reported, or -1.
	ExecAbandoned ExecState = "abandoned"
)

// ExecResult describes the command of an Exec, on the results of its sends.
type ExecResult struct {
	State ExecState
	// ExitCode: see ExecCompleted and ExecAbandoned; -1 otherwise.
	ExitCode int
	// Notices are the shell's job notices at the command's end, one per
	// line ("[1]+  Done  sleep 1"), without the announcements of jobs the
	// command started. They are not part of the output stream.
	Notices string
	// Background is what the terminal showed between the previous send and
	// this Exec: output of background jobs, which the caller has not seen.
	// It is set on the result of the Exec's own send only.
	Background string
	// BackgroundTruncated: older background output was dropped before the
	// Exec, beyond the backend's bound (maxReadBytes).
	BackgroundTruncated bool
	// Continued reports that the shell had been stopped (SIGSTOP) and the
	// backend continued it, on the send during which that happened.
	Continued bool
}

// SendRequest is the input of one send.
type SendRequest struct {
	// Text is written to the terminal as is. Empty text with Submit false
	// writes nothing and only waits for the terminal to settle again.
	Text string
	// Submit appends Enter (a carriage return).
	Submit bool
	// Timeout bounds this send; zero means the backend's configured bound.
	Timeout time.Duration
	// Stream declares that the caller drains Send.Output until io.EOF. The
	// backend then delivers every byte of output (holding the terminal back
	// while the caller is behind) instead of keeping only a bounded tail.
	Stream bool
}

// Send is a send in flight.
type Send interface {
	// Output blocks until rendered output is available, the send has
	// settled, or ctx ends. It returns the text produced since the previous
	// call: complete lines only; the line still being written is returned
	// once it is complete, or in the settled viewport. Once the send has
	// settled and all its lines have been returned it returns io.EOF.
	Output(ctx context.Context) (string, error)
	// Wait blocks until the send settles (or ctx ends, which does not
	// affect the send) and returns how it settled.
	Wait(ctx context.Context) (SendResult, error)
	// Cancel interrupts the send with a real SIGINT to the foreground
	// process group. It does not settle the send by itself: the send still
	// settles when the terminal does (normally at the prompt that follows).
	// It returns false once the send has settled.
	Cancel() bool
}

// SendResult is how a send settled.
type SendResult struct {
	Reason WaitReason
	// Viewport is a snapshot taken when the send settled: the send's lines
	// Output had not returned yet, then the line still being written
	// (normally the prompt), capped to the newest bytes the backend keeps
	// (maxReadBytes). Output still returns those lines afterwards, so a
	// caller that drains Output to io.EOF takes from the Viewport only its
	// last, unterminated line (the text after the last newline).
	Viewport string
	// Status is the session's status when the send settled. It is
	// independent of Reason: a timeout does not mean anything exited.
	Status Status
	// Truncated reports that output of this send was dropped before the
	// caller saw it (a bounded buffer overflowed). It describes this send
	// only, never older history.
	Truncated bool
	// Prompt reports that the send settled because the shell came back to
	// its prompt (Reason is then WaitStdinRead): the shell itself, not a
	// program it runs, is proven to wait for the next command. Backends that
	// cannot tell leave it false.
	Prompt bool
	// Exec describes the command of the Exec this send belongs to; nil for
	// sends outside an Exec.
	Exec *ExecResult
}

// WaitReason says why a send settled.
type WaitReason string

const (
	// WaitStdinRead: the foreground is proven to be waiting for input: the
	// shell is back at its controlled prompt, or a program is blocked reading
	// the terminal.
	WaitStdinRead WaitReason = "stdin_read"
	// WaitInferredIdle: no proof, but the terminal has been silent for the
	// backend's silence bound.
	WaitInferredIdle WaitReason = "inferred_idle"
	// WaitTimeout: the send's absolute bound passed.
	WaitTimeout WaitReason = "timeout"
	// WaitSessionExit: the top-level process exited.
	WaitSessionExit WaitReason = "session_exit"
)

// Status is the state of a session's top-level process.
type Status struct {
	Exited bool `json:"exited"`
	// ExitCode is the exit status after a normal exit, or -1 (killed by a
	// signal, or unknown).
	ExitCode int `json:"exitCode"`
	// Signal is the name of the signal that killed the process ("SIGKILL"),
	// or "".
	Signal string `json:"signal,omitempty"`
}

// Running is the status of a live session.
var Running = Status{ExitCode: -1}

func (s Status) String() string {
	switch {
	case !s.Exited:
		return "running"
	case s.Signal != "":
		return "killed by signal " + s.Signal
	case s.ExitCode >= 0:
		return fmt.Sprintf("exited with code %d", s.ExitCode)
	}
	return "exited"
}

// ReadRequest selects a page of scrollback: Count lines ending Offset lines
// before the newest one. Count 0 means the default page size (500).
type ReadRequest struct {
	Offset int
	Count  int
}

// ReadResult is a page of scrollback. Lines are counted from the newest
// (line 0); the page covers [LineBegin, LineEnd) of that numbering.
type ReadResult struct {
	Text       string
	TotalLines int
	LineBegin  int
	LineEnd    int
	// Truncated: the page was cut to the byte limit, or older history that
	// the page would reach has been dropped.
	Truncated bool
}

// Signal names a signal a caller may send to the foreground group.
type Signal string

const (
	SIGINT  Signal = "SIGINT"
	SIGTERM Signal = "SIGTERM"
	SIGKILL Signal = "SIGKILL"
	SIGTSTP Signal = "SIGTSTP"
	SIGHUP  Signal = "SIGHUP"
)

// SignalResult reports where a signal went.
type SignalResult struct {
	TargetPGID int
}

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
	// ErrExecUnsupported: the session cannot run commands (not an
	// Executor).
	ErrExecUnsupported = errors.New("terminal: session cannot run commands (not an Executor)")
	// ErrSandboxUnsupported: the backend cannot enforce the sandbox mode a
	// spawn asks for.
	ErrSandboxUnsupported = errors.New("terminal: the backend cannot enforce this sandbox mode")
	// ErrInvalidSandboxMode: not one of SandboxModes.
	ErrInvalidSandboxMode = errors.New("terminal: invalid sandbox mode")
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
