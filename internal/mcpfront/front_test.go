package mcpfront

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshdev/dsh/host"
)

// deadline bounds every wait for an event; it is generous on purpose: it
// only decides how long a broken test takes to fail.
const deadline = 30 * time.Second

// Protocol versions the tests run under: the newest legacy one (initialize
// handshake) and the SDK's latest (2026-07-28, discover, no handshake; over
// HTTP the client falls back to the legacy one).
var versions = []string{"2025-11-25", ""}

func versionName(v string) string {
	if v == "" {
		return "latest"
	}
	return v
}

// rig is a host with test tools, and a front over it.
type rig struct {
	h       *host.Host
	f       *Front
	workdir string

	started chan string // owner id of each block call that started
	stopped chan error  // context.Cause of each block call that ended
	closed  chan string // owner id of each tracked owner that closed

	mu      sync.Mutex
	tracked map[string]bool
	memory  map[string]string
}

type noArgs struct{}

type echoArgs struct {
	Text string `json:"text" jsonschema:"minLength=1" jsonschema_description:"Text to echo."`
}

type rememberArgs struct {
	Value string `json:"value"`
}

func newRig(t testing.TB) *rig {
	t.Helper()
	r := &rig{
		workdir: t.TempDir(),
		started: make(chan string, 16),
		stopped: make(chan error, 16),
		closed:  make(chan string, 1024),
		tracked: make(map[string]bool),
		memory:  make(map[string]string),
	}
	h, err := host.Load(t.Context(), &host.Deployment{Source: "test"}, host.WithRegistry(host.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("host close: %v", err)
		}
	})
	r.h = h
	register(t, h, "whoami", "Print the owner id and workdir.", func(_ context.Context, o *host.Owner, _ noArgs) (string, error) {
		r.track(t, o)
		return o.ID() + " " + o.Workdir(), nil
	})
	register(t, h, "remember", "Store a value for this owner and print the previous one.", func(_ context.Context, o *host.Owner, a rememberArgs) (string, error) {
		r.track(t, o)
		r.mu.Lock()
		defer r.mu.Unlock()
		prev := r.memory[o.ID()]
		r.memory[o.ID()] = a.Value
		return prev, nil
	})
	register(t, h, "echo", "Echo text.", func(_ context.Context, _ *host.Owner, a echoArgs) (string, error) {
		return a.Text, nil
	})
	register(t, h, "empty", "Print nothing.", func(context.Context, *host.Owner, noArgs) (string, error) {
		return "", nil
	})
	register(t, h, "fail", "Fail.", func(context.Context, *host.Owner, noArgs) (string, error) {
		return "", errors.New("failed on purpose")
	})
	register(t, h, "boom", "Panic.", func(context.Context, *host.Owner, noArgs) (string, error) {
		panic("tool bug")
	})
	register(t, h, "block", "Block until cancelled.", func(ctx context.Context, o *host.Owner, _ noArgs) (string, error) {
		r.started <- o.ID()
		<-ctx.Done()
		cause := context.Cause(ctx)
		r.stopped <- cause
		return "", fmt.Errorf("stopped: %w", cause)
	})
	r.f = New(h, Options{Workdir: r.workdir, Version: "test", NoFastPath: noFastPath})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		if err := r.f.Close(ctx); err != nil {
			t.Errorf("front close: %v", err)
		}
	})
	return r
}

func register[A any](t testing.TB, h *host.Host, name, desc string, run func(context.Context, *host.Owner, A) (string, error)) {
	t.Helper()
	tool, err := host.NewTool(name, desc, run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Tools().Register(tool); err != nil {
		t.Fatal(err)
	}
}

// track reports the owner on r.closed when it closes, as a shell would be
// closed with it.
func (r *rig) track(t testing.TB, o *host.Owner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tracked[o.ID()] {
		return
	}
	r.tracked[o.ID()] = true
	if _, err := o.Defer(func(context.Context) error { r.closed <- o.ID(); return nil }); err != nil {
		t.Errorf("owner defer: %v", err)
	}
}

func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadline):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func newClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0"}, nil)
}

// served is a client session connected to Serve.
type served struct {
	cs   *mcp.ClientSession
	done chan error // Serve's result
	// hangUp makes the client vanish: both pipes break, as when a client
	// process dies.
	hangUp func()
}

// serveInMemory connects a client to r.f.Serve(ctx) over the SDK's
// in-memory transports.
func (r *rig) serveInMemory(t testing.TB, ctx context.Context, version string) *served {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	return r.connect(t, ctx, version, ct, st, func() {})
}

// servePipes connects a client to r.f.Serve(ctx) over a pair of pipes, the
// way stdio works, so a test can break them.
func (r *rig) servePipes(t testing.TB, ctx context.Context, version string) *served {
	t.Helper()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	st := &mcp.IOTransport{Reader: sr, Writer: sw}
	ct := &mcp.IOTransport{Reader: cr, Writer: cw}
	return r.connect(t, ctx, version, ct, st, func() {
		cw.CloseWithError(io.ErrUnexpectedEOF)
		cr.CloseWithError(io.ErrUnexpectedEOF)
	})
}

// serveStdio connects a client to r.f.Serve(ctx) over pipes with the
// stdio transport, which answers tools/call itself (fastcall.go).
func (r *rig) serveStdio(t testing.TB, ctx context.Context, version string) *served {
	t.Helper()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	st := &StdioTransport{Reader: sr, Writer: sw}
	ct := &mcp.IOTransport{Reader: cr, Writer: cw}
	return r.connect(t, ctx, version, ct, st, func() {
		cw.CloseWithError(io.ErrUnexpectedEOF)
		cr.CloseWithError(io.ErrUnexpectedEOF)
	})
}

// serveFunc connects a client to r.f.Serve(ctx) at a protocol version.
type serveFunc func(r *rig, t testing.TB, ctx context.Context, version string) *served

type transport struct {
	name  string
	serve serveFunc
}

// transports are how a test's client connects: the SDK's in-memory
// transport (the SDK answers every request) and the stdio transport.
var transports = []transport{
	{"in-memory", (*rig).serveInMemory},
	{"stdio", (*rig).serveStdio},
}

// eachConnection runs test once per transport and protocol version.
func eachConnection(t *testing.T, ts []transport, test func(t *testing.T, serve serveFunc, version string)) {
	for _, tr := range ts {
		for _, v := range versions {
			t.Run(tr.name+"/"+versionName(v), func(t *testing.T) { test(t, tr.serve, v) })
		}
	}
}

func (r *rig) connect(t testing.TB, ctx context.Context, version string, ct, st mcp.Transport, hangUp func()) *served {
	t.Helper()
	s := &served{done: make(chan error, 1), hangUp: hangUp}
	go func() { s.done <- r.f.Serve(ctx, st) }()
	cs, err := newClient().Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	s.cs = cs
	t.Cleanup(func() {
		cs.Close()
		if err := recv(t, s.done, "Serve to return"); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func callText(t testing.TB, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return resultText(t, res), res.IsError
}

// resultText insists on exactly one text block, and returns its text.
func resultText(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d content blocks, want 1: %+v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("result content is %T, want text", res.Content[0])
	}
	return tc.Text
}

func TestToolsListKeepsSchemas(t *testing.T) {
	r := newRig(t)
	want := r.h.Tools().List()
	for _, v := range versions {
		t.Run(versionName(v), func(t *testing.T) {
			s := r.serveInMemory(t, t.Context(), v)
			// Without a handshake version, the SDK client discovers the
			// newest one: stdio-like transports serve 2026-07-28 too.
			if got, want := s.cs.InitializeResult().ProtocolVersion, cmp.Or(v, "2026-07-28"); got != want {
				t.Fatalf("negotiated %q, want %q", got, want)
			}
			res, err := s.cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tools) != len(want) {
				t.Fatalf("listed %d tools, want %d", len(res.Tools), len(want))
			}
			for i, tool := range res.Tools {
				w := want[i]
				if tool.Name != w.Name || tool.Description != w.Description {
					t.Errorf("tool %d: %q %q, want %q %q", i, tool.Name, tool.Description, w.Name, w.Description)
				}
				if got, want := jsonValue(t, tool.InputSchema), jsonValue(t, w.InputSchema); !reflect.DeepEqual(got, want) {
					t.Errorf("%s schema:\n got %v\nwant %v", tool.Name, got, want)
				}
			}
		})
	}
}

func jsonValue(t *testing.T, v any) any {
	t.Helper()
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCallResults(t *testing.T) {
	r := newRig(t)
	tests := []struct {
		name    string
		tool    string
		args    any
		want    string
		isError bool
	}{
		{"text", "echo", map[string]any{"text": "hi\nthere"}, "hi\nthere", false},
		{"empty text is still one block", "empty", nil, "", false},
		{"tool error", "fail", nil, "failed on purpose", true},
		{"tool panic", "boom", nil, `tool "boom" failed: internal error (panic: tool bug)`, true},
		{"missing argument", "echo", nil, `invalid arguments: missing required property "text"`, true},
		{"empty argument", "echo", map[string]any{"text": ""}, `invalid arguments: "text" must be at least 1 characters long`, true},
		{"unknown argument is ignored", "echo", map[string]any{"text": "a", "wait_for_previous": true}, "a", false},
		{"misspelt argument is named", "echo", map[string]any{"txet": "b"}, `invalid arguments: missing required property "text" (ignored unknown property "txet")`, true},
		{"wrong type", "echo", map[string]any{"text": 5}, `invalid arguments: "text" must be a string, got number 5`, true},
	}
	eachConnection(t, transports, func(t *testing.T, serve serveFunc, v string) {
		s := serve(r, t, t.Context(), v)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				text, isError := callText(t, s.cs, tt.tool, tt.args)
				if text != tt.want || isError != tt.isError {
					t.Fatalf("got %q (isError %v), want %q (isError %v)", text, isError, tt.want, tt.isError)
				}
			})
		}
	})
}

func TestUnknownToolIsProtocolError(t *testing.T) {
	r := newRig(t)
	for _, v := range versions {
		t.Run(versionName(v), func(t *testing.T) {
			s := r.serveInMemory(t, t.Context(), v)
			res, err := s.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "nosuch"})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("got result %+v, error %v; want JSON-RPC error %d", res, err, jsonrpc.CodeInvalidParams)
			}
		})
	}
}

func TestCallWhileClosingIsProtocolError(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			r := newRig(t)
			s := tr.serve(r, t, t.Context(), "")
			// The window between Close starting and the session closing is
			// too short to hit from outside; open it by hand.
			r.f.mu.Lock()
			r.f.closing = true
			r.f.mu.Unlock()
			_, err := s.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
			r.f.mu.Lock()
			r.f.closing = false
			r.f.mu.Unlock()
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError || !strings.Contains(werr.Message, ErrClosed.Error()) {
				t.Fatalf("got %v, want JSON-RPC internal error %q", err, ErrClosed)
			}
		})
	}
}

func TestCancelNotificationCancelsCall(t *testing.T) {
	eachConnection(t, transports, testCancelNotification)
}

func testCancelNotification(t *testing.T, serve serveFunc, v string) {
	r := newRig(t)
	s := serve(r, t, t.Context(), v)
	owner, _ := callText(t, s.cs, "whoami", nil)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "block"})
		errc <- err
	}()
	if id := recv(t, r.started, "the call to start"); !strings.HasPrefix(owner, id+" ") {
		t.Fatalf("block ran as %q, whoami said %q", id, owner)
	}
	cancel()
	if err := recv(t, errc, "the client call to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("client call: %v, want context.Canceled", err)
	}
	if cause := recv(t, r.stopped, "the tool to see the cancellation"); !errors.Is(cause, context.Canceled) {
		t.Fatalf("tool saw %v, want context.Canceled", cause)
	}
	// The session and its owner carry on.
	if again, _ := callText(t, s.cs, "whoami", nil); again != owner {
		t.Fatalf("after cancel: %q, want %q", again, owner)
	}
}

func TestOneOwnerPerSession(t *testing.T) {
	for _, v := range versions {
		t.Run(versionName(v), func(t *testing.T) {
			r := newRig(t)
			a := r.serveInMemory(t, t.Context(), v)
			b := r.serveInMemory(t, t.Context(), v)
			whoA, _ := callText(t, a.cs, "whoami", nil)
			whoB, _ := callText(t, b.cs, "whoami", nil)
			idA, dirA, _ := strings.Cut(whoA, " ")
			idB, _, _ := strings.Cut(whoB, " ")
			if !strings.HasPrefix(idA, "mcp-") || !strings.HasPrefix(idB, "mcp-") || idA == idB {
				t.Fatalf("owners %q and %q: want distinct mcp- ids", idA, idB)
			}
			if want, _ := filepath.Abs(r.workdir); dirA != want {
				t.Fatalf("workdir %q, want %q", dirA, want)
			}
			callText(t, a.cs, "remember", map[string]any{"value": "a1"})
			callText(t, b.cs, "remember", map[string]any{"value": "b1"})
			if prev, _ := callText(t, a.cs, "remember", map[string]any{"value": "a2"}); prev != "a1" {
				t.Fatalf("session a remembered %q, want a1", prev)
			}
			if again, _ := callText(t, a.cs, "whoami", nil); again != whoA {
				t.Fatalf("same session, new owner: %q then %q", whoA, again)
			}

			// Closing a session closes its owner, and only its owner.
			a.cs.Close()
			if got := recv(t, r.closed, "owner a to close"); got != idA {
				t.Fatalf("closed %q, want %q", got, idA)
			}
			if prev, _ := callText(t, b.cs, "remember", map[string]any{"value": "b2"}); prev != "b1" {
				t.Fatalf("session b remembered %q, want b1", prev)
			}
		})
	}
}

func TestSessionWithoutCallsHasNoOwner(t *testing.T) {
	r := newRig(t)
	s := r.serveInMemory(t, t.Context(), "")
	if _, err := s.cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	r.f.mu.Lock()
	n := len(r.f.owners)
	r.f.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d owners after tools/list, want 0", n)
	}
}

func TestClientVanishesMidCall(t *testing.T) {
	// Pipes, which a test can break: the SDK's IO transport and ours.
	eachConnection(t, []transport{{"sdk-io", (*rig).servePipes}, {"stdio", (*rig).serveStdio}}, testClientVanishes)
}

func testClientVanishes(t *testing.T, serve serveFunc, v string) {
	r := newRig(t)
	s := serve(r, t, t.Context(), v)
	who, _ := callText(t, s.cs, "whoami", nil)
	id, _, _ := strings.Cut(who, " ")
	errc := make(chan error, 1)
	go func() {
		_, err := s.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "block"})
		errc <- err
	}()
	recv(t, r.started, "the call to start")
	s.hangUp()
	recv(t, r.stopped, "the call to be cancelled")
	if got := recv(t, r.closed, "the owner to close"); got != id {
		t.Fatalf("closed %q, want %q", got, id)
	}
	if err := recv(t, s.done, "Serve to return"); err == nil {
		t.Fatal("Serve returned nil for a broken connection")
	}
	s.done <- nil // for the cleanup
	if err := recv(t, errc, "the client call to fail"); err == nil {
		t.Fatal("client call succeeded on a broken connection")
	}
}

func TestServeContextEndsSession(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testServeContextEnds(t, tr.serve) })
	}
}

func testServeContextEnds(t *testing.T, serve serveFunc) {
	r := newRig(t)
	ctx, cancel := context.WithCancel(t.Context())
	s := serve(r, t, ctx, "")
	who, _ := callText(t, s.cs, "whoami", nil)
	id, _, _ := strings.Cut(who, " ")
	go s.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "block"})
	recv(t, r.started, "the call to start")
	cancel()
	if cause := recv(t, r.stopped, "the call to be cancelled"); !errors.Is(cause, ErrSessionClosed) {
		t.Fatalf("cause %v, want %v", cause, ErrSessionClosed)
	}
	if got := recv(t, r.closed, "the owner to close"); got != id {
		t.Fatalf("closed %q, want %q", got, id)
	}
	if err := recv(t, s.done, "Serve to return"); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	s.done <- nil
}

func TestCloseEndsEverything(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testCloseEnds(t, tr.serve) })
	}
}

func testCloseEnds(t *testing.T, serve serveFunc) {
	r := newRig(t)
	a := serve(r, t, t.Context(), "")
	b := serve(r, t, t.Context(), "2025-11-25")
	callText(t, a.cs, "whoami", nil)
	callText(t, b.cs, "whoami", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := a.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "block"})
		errc <- err
	}()
	recv(t, r.started, "the call to start")
	if err := r.f.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cause := recv(t, r.stopped, "the call to be cancelled"); !errors.Is(cause, ErrSessionClosed) {
		t.Fatalf("cause %v, want %v", cause, ErrSessionClosed)
	}
	recv(t, r.closed, "an owner to close")
	recv(t, r.closed, "the other owner to close")
	for _, s := range []*served{a, b} {
		if err := recv(t, s.done, "Serve to return"); err != nil {
			t.Errorf("Serve: %v", err)
		}
		s.done <- nil
	}
	recv(t, errc, "the blocked client call to return")
}

// BenchmarkCallInMemory measures the front's own cost per call: MCP framing
// over the SDK's in-memory transport, the owner lookup and the tools
// service, with a tool that does nothing.
func BenchmarkCallInMemory(b *testing.B) {
	r := newRig(b)
	s := r.serveInMemory(b, b.Context(), "")
	args := map[string]any{"text": "hi"}
	for b.Loop() {
		if text, _ := callText(b, s.cs, "echo", args); text != "hi" {
			b.Fatalf("echo: %q", text)
		}
	}
}
