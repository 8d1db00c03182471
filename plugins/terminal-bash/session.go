//go:build linux

package terminalbash

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/screen"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// settings are the config values a session uses, resolved once.
type settings struct {
	rows, cols      int
	maxRead         int
	scrollLines     int
	scrollBytes     int
	idle            time.Duration
	timeout         time.Duration
	grace           time.Duration
	probeMin        time.Duration
	probeMax        time.Duration
	trackerInterval time.Duration
}

// probeMin is the delay of the first stdin-proof check after a write or
// output: too short to be noticed, long enough that a command printing in
// bursts does not pay for a look into /proc after every burst.
const probeMin = 5 * time.Millisecond

func newSettings(c *Config) settings {
	return settings{
		rows:            c.Rows,
		cols:            c.Cols,
		maxRead:         c.MaxReadBytes,
		scrollLines:     c.ScrollbackLines,
		scrollBytes:     c.ScrollbackMaxBytes,
		idle:            ms(c.IdleSilenceMs),
		timeout:         ms(c.TimeoutMs),
		grace:           ms(c.DisposeGraceMs),
		probeMin:        min(probeMin, ms(c.StdinProbeMaxMs)),
		probeMax:        ms(c.StdinProbeMaxMs),
		trackerInterval: 250 * time.Millisecond,
	}
}

// session is one bash on one PTY. See the package documentation for the
// model; the invariants are:
//   - only the read loop reads the master, and every decision that depends
//     on output or on the plumbing's records is taken in the read loop;
//   - everything below mu is guarded by it, and the master's read deadline
//     is only changed under it (armLocked), so the deadline always matches
//     the state;
//   - a send holds the slot from StartSend or Exec until it has settled and
//     its writes and interrupt are over.
type session struct {
	id    string
	owner string // the spawn's owner id and name, for List
	name  string
	cfg   settings
	log   *slog.Logger
	// logID is the session id in log's lines (a warm shell's changes).
	logID    *logID
	term     *ptyPair
	ctl      *control
	shellCmd *exec.Cmd
	pid      int
	// caps are what the session can do, the sandbox it runs in included.
	caps   termapi.Capabilities
	target proc.Target
	// leaves hold the shell's limits (nil without any).
	leaves *proc.Leaves
	// forget removes the session from its backend once it is closed.
	forget func(*session)
	// files are the session's files for its shell (WriteFile).
	files *hostFiles

	// Read loop only.
	pause       *time.Timer // bounds a backpressure pause; made on first use
	lastTracked time.Time
	// snap is the tracker's latest /proc walk; the stdin probe takes the
	// foreground group's members from it.
	snap *proc.Snapshot
	// promptRead is the read(2) bash blocks in at its prompt, learnt when
	// the plumbing reports that it is installed; zero until then.
	promptRead proc.BlockedRead

	resume   chan struct{} // capacity 1: a streaming caller pulled output
	loopDone chan struct{}
	waitDone chan struct{}
	ctlDone  chan struct{}  // the control channel's reader has ended
	workers  sync.WaitGroup // writes and interrupts running on their own

	// Core has the screen and the methods that are the same on every
	// engine; it is guarded by mu.
	backendkit.Core
	mu           sync.Mutex
	lineBuf      []byte // scratch: the line typed for a command
	motd         string
	status       termapi.Status
	shell        shellPhase // how far the shell's end has been taken in
	phase        closePhase // how far Close has got
	eof          bool       // the read loop has ended
	masterClosed bool
	closeCall    *closeCall
	// Slot holds the one-send slot (Holder) and the send that receives
	// output and is judged by the readiness tiers (Live).
	backendkit.Slot[*send]
	// records is the control channel reader's scratch.
	records []record
	// claim is the latest prompt or ready record since the last boundary:
	// it counts once /proc proves the shell at its prompt.
	claim *record
	// ready: the plumbing has reported that it is installed.
	ready bool
	// since marks when the latest Exec handed its command to the shell:
	// what was born after it is the command's (EndCommand).
	since    proc.Birth
	sinceSet bool
	// flags is $- as the shell's last command line left it, from the last
	// end record or proven claim: the next typed line turns xtrace,
	// verbose and nounset back on from it.
	flags string
	// idle: the shell is at its prompt (proven, or by its command's end
	// record) and nothing has been typed or signalled since.
	idle bool
	// cur is the command of the last Exec, until a send has reported how
	// it ended.
	cur *command
	// initTyped: the plumbing's source line was typed, because the shell
	// reached its prompt without running it (a startup file replaced
	// PROMPT_COMMAND).
	initTyped bool
	// continued: the shell was found stopped and continued; the next
	// settle of a command's send says so.
	continued bool
	// holdingShell: stopJob holds the shell stopped on purpose; the read
	// loop must not continue it.
	holdingShell bool
	// signalled: the last command line ended with a job that a signal
	// stopped or killed, whose members may still be inside a read of the
	// terminal (see awaitJobReaders).
	signalled bool
	// Commands' own terminals (see cmdTerm). ptmx is the multiplexer that
	// makes them, ptsDir their directory as the shell sees it; ptmx is
	// empty when commands write to the session's terminal. cmdTerms are
	// the open ones, curTerm the running command's, spare the one the next
	// command takes, jobTerms how many belong to jobs alone. jobOut holds
	// what jobs printed on theirs while a command ran, for its result.
	ptmx, ptsDir string
	cmdTerms     []*cmdTerm
	curTerm      *cmdTerm
	spare        *cmdTerm
	jobTerms     int
	jobOut       screen.Pending
	// size is the terminal's size.
	size termapi.Size
	// boundaries counts boundaryLocked calls, so that a proof taken without
	// the lock can tell whether a boundary passed meanwhile.
	boundaries uint64
	// lastOutput is when the terminal last printed, or when the live send
	// started waiting if that is later: silence is counted from it.
	lastOutput time.Time
	// lastProbe is when the proofs last looked at /proc, or the last
	// boundary: output postpones the next look, but not past
	// lastProbe + probeMax.
	lastProbe  time.Time
	nextProbe  time.Time
	probeEvery time.Duration
	armed      time.Time // the read deadline last set
}

// shellPhase is how far the session has taken in the shell's end.
type shellPhase uint8

const (
	shellRunning shellPhase = iota
	// shellReaped: Wait returned; output written before the exit may
	// still be unread.
	shellReaped
	// shellDone: the exit has been fully processed.
	shellDone
)

// closePhase is how far Close has got. A failed close stays closing, and
// a later Close retries.
type closePhase uint8

const (
	sessionOpen closePhase = iota
	sessionClosing
	sessionClosed
)

func newSession(id string, cfg settings, log *slog.Logger, term *ptyPair, ctl *control) *session {
	s := &session{
		id:       id,
		cfg:      cfg,
		log:      log,
		term:     term,
		ctl:      ctl,
		resume:   make(chan struct{}, 1),
		loopDone: make(chan struct{}),
		waitDone: make(chan struct{}),
		ctlDone:  make(chan struct{}),
		status:   termapi.Running,
		jobOut:   screen.NewPending(cfg.maxRead, false),
		size:     termapi.Size{Rows: cfg.rows, Cols: cfg.cols},
	}
	s.Init(&s.mu, &s.status, backendkit.CoreConfig{
		Who:         "terminal-bash: session " + id,
		MaxRead:     cfg.maxRead,
		ScrollLines: cfg.scrollLines,
		ScrollBytes: cfg.scrollBytes,
		Timeout:     cfg.timeout,
	})
	return s
}

// Motd is what the terminal showed until the shell first reached its
// prompt: normally nothing, since the prompt is empty.
func (s *session) Motd() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.motd
}

// PID is the shell's process id.
func (s *session) PID() int { return s.pid }

// Capabilities says what the session can do: everything the contract
// has, with the stdin proof, in the sandbox mode it runs in.
func (s *session) Capabilities() termapi.Capabilities { return s.caps }

// Info describes the session for Backend.List.
func (s *session) Info() termapi.Info {
	return termapi.Info{ID: s.id, OwnerID: s.owner, Name: s.name, PID: s.pid, Status: s.Status(), Capabilities: s.caps}
}

// Resize sets the terminal's size; the kernel tells the foreground group
// (SIGWINCH).
func (s *session) Resize(_ context.Context, size termapi.Size) error {
	return s.ResizeWith(size, s.usableLocked, func(size termapi.Size) error {
		if err := s.term.setSize(size); err != nil {
			return err
		}
		s.mu.Lock()
		s.size = size
		s.resizeCmdTermsLocked(size)
		s.mu.Unlock()
		return nil
	})
}

// StartSend types the text and starts judging readiness. See
// termapi.Session.
func (s *session) StartSend(ctx context.Context, req termapi.SendRequest) (termapi.Send, error) {
	s.mu.Lock()
	if err := s.Gate(ctx, s.usableLocked(), s.Holder.busyLocked()); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	now := time.Now()
	sn := newSend(s, req.Stream, s.Deadline(now, req.Timeout), s.cur)
	s.Take(sn, s.Scr)
	if input := backendkit.Input(req); len(input) > 0 {
		s.idle = false
		if err := s.writeLocked(sn, input, now); err != nil {
			s.Holder, s.Live = nil, nil
			s.Scr.Unclaim(&sn.Send)
			s.mu.Unlock()
			return nil, s.Errorf("write: %w", err)
		}
	} else {
		// "Wait again": what was learnt since the previous send settled
		// still counts, so a command that has ended, or a shell at its
		// prompt, answers at once; silence is counted afresh, so a busy
		// one gets another silence bound.
		s.lastOutput = now
		s.probeEvery, s.nextProbe = s.cfg.probeMin, now.Add(s.cfg.probeMin)
		if s.claim != nil {
			s.probeEvery, s.nextProbe = claimProbeMin, now
		}
		if c := s.cur; (c != nil && c.ended) || (c == nil && s.idle) {
			sn.atPrompt = true
			s.settleLocked(sn, termapi.WaitStdinRead)
		}
	}
	sn.Watch(ctx, func() { sn.Cancel() })
	s.armLocked()
	s.mu.Unlock()
	return sn, nil
}

// usableLocked reports why no new send may start, if one may not.
func (s *session) usableLocked() error {
	return s.Unusable(s.phase != sessionOpen, s.shell >= shellReaped)
}

// busyLocked says what keeps a send in the slot; empty for no send.
func (sn *send) busyLocked() string {
	switch {
	case sn == nil:
		return ""
	case !sn.Settled():
		return "a send is live"
	case sn.writing || sn.cmdWriting:
		return "draining the previous send's write"
	default:
		return "draining the previous send's interrupt"
	}
}

// signals are the signals a caller may send to the foreground group.
var signals = map[termapi.Signal]unix.Signal{
	termapi.SIGINT:  unix.SIGINT,
	termapi.SIGTERM: unix.SIGTERM,
	termapi.SIGKILL: unix.SIGKILL,
	termapi.SIGTSTP: unix.SIGTSTP,
	termapi.SIGHUP:  unix.SIGHUP,
	termapi.SIGQUIT: unix.SIGQUIT,
	termapi.SIGCONT: unix.SIGCONT,
}

// Signal delivers sig to the terminal's foreground process group.
func (s *session) Signal(ctx context.Context, sig termapi.Signal) (termapi.SignalResult, error) {
	usig, ok := signals[sig]
	if !ok {
		return termapi.SignalResult{}, s.Errorf("%w: %q", termapi.ErrUnsupportedSignal, sig)
	}
	if err := ctx.Err(); err != nil {
		return termapi.SignalResult{}, s.Errorf("signal: %w", context.Cause(ctx))
	}
	s.mu.Lock()
	err := s.usableLocked()
	s.mu.Unlock()
	if err != nil {
		return termapi.SignalResult{}, err
	}
	if usig == unix.SIGINT {
		// An interrupt for a command must reach its job, not the shell
		// about to start it.
		s.awaitInterruptible(ctx.Done())
	}
	pgid, err := s.term.foreground()
	if err != nil {
		return termapi.SignalResult{}, s.Errorf("%w: %v", termapi.ErrNoForeground, err)
	}
	if usig == unix.SIGKILL && pgid == s.pid {
		return termapi.SignalResult{}, s.Errorf("%w", termapi.ErrRefuseKillShell)
	}
	s.mu.Lock()
	s.boundaryLocked(time.Now())
	s.idle = false
	s.armLocked()
	running := s.cur != nil && !s.cur.ended && s.cur.captured
	s.mu.Unlock()
	if usig == unix.SIGTSTP && pgid != s.pid && running {
		// A command's job: its line ends there (see stopJob).
		return s.stopJob(pgid)
	}
	if err := s.signalGroup(pgid, usig); err != nil {
		return termapi.SignalResult{}, s.Errorf("%w", err)
	}
	return termapi.SignalResult{TargetPGID: pgid}, nil
}

// signalGroup signals process group pgid if it is still the terminal's
// foreground group. The kernel keeps only groups of the terminal's own
// session in the foreground, so the check narrows the window in which the
// group could have ended and its id been reused elsewhere to the time
// between two system calls.
func (s *session) signalGroup(pgid int, sig unix.Signal) error {
	if now, err := s.term.foreground(); err != nil || now != pgid {
		return fmt.Errorf("%w: foreground group changed while signalling", termapi.ErrNoForeground)
	}
	if err := unix.Kill(-pgid, sig); err != nil && err != unix.ESRCH {
		return fmt.Errorf("signal %v to group %d: %w", sig, pgid, err)
	}
	return nil
}

var _ termapi.Session = (*session)(nil)
