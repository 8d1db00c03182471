package termapi

import (
	"context"
	"fmt"
)

// Session is one live terminal owned by a backend. All methods are safe for
// concurrent use. A call the session cannot serve (see Capabilities)
// returns an error that wraps errors.ErrUnsupported; a backend can embed
// Unsupported to answer so for every call it does not implement.
type Session interface {
	// Capabilities says what the session can do. It does not change over
	// the session's life.
	Capabilities() Capabilities
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
	// Exec runs req.Command as one command line of the shell and returns
	// the send that follows it (Capabilities.Exec). The shell must be at
	// its prompt: the previous command has ended (ErrShellBusy otherwise);
	// the one-send rule and the errors of StartSend apply too.
	//
	// The send settles as any send does. When the command has ended, its
	// result's Exec field says how (ExecCompleted with the exit status, or
	// ExecAbandoned when the shell came back to its prompt without
	// finishing the line, as after an interrupt) and Prompt is set. When it
	// settles earlier (a program waiting for input, silence, the deadline,
	// the shell exiting), Exec.State says whether the command had started;
	// a caller that signals the foreground then waits for the rest with an
	// empty StartSend, whose result carries the same command's Exec field.
	Exec(ctx context.Context, req ExecRequest) (Send, error)
	// Read returns a page of the scrollback, counted back from the newest
	// line.
	Read(req ReadRequest) (ReadResult, error)
	// Output returns the terminal's raw bytes from position from on
	// (Capabilities.Raw): what the programs wrote, in order, without the
	// backend's own protocol. It blocks until there is something at or
	// after from, the session's output has ended (io.EOF once everything
	// was returned), or ctx ends. Positions count bytes from the session's
	// start; a session keeps a bounded window of them, so a chunk may start
	// after from (Chunk.Pos says where, and the bytes between were lost).
	// Any number of readers may read, each from its own position.
	Output(ctx context.Context, from int64) (Chunk, error)
	// Resize sets the size of the terminal, which the foreground program is
	// told of (SIGWINCH) (Capabilities.Resize).
	Resize(ctx context.Context, size Size) error
	// Signal delivers sig to the terminal's foreground process group. It
	// never hard-kills the session's top-level process (SIGKILL while the
	// shell itself is in the foreground is refused): Close does that.
	// SIGTSTP to the job of an Exec's running command stops the job; for
	// a captured Exec (ExecRequest.Captured), a backend that can hold the
	// shell still meanwhile ends the command line there (ExecAbandoned), where bash alone would break a loop around the
	// job and go on with the rest of the line at once.
	Signal(ctx context.Context, sig Signal) (SignalResult, error)
	// EndCommand ends, with SIGKILL, what the latest Exec's command started
	// (Capabilities.EndCommand): its background jobs, daemons and whatever
	// they forked, a fork bomb included, but never the session's top-level
	// process, nor processes that were there before the command and what
	// descends from them, nor the terminal's foreground job while that is
	// not the shell (signals are for it). A caller that gives up on a
	// command (a timeout) calls it before it signals the foreground, so that
	// nothing the command started holds the shell back, and once more when
	// the shell is back at its prompt. It returns how many processes it
	// ended.
	EndCommand(ctx context.Context) (int, error)
	// WriteFile writes a file of the session's own where its shell can
	// read it, and returns the path the shell knows it by
	// (Capabilities.Files): a clipped command's full output, say, for the
	// model to grep with its next command. See FileRequest. The files live
	// in a directory of the session's, readable by its shell's user only,
	// at most as long as the session.
	WriteFile(ctx context.Context, req FileRequest) (string, error)
	// Close ends the session: it returns when every process the session
	// captured is gone, or reports which survived. It is idempotent;
	// concurrent calls share one close; after a failure a later call retries.
	Close(ctx context.Context, reason string) error
	// Detach lets the session go without ending it (Capabilities.Keep):
	// its keeper holds it, its shell and whatever runs in it, for a later
	// caller to take back (Backend.Attach). A send in flight goes on
	// without its caller; the keeper keeps its output and result for
	// Resume. The session value is unusable afterwards.
	Detach(ctx context.Context) error
	// Resume hands over the unit of work its caller lost (Capabilities.Keep):
	// the command of the last Exec (or the text of the last StartSend)
	// whose end no caller received, because the caller that started it
	// went away. The returned Send gives that unit's output from its start,
	// which the keeper kept meanwhile, then goes on as an empty StartSend
	// would until the unit settles; its results carry the command's Exec.
	// req's Timeout and Stream apply; its Text must be empty. ErrNoUnit
	// when there is nothing to resume.
	Resume(ctx context.Context, req SendRequest) (Send, error)
}

// Capabilities say what a session can do, as data: a new capability is a
// new field, never a new interface. The zero value is a terminal that can
// only be typed into and read back.
type Capabilities struct {
	// Exec: the session runs a command line as one unit and learns how it
	// ended from the shell itself (Session.Exec). The bash tool needs it.
	Exec bool `json:"exec"`
	// Raw: the session hands out its raw bytes with positions
	// (Session.Output).
	Raw bool `json:"raw"`
	// Resize: the session's terminal can be resized (Session.Resize).
	Resize bool `json:"resize"`
	// Attach: the backend can hand the session to another caller
	// (Backend.Attach).
	Attach bool `json:"attach"`
	// InputProof: a program blocked reading the terminal is proven so
	// (WaitStdinRead), not inferred from silence.
	InputProof bool `json:"inputProof"`
	// Files: the session writes files where its shell can read them
	// (Session.WriteFile).
	Files bool `json:"files"`
	// HostFiles: the shell reads this machine's files at the paths dsh
	// sees them (a local shell): a file dsh keeps in the owner's directory
	// of its private directory is the shell's to read as it is, the
	// sandbox included.
	HostFiles bool `json:"hostFiles"`
	// Keep: a keeper that outlives its caller holds the session (a backend
	// served as a keeper, see package backendplugin): Detach lets it go
	// without ending it, Attach takes it back, and Resume hands over the
	// work its last caller lost.
	Keep bool `json:"keep"`
	// Sandbox is the sandbox mode the session runs in.
	Sandbox SandboxMode `json:"sandbox"`
	// Limits are the resource limits enforced on the session's processes.
	Limits Limits `json:"limits"`
	// EndCommand: the session can end what a command started
	// (Session.EndCommand).
	EndCommand bool `json:"endCommand"`
}

// Chunk is a run of a session's raw output (Session.Output).
type Chunk struct {
	// Pos is the position of Data's first byte. It is after the position
	// asked for when the bytes between were dropped from the session's
	// window.
	Pos  int64
	Data []byte
}

// End is the position after the chunk's last byte: where the next read
// starts.
func (c Chunk) End() int64 { return c.Pos + int64(len(c.Data)) }

// FileRequest is the input of Session.WriteFile.
type FileRequest struct {
	// Name is the file's name in the session's directory of files: one
	// path element of at most 128 bytes of letters, digits, '.', '-' and
	// '_', not starting with '.' (ValidFileName).
	Name string
	// Data is what is written: the file's content, replacing any earlier
	// file of that name, or with Append its continuation.
	Data []byte
	// Append adds Data at the end of the file, which an earlier call made.
	Append bool
	// Remove removes the file instead (Data must be empty); a file that is
	// not there is no error. The path is returned all the same.
	Remove bool
}

// Validate checks the name (ValidFileName) and that a removal carries no
// data.
func (r FileRequest) Validate() error {
	if err := ValidFileName(r.Name); err != nil {
		return err
	}
	if r.Remove && (len(r.Data) > 0 || r.Append) {
		return fmt.Errorf("terminal: file %q: a removal carries no data and appends nothing", r.Name)
	}
	return nil
}

// maxFileName bounds FileRequest.Name.
const maxFileName = 128

// ValidFileName reports why name cannot name a file of WriteFile, or nil.
// The error wraps ErrBadFileName.
func ValidFileName(name string) error {
	bad := name == "" || len(name) > maxFileName || name[0] == '.'
	for i := 0; i < len(name) && !bad; i++ {
		c := name[i]
		bad = !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_')
	}
	if bad {
		return &kindError{ErrBadFileName, fmt.Sprintf("terminal: file name %q: want 1 to %d letters, digits, '.', '-' or '_', not starting with '.'", name, maxFileName)}
	}
	return nil
}
