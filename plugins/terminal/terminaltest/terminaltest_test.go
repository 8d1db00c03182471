package terminaltest_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryBackend(t *testing.T) {
	terminaltest.CheckGoroutines(t)
	terminaltest.TestBackend(t, func(*testing.T) termapi.Backend { return memBackend{} }, terminaltest.Options{
		EchoCommand:     func(text string) string { return "say " + text },
		ReadCommand:     "wait-input",
		ProvesStdinWait: true,
		ExitCommand:     "quit",
	})
}

// Without the optional commands the checks that need them are skipped, and
// the rest still pass.
func TestMemoryBackendMinimal(t *testing.T) {
	terminaltest.TestBackend(t, func(*testing.T) termapi.Backend { return memBackend{} }, terminaltest.Options{
		EchoCommand: func(text string) string { return "say " + text },
	})
}

// memBackend runs a scripted terminal in memory, with no process behind it
// (PID 0). Its "shell" knows three commands: `say TEXT` prints TEXT,
// `wait-input` blocks reading the terminal until a line or an interrupt
// arrives, and `quit` exits. Like a real terminal it echoes what is typed
// after the prompt.
//
// A send settles the moment the shell is back at its prompt, which in
// memory is before StartSend returns. A send blocked on input settles when
// it is first observed (Wait or Output): the observation is the proof of
// the wait. That keeps every run deterministic without timers.
//
// It can do nothing optional beyond that proof: no commands as units, no
// raw output, no resize, no list; it refuses any policy (Policy.Check
// against the zero capabilities).
type memBackend struct{ termapi.UnsupportedLister }

const prompt = "mem> "

func (memBackend) Type() string { return "memory" }

func (memBackend) Spawn(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if err := spec.Policy.Check(termapi.Capabilities{}); err != nil {
		return nil, err
	}
	return &memSession{status: termapi.Running, partial: prompt}, nil
}

type memSession struct {
	termapi.Unsupported
	mu      sync.Mutex
	lines   []string // complete lines of scrollback
	partial string   // the line being written
	status  termapi.Status
	closed  bool
	reading bool     // the foreground program waits for a line
	send    *memSend // the live send
}

func (s *memSession) Motd() string { return prompt }
func (s *memSession) PID() int     { return 0 }

// Capabilities: the observation that settles a blocked send is its proof.
func (s *memSession) Capabilities() termapi.Capabilities {
	return termapi.Capabilities{InputProof: true}
}

func (s *memSession) Status() termapi.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// StartSend ignores ctx: every send settles by itself or at the first
// observation, so there is nothing for ctx to bound.
func (s *memSession) StartSend(_ context.Context, req termapi.SendRequest) (termapi.Send, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, fmt.Errorf("memory session: %w", termapi.ErrSessionClosing)
	case s.status.Exited:
		return nil, fmt.Errorf("memory session: %w", termapi.ErrSessionExited)
	case s.send != nil:
		return nil, fmt.Errorf("memory session: %w", termapi.ErrSendActive)
	}
	send := &memSend{s: s}
	s.send = send
	s.partial += req.Text
	if req.Submit {
		s.enter()
	}
	if s.send == send && !s.reading {
		s.settle(termapi.WaitStdinRead)
	}
	return send, nil
}

// enter completes the line being written and lets the foreground act on it.
func (s *memSession) enter() {
	line := s.partial
	s.emit(line)
	if s.reading {
		// The waiting program consumes the line and ends.
		s.reading = false
		s.partial = prompt
		return
	}
	cmd := strings.TrimPrefix(line, prompt)
	s.partial = prompt
	switch {
	case strings.HasPrefix(cmd, "say "):
		s.emit(strings.TrimPrefix(cmd, "say "))
	case cmd == "wait-input":
		s.reading = true
		s.partial = ""
	case cmd == "quit":
		s.partial = ""
		s.status = termapi.Status{Exited: true, ExitCode: 0}
		s.settle(termapi.WaitSessionExit)
	case cmd != "":
		s.emit("mem: unknown command: " + cmd)
	}
}

// emit completes a line of output.
func (s *memSession) emit(line string) {
	s.partial = ""
	s.lines = append(s.lines, line)
	if s.send != nil {
		s.send.out = append(s.send.out, line)
	}
}

// settle ends the live send. The viewport is a snapshot of what Output has
// not returned yet, plus the line being written; Output still returns those
// lines afterwards, so a streaming caller misses nothing.
func (s *memSession) settle(reason termapi.WaitReason) {
	send := s.send
	var viewport strings.Builder
	for _, line := range send.out {
		viewport.WriteString(line + "\n")
	}
	viewport.WriteString(s.partial)
	send.result = termapi.SendResult{Reason: reason, Viewport: viewport.String(), Status: s.status}
	s.send = nil
}

// interrupt stops the waiting program, as SIGINT would.
func (s *memSession) interrupt() {
	s.reading = false
	s.emit("^C")
	s.partial = prompt
	if s.send != nil {
		s.settle(termapi.WaitStdinRead)
	}
}

func (s *memSession) Read(req termapi.ReadRequest) (termapi.ReadResult, error) {
	if req.Offset < 0 || req.Count < 0 {
		return termapi.ReadResult{}, fmt.Errorf("memory session: bad page %+v", req)
	}
	count := req.Count
	if count == 0 {
		count = 500
	}
	s.mu.Lock()
	segments := append(slices.Clone(s.lines), s.partial)
	s.mu.Unlock()
	total := len(segments)
	if total == 1 && segments[0] == "" {
		total = 0
	}
	if req.Offset >= total {
		return termapi.ReadResult{TotalLines: total, LineBegin: req.Offset, LineEnd: req.Offset}, nil
	}
	end := total - req.Offset
	text := strings.Join(segments[max(0, end-count):end], "\n")
	n := 0
	if text != "" {
		n = strings.Count(text, "\n") + 1
	}
	return termapi.ReadResult{Text: text, TotalLines: total, LineBegin: req.Offset, LineEnd: req.Offset + n}, nil
}

func (s *memSession) Signal(_ context.Context, sig termapi.Signal) (termapi.SignalResult, error) {
	switch sig {
	case termapi.SIGINT, termapi.SIGTERM, termapi.SIGKILL, termapi.SIGTSTP, termapi.SIGHUP:
	default:
		return termapi.SignalResult{}, fmt.Errorf("memory session: %q: %w", sig, termapi.ErrUnsupportedSignal)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed || s.status.Exited:
		return termapi.SignalResult{}, fmt.Errorf("memory session: %w", termapi.ErrSessionExited)
	case s.reading:
		s.interrupt()
	case sig == termapi.SIGKILL:
		return termapi.SignalResult{}, fmt.Errorf("memory session: %w", termapi.ErrRefuseKillShell)
	}
	// The shell itself ignores the other signals, as an interactive one does.
	return termapi.SignalResult{}, nil
}

func (s *memSession) Close(context.Context, string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.status.Exited {
		s.status = termapi.Status{Exited: true, ExitCode: -1, Signal: "SIGHUP"}
	}
	if s.send != nil {
		s.settle(termapi.WaitSessionExit)
	}
	return nil
}

type memSend struct {
	s *memSession
	// Guarded by s.mu.
	out    []string // lines not yet returned by Output
	result termapi.SendResult
}

// observe settles a send that waits on input: being looked at is what
// proves the wait in memory.
func (m *memSend) observe() {
	if m.s.send == m && m.s.reading {
		m.s.settle(termapi.WaitStdinRead)
	}
}

func (m *memSend) Output(context.Context) (string, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	if len(m.out) > 0 {
		out := strings.Join(m.out, "\n") + "\n"
		m.out = nil
		return out, nil
	}
	m.observe()
	return "", io.EOF
}

func (m *memSend) Wait(context.Context) (termapi.SendResult, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	m.observe()
	return m.result, nil
}

func (m *memSend) Cancel() bool {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	if m.s.send != m {
		return false
	}
	m.s.interrupt()
	return true
}
