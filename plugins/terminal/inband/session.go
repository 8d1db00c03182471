package inband

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/screen"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// The bounds on what a session keeps, as the shell backend's defaults.
const (
	// MaxReadBytes bounds a page, a viewport, and the output a send that
	// does not stream keeps (its newest bytes).
	MaxReadBytes    = 256 << 10
	scrollbackLines = 10000
	scrollbackBytes = 4 << 20
	startTailBytes  = 2 << 10 // startup output kept to explain a failed start
)

// Link is the far end of a shell's terminal: a byte stream each way, and
// how the shell ended. The session reads it from one goroutine and writes
// it from another.
type Link interface {
	// Read returns what the terminal printed. An error (io.EOF when the
	// shell is gone) ends the session's output.
	io.Reader
	// Write types into the terminal.
	io.Writer
	// Wait blocks until the shell has ended, or the link is gone, and
	// says how: the exit code, the signal, or ExitCode -1 when the far end
	// did not say.
	Wait() termapi.Status
	// Resize sets the far terminal's size. A link whose far end cannot be
	// resized returns an error wrapping errors.ErrUnsupported.
	Resize(size termapi.Size) error
	// Close tears the link down: Read and Wait return soon after. It is
	// called once, from Close or when the output has ended, and returns
	// once nothing of the link (no goroutine of its library) is left.
	Close() error
}

// Options configure a session.
type Options struct {
	// ID is the session's id, for messages and logs; OwnerID and Name are
	// its spawn's, for Info.
	ID      string
	OwnerID string
	Name    string
	// Prefix starts every error message: the backend's name
	// ("terminal-ssh").
	Prefix string
	// Where names the far end in startup errors ("host:22").
	Where string
	// StartErr is the sentinel that startup errors wrap.
	StartErr error
	// Idle is the silence bound; Timeout bounds a send (and the start)
	// that does not set its own.
	Idle, Timeout time.Duration
	// Echoes says that the terminal echoes what is typed (a container
	// exec's TTY, which nobody can set up before the shell starts): the
	// startup turns echo off with stty, where the far end has it. Without
	// stty every typed line's echo is recognised and removed.
	Echoes bool
	// PID is what the session reports as its top-level process: 0 where
	// the shell's process cannot be seen from here.
	PID int
	// WaitingForInput, when set, proves that the terminal's foreground
	// job (not the shell) is blocked reading the terminal. The session
	// asks it while a send waits for output, a few milliseconds after the
	// last output and then less often, up to every ProbeMax.
	WaitingForInput func() (bool, error)
	// StartProof, when set and WaitingForInput is not, starts a stdin
	// proof beside the shell once it has shown its first prompt, given the
	// shell's pid as the far end numbers it ($$, which the plumbing
	// reports): a probe on a second channel of the same connection, or
	// another exec in the same container (see RemoteProof). An error
	// leaves the session without a proof, which its capabilities then say.
	// A prober that is lost later (ErrProbeLost) is started again through
	// it, up to three times. The session closes the prober when it closes.
	StartProof func(ctx context.Context, farPID int) (Prober, error)
	// WriteFile, when set, writes a file where the shell can read it
	// (Session.WriteFile; FarFiles.Write is one): the session then has
	// Capabilities.Files.
	WriteFile func(ctx context.Context, req termapi.FileRequest) (string, error)
	// ProbeMax caps the interval between two WaitingForInput checks
	// (default 250 ms).
	ProbeMax time.Duration
	// Attachable says that the backend hands the session over to another
	// caller (Backend.Attach): the session reports it in its
	// capabilities.
	Attachable bool
	// Sandbox is the sandbox mode the far shell runs in (empty: full
	// access), and Limits the limits enforced on it, as the backend knows
	// them: the session reports them in its capabilities.
	Sandbox termapi.SandboxMode
	Limits  termapi.Limits
	// Log receives the session's debug messages; nil discards them.
	Log *slog.Logger
	// Forget is called once, when the session has closed.
	Forget func(*Session)
}

// Session is one bash at the far end of a Link, driven by the in-band
// protocol. It implements termapi.Session. See the
// package documentation for the model; the invariants are:
//   - only the read loop reads the terminal, and it renders and acts on
//     what it read under mu, so output and markers are handled in stream
//     order;
//   - only the writer writes to it, in the order writes were queued;
//   - everything below mu is guarded by it;
//   - a send holds the slot from StartSend or Exec until it has settled
//     and its writes are over.
type Session struct {
	id   string
	opts Options
	log  *slog.Logger
	link Link
	// token is in every prompt marker: a marker without it is not this
	// shell's prompt.
	token string

	quit      chan struct{} // closed when Close begins: the goroutines stop
	kick      chan struct{} // capacity 1: the clock has a new send to time
	wake      chan struct{} // capacity 1: the writer has work
	resume    chan struct{} // capacity 1: a streaming caller pulled output
	readDone  chan struct{}
	waitDone  chan struct{}
	clockDone chan struct{}
	writeDone chan struct{}
	closeOnce sync.Once
	linkOnce  sync.Once

	// Core has the screen and the methods that are the same on every
	// engine; it is guarded by mu.
	backendkit.Core
	mu         sync.Mutex
	scan       scanner
	startTail  screen.Pending // output before the first prompt, for errors
	ready      bool           // the first prompt was seen
	status     termapi.Status
	waitStatus termapi.Status // how the link said the shell ended, once it did
	exited     bool           // the end has been processed
	closing    bool
	closed     bool
	// Slot holds the one-send slot (Holder) and the send that receives
	// output and is settled by markers and time (Live).
	backendkit.Slot[*send]
	cur *command // the last Exec's command, until a send reported its end
	// idle: the shell is at its prompt and nothing was typed or signalled
	// since.
	idle bool
	// lastOutput is when the terminal last printed, or when the live send
	// began if that is later: silence counts from it.
	lastOutput time.Time
	// farPID is the shell's pid as the far end numbers it, as the
	// plumbing reported it at startup; 0 until then.
	farPID int
	// proof is the stdin proof (Options.WaitingForInput, or the prober's);
	// nil for none. It is set before the session is handed out.
	proof  func() (bool, error)
	prober Prober
	// A prober that is lost (ErrProbeLost) is started again, at most
	// maxProofRestarts times (restartProofLocked): restarting while a new
	// one starts, restartDone closed when that has ended (nil before the
	// first), restarts how many were begun.
	restarting  bool
	restartDone chan struct{}
	restarts    int
	// restartWait is restartDone when Close began: Close waits for it.
	restartWait chan struct{}
	// probeEvery is the interval of the next WaitingForInput check,
	// growing from probeMin to ProbeMax while the terminal stays quiet;
	// lastProbe is when the last one ended.
	probeEvery time.Duration
	lastProbe  time.Time
	paused     bool // the read loop holds the terminal back for a caller
	// A signal character typed lands later than its write returns (the
	// far line discipline, the program's scheduling), and the proof comes
	// by another path: it may still see the program waiting as before the
	// signal. So it settles nothing while a signal character is queued
	// (sigQueued) or was written at sigWritten and the terminal has
	// printed nothing read after that (sigUnanswered).
	sigQueued     int
	sigWritten    time.Time
	sigUnanswered bool
	// echoing: the terminal echoed a command's line (a command turned echo
	// on); the next command's line turns it off again.
	echoing bool
	// queue is the text waiting for the writer, oldest first.
	queue []*writeJob
	// retype is an interrupt character that may have been lost, to be
	// typed again at retypeAt unless the terminal answers first (see
	// retypeLocked); 0 for none.
	retype      byte
	retypeAt    time.Time
	retypeEvery time.Duration
}

func newSession(link Link, o Options) *Session {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ProbeMax <= 0 {
		o.ProbeMax = defaultProbeMax
	}
	s := &Session{
		id:        o.ID,
		opts:      o,
		log:       o.Log,
		link:      link,
		token:     backendkit.Nonce(),
		quit:      make(chan struct{}),
		kick:      make(chan struct{}, 1),
		wake:      make(chan struct{}, 1),
		resume:    make(chan struct{}, 1),
		readDone:  make(chan struct{}),
		waitDone:  make(chan struct{}),
		clockDone: make(chan struct{}),
		writeDone: make(chan struct{}),
		startTail: screen.NewPending(startTailBytes, false),
		status:    termapi.Running,
		proof:     o.WaitingForInput,
	}
	s.Init(&s.mu, &s.status, backendkit.CoreConfig{
		Who:         o.Prefix + ": session " + o.ID,
		MaxRead:     MaxReadBytes,
		ScrollLines: scrollbackLines,
		ScrollBytes: scrollbackBytes,
		Timeout:     o.Timeout,
	})
	return s
}

// closeLink closes the link, once.
func (s *Session) closeLink() {
	s.linkOnce.Do(func() {
		if err := s.link.Close(); err != nil {
			s.log.Debug("closing the link", "err", err)
		}
	})
}

// start runs the session's goroutines: the read loop, the exit waiter, the
// clock and the writer.
func (s *Session) start() {
	go s.readLoop()
	go s.waitExit()
	go s.clock()
	go s.writer()
}

// Motd is empty: the prompt is a marker, which the terminal does not show,
// and what ran before the first prompt (the remote login shell, the
// plumbing) is not the session's.
func (s *Session) Motd() string { return "" }

// PID is the shell's process id as Options gave it: 0 when it cannot be
// seen from here.
func (s *Session) PID() int { return s.opts.PID }

// Capabilities says what the session can do: commands as units, raw
// output and resize always; the stdin proof where the link gives one;
// files, hand-over, the sandbox and the limits as the backend said.
func (s *Session) Capabilities() termapi.Capabilities {
	s.mu.Lock()
	proof := s.proof != nil || s.restarting
	s.mu.Unlock()
	return termapi.Capabilities{
		Exec:       true,
		Raw:        true,
		Resize:     true,
		Attach:     s.opts.Attachable,
		InputProof: proof,
		Files:      s.opts.WriteFile != nil,
		Sandbox:    s.opts.Sandbox.Or(termapi.SandboxFullAccess),
		Limits:     s.opts.Limits,
	}
}

// Info describes the session for a backend's List.
func (s *Session) Info() termapi.Info {
	return termapi.Info{ID: s.id, OwnerID: s.opts.OwnerID, Name: s.opts.Name, PID: s.opts.PID, Status: s.Status(), Capabilities: s.Capabilities()}
}

// Resize sets the size of the far terminal.
func (s *Session) Resize(_ context.Context, size termapi.Size) error {
	return s.ResizeWith(size, s.usableLocked, s.link.Resize)
}

// StartSend types the text and starts waiting for the terminal to settle.
// See termapi.Session.
func (s *Session) StartSend(ctx context.Context, req termapi.SendRequest) (termapi.Send, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Gate(ctx, s.usableLocked(), s.Holder.busyLocked()); err != nil {
		return nil, err
	}
	now := time.Now()
	sn := newSend(s, req.Stream, s.Deadline(now, req.Timeout), s.cur)
	s.Take(sn, s.Scr)
	s.lastOutput = now
	s.resetProbeLocked(now)
	if text := backendkit.Input(req); len(text) > 0 {
		s.idle = false
		s.enqueueLocked(&writeJob{sn: sn, data: text})
	} else if c := s.cur; (c != nil && c.over) || (c == nil && s.idle) {
		// "Wait again" where there is nothing to wait for: the command
		// has ended, or the shell is at its prompt.
		sn.atPrompt = true
		s.settleLocked(sn, termapi.WaitStdinRead)
	}
	sn.Watch(ctx, func() { sn.Cancel() })
	s.kickClock()
	return sn, nil
}

// WriteFile writes a file where the shell can read it, through the
// backend (Options.WriteFile). See termapi.Session.
func (s *Session) WriteFile(ctx context.Context, req termapi.FileRequest) (string, error) {
	if s.opts.WriteFile == nil {
		return termapi.Unsupported{}.WriteFile(ctx, req)
	}
	if err := req.Validate(); err != nil {
		return "", err
	}
	s.mu.Lock()
	err := s.usableLocked()
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	return s.opts.WriteFile(ctx, req)
}

// signalPendingLocked reports whether a signal character typed may not
// have reached the terminal's foreground yet (see sigQueued).
func (s *Session) signalPendingLocked() bool { return s.sigQueued > 0 || s.sigUnanswered }

// usableLocked reports why nothing new may start, if it may not.
func (s *Session) usableLocked() error {
	return s.Unusable(s.closing || s.closed, s.exited)
}

var _ termapi.Session = (*Session)(nil)
