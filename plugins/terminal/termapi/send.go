package termapi

import (
	"context"
	"fmt"
	"time"
)

// ExecRequest is the input of Session.Exec.
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
	// Captured: the caller takes the command's output as text and its end
	// as a result (the bash tool), not as a screen someone watches (the
	// terminal tools). A backend may then give the command's stdout and
	// stderr a terminal of its own, so that what its jobs print later is
	// told apart from later commands' output, and end the command line at
	// a job that SIGTSTP stopped (bash cannot move a loop or list around
	// it). Without it the program draws on the session's terminal, and
	// SIGTSTP only stops its job.
	Captured bool
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
	// RawEnd is the position of the raw output (Session.Output) when the
	// send settled: what the terminal wrote before the settle ends there,
	// so a reader of the raw output knows when it has seen it all. Zero
	// where the session keeps no raw output.
	RawEnd int64
	// Input is how the terminal takes input when the send settled because
	// a program is proven to wait for it (WaitStdinRead without Prompt), as
	// far as the backend can see: InputUnknown otherwise, and where it
	// cannot tell.
	Input InputMode
	// LimitsHit are the session's limits its processes ran into while the
	// send ran, with their values: Memory when the OOM killer ended one of
	// them at the memory limit, Pids when a fork was refused at the process
	// limit. Zero fields were not hit; a CPU limit slows and ends nothing,
	// so it is never reported.
	LimitsHit Limits
}

// InputMode is how a terminal hands typed input to the program reading it,
// as its line discipline is set.
type InputMode string

const (
	// InputUnknown: the backend cannot tell (it does not see the
	// terminal's settings, or they are its own and say nothing of the
	// program's wish).
	InputUnknown InputMode = ""
	// InputLine: a line at a time, echoed: a program reading a line.
	InputLine InputMode = "line"
	// InputSecret: a line at a time, not echoed: a program asking for a
	// password or passphrase (sudo, ssh, read -s, passwd).
	InputSecret InputMode = "secret"
	// InputRaw: a key at a time: an editor, a pager, a line editor, a
	// full-screen program.
	InputRaw InputMode = "raw"
)

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
	// Lost, when set, says why the session ended though its shell did not
	// end it: its backend was lost ("the backend plugin stopped answering
	// and was killed"). How the shell itself ended is then unknown.
	Lost string `json:"lost,omitempty"`
}

// Running is the status of a live session.
var Running = Status{ExitCode: -1}

func (s Status) String() string {
	switch {
	case !s.Exited:
		return "running"
	case s.Lost != "":
		return "lost: " + s.Lost
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
	// SIGQUIT is what ^\ sends; SIGCONT continues a stopped group. A
	// backend that cannot deliver one fails with ErrUnsupportedSignal.
	SIGQUIT Signal = "SIGQUIT"
	SIGCONT Signal = "SIGCONT"
)

// SignalResult reports where a signal went.
type SignalResult struct {
	TargetPGID int
}
