package terminal_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stubBackend is a scripted Backend. Spawn records the spec and runs the
// spawn function when set; otherwise it returns a fresh stubSession at once
// and records that too.
type stubBackend struct {
	termapi.UnsupportedLister
	typ   string
	spawn func(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error)

	mu       sync.Mutex
	specs    []termapi.SpawnSpec
	sessions []*stubSession
}

func (b *stubBackend) Type() string { return b.typ }

func (b *stubBackend) Spawn(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
	b.mu.Lock()
	b.specs = append(b.specs, spec)
	b.mu.Unlock()
	if b.spawn != nil {
		return b.spawn(ctx, spec)
	}
	sess := newStubSession()
	b.mu.Lock()
	b.sessions = append(b.sessions, sess)
	b.mu.Unlock()
	return sess, nil
}

func (b *stubBackend) session(i int) *stubSession {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[i]
}

func (b *stubBackend) spec(i int) termapi.SpawnSpec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.specs[i]
}

// gatedSpawn is a backend spawn that blocks until the test releases it,
// so a spawn can be held pending while the test acts.
type gatedSpawn struct {
	started chan context.Context // receives the backend's ctx once Spawn runs
	release chan spawnOutcome
}

type spawnOutcome struct {
	session termapi.Session
	err     error
}

func newGatedSpawn() *gatedSpawn {
	return &gatedSpawn{started: make(chan context.Context, 1), release: make(chan spawnOutcome, 1)}
}

func (g *gatedSpawn) spawn(ctx context.Context, _ termapi.SpawnSpec) (termapi.Session, error) {
	g.started <- ctx
	o := <-g.release
	return o.session, o.err
}

// stubSession is a scripted Session. Close records every reason it is
// called with; it fails with closeErr while that is set, and blocks on
// closeGate while that is set.
type stubSession struct {
	termapi.Unsupported
	pid  int
	motd string
	caps termapi.Capabilities

	mu        sync.Mutex
	status    termapi.Status
	reasons   []string
	closeErr  error
	closeGate chan struct{}
	startErr  error
	sends     []*stubSend
	reads     int
}

func newStubSession() *stubSession {
	return &stubSession{pid: 123, motd: "stub ready", status: termapi.Running}
}

func (s *stubSession) Motd() string { return s.motd }
func (s *stubSession) PID() int     { return s.pid }

func (s *stubSession) Status() termapi.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *stubSession) setStatus(st termapi.Status) {
	s.mu.Lock()
	s.status = st
	s.mu.Unlock()
}

func (s *stubSession) StartSend(context.Context, termapi.SendRequest) (termapi.Send, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.startErr != nil {
		return nil, s.startErr
	}
	send := &stubSend{settled: make(chan struct{}), lines: make(chan string, 16)}
	s.sends = append(s.sends, send)
	return send, nil
}

func (s *stubSession) lastSend() *stubSend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends[len(s.sends)-1]
}

func (s *stubSession) Read(req termapi.ReadRequest) (termapi.ReadResult, error) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	return termapi.ReadResult{Text: "0:0", TotalLines: 1, LineBegin: req.Offset, LineEnd: req.Offset + 1}, nil
}

func (s *stubSession) Signal(context.Context, termapi.Signal) (termapi.SignalResult, error) {
	return termapi.SignalResult{TargetPGID: 456}, nil
}

func (s *stubSession) Close(ctx context.Context, reason string) error {
	s.mu.Lock()
	s.reasons = append(s.reasons, reason)
	gate, err := s.closeGate, s.closeErr
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	s.setStatus(termapi.Status{Exited: true, ExitCode: -1, Signal: "SIGHUP"})
	return nil
}

// failClose makes Close fail with err (nil: succeed again).
func (s *stubSession) failClose(err error) {
	s.mu.Lock()
	s.closeErr = err
	s.mu.Unlock()
}

// gateClose makes Close block until the returned channel is closed.
func (s *stubSession) gateClose() chan struct{} {
	gate := make(chan struct{})
	s.mu.Lock()
	s.closeGate = gate
	s.mu.Unlock()
	return gate
}

func (s *stubSession) closeReasons() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reasons)
}

// stubSend settles when the test calls settle. Output returns queued lines
// until then, and io.EOF after.
type stubSend struct {
	settled chan struct{}
	lines   chan string
	result  termapi.SendResult
	err     error

	mu      sync.Mutex
	cancels int // Cancel calls before the send settled
}

func (s *stubSend) settle(res termapi.SendResult, err error) {
	s.result, s.err = res, err
	close(s.settled)
}

func (s *stubSend) Output(ctx context.Context) (string, error) {
	select {
	case line := <-s.lines:
		return line, nil
	default:
	}
	select {
	case line := <-s.lines:
		return line, nil
	case <-s.settled:
		return "", io.EOF
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (s *stubSend) Wait(ctx context.Context) (termapi.SendResult, error) {
	select {
	case <-s.settled:
		return s.result, s.err
	case <-ctx.Done():
		return termapi.SendResult{}, ctx.Err()
	}
}

func (s *stubSend) cancelCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancels
}

func (s *stubSend) Cancel() bool {
	select {
	case <-s.settled:
		return false
	default:
	}
	s.mu.Lock()
	s.cancels++
	s.mu.Unlock()
	return true
}

// newHost starts a host without plugins, which is all a test needs to make
// owners.
func newHost(t *testing.T) *host.Host {
	t.Helper()
	d, err := host.ParseDeployment("test.yaml", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Load(t.Context(), d, host.WithRegistry(host.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

func newOwner(t *testing.T, h *host.Host, id string) *host.Owner {
	t.Helper()
	o, err := h.NewOwner(id, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// newService returns a service with the backends registered; it is closed
// when the test ends.
func newService(t *testing.T, backends ...termapi.Backend) *terminal.Service {
	t.Helper()
	svc := terminal.NewService()
	for _, b := range backends {
		if _, err := svc.RegisterBackend(b); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	// The runtime invariants hold at every test's end, before the close;
	// the tests of the invariants themselves leave violations behind.
	checks := svc.Invariants()
	t.Cleanup(func() {
		for name, check := range checks {
			if err := check(context.Background()); err != nil && !strings.Contains(t.Name(), "Invariants") {
				t.Errorf("invariant %s: %v", name, err)
			}
		}
	})
	return svc
}

// mustSpawn spawns a session that must succeed.
func mustSpawn(t *testing.T, svc *terminal.Service, owner *host.Owner, typ, name string) terminal.SessionInfo {
	t.Helper()
	info, err := svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: typ, Name: name})
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	return info
}

func (s *stubSession) Capabilities() termapi.Capabilities { return s.caps }
