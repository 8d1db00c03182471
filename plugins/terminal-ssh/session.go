package terminalssh

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/screen"
)

// The terminal's size and the bounds on what a session keeps, as the shell
// backend's defaults.
const (
	termRows        = 40
	termCols        = 160
	maxReadBytes    = 256 << 10 // a page, a viewport, a non-streaming send's output
	scrollbackLines = 10000
	scrollbackBytes = 4 << 20
	startTailBytes  = 2 << 10 // startup output kept to explain a failed start
)

// settings are the config values a session uses, resolved once.
type settings struct {
	addr      string
	idle      time.Duration
	timeout   time.Duration
	keepalive time.Duration
}

// session is one remote bash on one SSH connection. See the package
// documentation for the model; the invariants are:
//   - only the read loop reads the terminal, and it renders and acts on
//     what it read under mu, so output and markers are handled in stream
//     order;
//   - only the writer writes to it, in the order writes were queued;
//   - everything below mu is guarded by it;
//   - a send holds the slot from StartSend or Exec until it has settled
//     and its writes are over.
type session struct {
	id     string
	cfg    settings
	log    *slog.Logger
	client *ssh.Client
	remote *ssh.Session
	stdin  io.Writer
	stdout io.Reader
	// token is in every prompt marker: a marker without it is not this
	// shell's prompt.
	token string
	// forget removes the session from its backend once it is closed.
	forget func(*session)

	quit      chan struct{} // closed when Close begins: the goroutines stop
	kick      chan struct{} // capacity 1: the clock has a new send to time
	wake      chan struct{} // capacity 1: the writer has work
	resume    chan struct{} // capacity 1: a streaming caller pulled output
	readDone  chan struct{}
	waitDone  chan struct{}
	clockDone chan struct{}
	writeDone chan struct{}
	aliveDone chan struct{}
	closeOnce sync.Once

	mu           sync.Mutex
	scan         scanner
	filter       *screen.Filter
	segs         []screen.Segment
	lines        screen.Lines
	committed    []byte // scratch: the lines one chunk commits
	scroll       *screen.Scrollback
	partialStale bool           // the scrollback's partial line lags behind lines
	startTail    screen.Pending // output before the first prompt, for errors
	ready        bool           // the first prompt was seen
	status       terminal.Status
	waitErr      error // how the remote session ended, once it did
	exited       bool  // the end has been processed
	closing      bool
	closed       bool
	slot         *send // holds the one-send slot
	live         *send // receives output and is settled by markers and time
	unclaimed    screen.Pending
	cur          *command // the last Exec's command, until a send reported its end
	// idle: the shell is at its prompt and nothing was typed or signalled
	// since.
	idle bool
	// lastOutput is when the terminal last printed, or when the live send
	// began if that is later: silence counts from it.
	lastOutput time.Time
	paused     bool // the read loop holds the terminal back for a caller
	// echoing: the terminal echoed a command's line (a command turned echo
	// on); the next command's line turns it off again.
	echoing bool
	// queue is the text waiting for the writer, oldest first.
	queue []*writeJob
}

func newSession(id string, cfg settings, log *slog.Logger, client *ssh.Client, remote *ssh.Session, stdin io.Writer, stdout io.Reader) *session {
	s := &session{
		id:        id,
		cfg:       cfg,
		log:       log,
		client:    client,
		remote:    remote,
		stdin:     stdin,
		stdout:    stdout,
		token:     newNonce(),
		quit:      make(chan struct{}),
		kick:      make(chan struct{}, 1),
		wake:      make(chan struct{}, 1),
		resume:    make(chan struct{}, 1),
		readDone:  make(chan struct{}),
		waitDone:  make(chan struct{}),
		clockDone: make(chan struct{}),
		writeDone: make(chan struct{}),
		aliveDone: make(chan struct{}),
		filter:    screen.NewFilter(0),
		lines:     screen.Lines{MaxLineBytes: maxReadBytes},
		scroll:    screen.NewScrollback(scrollbackLines, scrollbackBytes),
		startTail: screen.NewPending(startTailBytes, false),
		status:    terminal.Running,
		unclaimed: screen.NewPending(maxReadBytes, false),
	}
	return s
}

// start runs the session's goroutines: the read loop, the exit waiter, the
// clock, the writer and, when configured, the keepalive.
func (s *session) start() {
	go s.readLoop()
	go s.waitExit()
	go s.clock()
	go s.writer()
	if s.cfg.keepalive > 0 {
		go s.keepalive(s.cfg.keepalive)
	} else {
		close(s.aliveDone)
	}
}

// Motd is empty: the prompt is a marker, which the terminal does not show,
// and what ran before the first prompt (the remote login shell, the
// plumbing) is not the session's.
func (s *session) Motd() string { return "" }

// PID is 0: the shell is a process of another machine.
func (s *session) PID() int { return 0 }

// Status reports whether the remote shell is still running.
func (s *session) Status() terminal.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// StartSend types the text and starts waiting for the terminal to settle.
// See terminal.Session.
func (s *session) StartSend(ctx context.Context, req terminal.SendRequest) (terminal.Send, error) {
	if ctx.Err() != nil {
		return nil, fmt.Errorf("terminal-ssh: session %s: send not started: %w", s.id, context.Cause(ctx))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.startableLocked(); err != nil {
		return nil, err
	}
	now := time.Now()
	sn := newSend(s, req.Stream, now.Add(s.timeout(req.Timeout)))
	sn.cmd = s.cur
	s.unclaimed.MoveTo(&sn.out)
	s.slot, s.live = sn, sn
	s.lastOutput = now
	text := []byte(req.Text)
	if req.Submit {
		text = append(text, '\r')
	}
	if len(text) > 0 {
		s.idle = false
		s.enqueueLocked(&writeJob{sn: sn, data: text})
	} else if c := s.cur; (c != nil && c.over) || (c == nil && s.idle) {
		// "Wait again" where there is nothing to wait for: the command
		// has ended, or the shell is at its prompt.
		sn.atPrompt = true
		s.settleLocked(sn, terminal.WaitStdinRead)
	}
	s.watchLocked(ctx, sn)
	s.kickClock()
	return sn, nil
}

// startableLocked reports why no send may start now, if one may not.
func (s *session) startableLocked() error {
	if err := s.usableLocked(); err != nil {
		return err
	}
	if sn := s.slot; sn != nil {
		why := "a send is live"
		if sn.settled {
			why = "the previous send's input is still being written"
		}
		return fmt.Errorf("terminal-ssh: session %s: %w (%s)", s.id, terminal.ErrSendActive, why)
	}
	return nil
}

// usableLocked reports why nothing new may start, if it may not.
func (s *session) usableLocked() error {
	switch {
	case s.closing || s.closed:
		return fmt.Errorf("terminal-ssh: session %s: %w", s.id, terminal.ErrSessionClosing)
	case s.exited:
		return fmt.Errorf("terminal-ssh: session %s: %w (%s)", s.id, terminal.ErrSessionExited, s.status)
	}
	return nil
}

// timeout is a send's bound: its own, or the configured one.
func (s *session) timeout(d time.Duration) time.Duration {
	if d <= 0 {
		return s.cfg.timeout
	}
	return d
}

// watchLocked cancels sn when ctx ends before it settles.
func (s *session) watchLocked(ctx context.Context, sn *send) {
	if !sn.settled && ctx.Done() != nil {
		sn.stopWatch = context.AfterFunc(ctx, func() { sn.Cancel() })
	}
}

// Read returns a page of scrollback, counted back from the newest line.
func (s *session) Read(req terminal.ReadRequest) (terminal.ReadResult, error) {
	count := req.Count
	if count == 0 {
		count = defaultReadCount
	}
	s.mu.Lock()
	s.syncPartialLocked()
	page, err := s.scroll.Read(req.Offset, count, maxReadBytes)
	s.mu.Unlock()
	if err != nil {
		return terminal.ReadResult{}, fmt.Errorf("terminal-ssh: session %s: %w", s.id, err)
	}
	return terminal.ReadResult{
		Text:       page.Text,
		TotalLines: page.TotalLines,
		LineBegin:  page.LineBegin,
		LineEnd:    page.LineEnd,
		Truncated:  page.Truncated,
	}, nil
}

// defaultReadCount is the page size of a Read that does not ask for one.
const defaultReadCount = 500

var _ terminal.Session = (*session)(nil)
