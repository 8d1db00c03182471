package mcpfront

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpServer serves r.f at /mcp on a local test server.
type httpServer struct {
	url    string
	client *http.Client
}

func (r *rig) serveHTTP(t *testing.T, opts HTTPOptions) *httpServer {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", r.f.Handler(opts))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		// Close the front first: it ends the sessions, and with them the
		// long-lived SSE streams srv.Close would wait for.
		if err := r.f.Close(context.Background()); err != nil {
			t.Errorf("front close: %v", err)
		}
		srv.Close()
	})
	return &httpServer{url: srv.URL + "/mcp", client: srv.Client()}
}

func (s *httpServer) connect(t *testing.T, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := newClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: s.client}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// post sends one raw JSON-RPC message on a session, the way any client does.
func (s *httpServer) post(ctx context.Context, cs *mcp.ClientSession, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
	return s.client.Do(req)
}

// ownerID is the owner id from the whoami test tool's "<owner> <workdir>".
func ownerID(whoami string) string {
	id, _, _ := strings.Cut(whoami, " ")
	return id
}

func ownerCount(f *Front) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.owners)
}

func TestHTTPSessionsAreIsolated(t *testing.T) {
	for _, v := range versions {
		t.Run(versionName(v), func(t *testing.T) {
			r := newRig(t)
			srv := r.serveHTTP(t, HTTPOptions{})
			a := srv.connect(t, v)
			b := srv.connect(t, v)
			// A 2026-07-28 probe falls back to a stateful legacy session.
			for _, cs := range []*mcp.ClientSession{a, b} {
				if got := cs.InitializeResult().ProtocolVersion; got != "2025-11-25" {
					t.Fatalf("negotiated %q, want 2025-11-25", got)
				}
			}
			whoA, _ := callText(t, a, "whoami", nil)
			whoB, _ := callText(t, b, "whoami", nil)
			idA, idB := ownerID(whoA), ownerID(whoB)
			if !strings.HasPrefix(idA, "mcp-") || !strings.HasPrefix(idB, "mcp-") || idA == idB || a.ID() == b.ID() {
				t.Fatalf("owners %q and %q for sessions %q and %q", idA, idB, a.ID(), b.ID())
			}
			// The session id is the session's credential: it must not
			// become the owner id, which the shell's environment shows.
			if strings.Contains(idA, a.ID()) || strings.Contains(idB, b.ID()) {
				t.Fatalf("owner ids %q, %q carry the session ids", idA, idB)
			}
			callText(t, a, "remember", map[string]any{"value": "a1"})
			callText(t, b, "remember", map[string]any{"value": "b1"})
			if prev, _ := callText(t, a, "remember", map[string]any{"value": "a2"}); prev != "a1" {
				t.Fatalf("session a remembered %q, want a1", prev)
			}
			if n := ownerCount(r.f); n != 2 {
				t.Fatalf("%d owners, want 2 (a discovery probe must not get one)", n)
			}

			// The client's Close sends DELETE: the owner closes with it.
			a.Close()
			if got := recv(t, r.closed, "owner a to close"); got != idA {
				t.Fatalf("closed %q, want owner of session a", got)
			}
			if prev, _ := callText(t, b, "remember", map[string]any{"value": "b2"}); prev != "b1" {
				t.Fatalf("session b remembered %q, want b1", prev)
			}
		})
	}
}

// blockOverHTTP starts a block call on cs in the background and waits until
// the tool runs. The returned channel yields the client's outcome.
func blockOverHTTP(t *testing.T, r *rig, ctx context.Context, cs *mcp.ClientSession) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "block"})
		errc <- err
	}()
	recv(t, r.started, "the call to start")
	return errc
}

func TestHTTPCancelNotificationCancelsCall(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{})
	cs := srv.connect(t, "")
	who, _ := callText(t, cs, "whoami", nil)
	ctx, cancel := context.WithCancel(t.Context())
	errc := blockOverHTTP(t, r, ctx, cs)
	cancel()
	// The SDK client both sends notifications/cancelled and drops the POST;
	// whichever the server notices first stops the call.
	if cause := recv(t, r.stopped, "the call to be cancelled"); !errors.Is(cause, context.Canceled) && !errors.Is(cause, ErrClientGone) {
		t.Fatalf("cause %v, want a cancellation", cause)
	}
	recv(t, errc, "the client call to return")
	if again, _ := callText(t, cs, "whoami", nil); again != who {
		t.Fatalf("after cancel: %q, want %q", again, who)
	}
}

func TestHTTPClientVanishesMidCall(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{})
	cs := srv.connect(t, "")
	who, _ := callText(t, cs, "whoami", nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		resp, err := srv.post(ctx, cs, `{"jsonrpc":"2.0","id":"gone","method":"tools/call","params":{"name":"block","arguments":{}}}`)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	recv(t, r.started, "the call to start")
	cancel() // the connection drops, with no notifications/cancelled
	if cause := recv(t, r.stopped, "the call to be cancelled"); !errors.Is(cause, ErrClientGone) {
		t.Fatalf("cause %v, want %v", cause, ErrClientGone)
	}
	recv(t, done, "the POST to end")
	if again, _ := callText(t, cs, "whoami", nil); again != who {
		t.Fatalf("the session's owner changed: %q, want %q", again, who)
	}
}

func TestHTTPDeleteMidCallClosesOwner(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{})
	cs := srv.connect(t, "")
	who, _ := callText(t, cs, "whoami", nil)
	errc := blockOverHTTP(t, r, t.Context(), cs)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := srv.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s", resp.Status)
	}
	if cause := recv(t, r.stopped, "the call to be cancelled"); !errors.Is(cause, ErrSessionClosed) {
		t.Fatalf("cause %v, want %v", cause, ErrSessionClosed)
	}
	if got := recv(t, r.closed, "the owner to close"); got != ownerID(who) {
		t.Fatalf("closed %q", got)
	}
	recv(t, errc, "the client call to return")
}

// Between the front closing a session's owner and the SDK ending the
// session (a DELETE is handled in that order), a call that slips in must not
// get the session a new owner and shell, which the ending session would then
// wait for.
func TestHTTPCallAfterOwnerClosedIsRefused(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{})
	cs := srv.connect(t, "")
	who, _ := callText(t, cs, "whoami", nil)
	// The first half of a DELETE: the owner closes, the session lives on.
	r.f.endSessionByID(t.Context(), cs.ID())
	if got := recv(t, r.closed, "the owner to close"); got != ownerID(who) {
		t.Fatalf("closed %q", got)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError || !strings.Contains(werr.Message, ErrSessionClosed.Error()) {
		t.Fatalf("got result %+v, error %v; want JSON-RPC internal error %q", res, err, ErrSessionClosed)
	}
}

func TestHTTPIdleSessionCloses(t *testing.T) {
	r := newRig(t)
	// Long enough that connecting and the first call, on a loaded machine
	// under -race, never take longer: the session must expire only after.
	srv := r.serveHTTP(t, HTTPOptions{IdleTimeout: time.Second})
	cs := srv.connect(t, "")
	who, _ := callText(t, cs, "whoami", nil)
	if got := recv(t, r.closed, "the idle session's owner to close"); got != ownerID(who) {
		t.Fatalf("closed %q", got)
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"}); err == nil {
		t.Fatal("a call on an expired session succeeded")
	}
}

func TestHTTPCloseEndsEverything(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{})
	a := srv.connect(t, "")
	b := srv.connect(t, "")
	callText(t, a, "whoami", nil)
	callText(t, b, "whoami", nil)
	errc := blockOverHTTP(t, r, t.Context(), a)
	if err := r.f.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cause := recv(t, r.stopped, "the call to be cancelled"); !errors.Is(cause, ErrSessionClosed) {
		t.Fatalf("cause %v, want %v", cause, ErrSessionClosed)
	}
	recv(t, r.closed, "an owner to close")
	recv(t, r.closed, "the other owner to close")
	recv(t, errc, "the client call to return")
}

func TestHTTPRejectsCrossOriginAndForeignHosts(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{})
	tests := []struct {
		name   string
		header map[string]string
		host   string
	}{
		{"cross-site browser request", map[string]string{"Sec-Fetch-Site": "cross-site"}, ""},
		{"DNS rebinding", nil, "evil.example:80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			resp, err := srv.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("got %s, want 403", resp.Status)
			}
		})
	}
}

// TestHTTPChecksComeFirst: a request a web page could forge has no effect
// at all. A DELETE with a rebinding Host used to close the session before
// the SDK refused it; a GET from a foreign origin used to be served.
func TestHTTPChecksComeFirst(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{})
	cs := srv.connect(t, "")
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, host, origin string
	}{
		{"DELETE with a rebinding Host", http.MethodDelete, "evil.example:80", ""},
		{"DELETE from a foreign origin", http.MethodDelete, "", "http://evil.example"},
		{"GET from a foreign origin", http.MethodGet, "", "http://evil.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", cs.ID())
			req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			resp, err := srv.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("got %s, want 403", resp.Status)
			}
		})
	}
	if n := ownerCount(r.f); n != 1 {
		t.Errorf("%d owners after the refused requests, want the session's one", n)
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"}); err != nil {
		t.Errorf("the session after the refused requests: %v", err)
	}
}

// TestHTTPProgressKeepsLongCallsAlive: a call whose request carries a
// progress token reports at once, which puts the response on the wire,
// and then at every interval while it runs, so that a client that gives up
// on a silent request keeps waiting.
func TestHTTPProgressKeepsLongCallsAlive(t *testing.T) {
	r := newRig(t)
	f := New(r.h, Options{Workdir: r.workdir, ProgressInterval: 20 * time.Millisecond})
	srv := httptest.NewServer(f.Handler(HTTPOptions{}))
	t.Cleanup(func() {
		f.Close(context.Background())
		srv.Close()
	})
	progress := make(chan *mcp.ProgressNotificationParams, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params:
			default:
			}
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: srv.Client()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	params := &mcp.CallToolParams{Name: "block"}
	params.SetProgressToken("tok-1")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, params)
		done <- err
	}()
	last := -1.0
	for i := range 3 {
		p := recv(t, progress, fmt.Sprintf("progress report %d", i+1))
		if p.ProgressToken != "tok-1" || p.Progress < last || !strings.HasPrefix(p.Message, "running for ") {
			t.Fatalf("report %d: %+v (previous progress %v)", i+1, p, last)
		}
		last = p.Progress
	}
	cancel()
	recv(t, done, "the call to end")
}

// A tools/call's response starts before the call ends, with or without a
// progress token: a client that gives up on a response that has not
// begun would otherwise drop a long call. (Here the call blocks until the
// client goes away: without early headers, Do would not return.)
func TestHTTPResponseStartsBeforeTheResult(t *testing.T) {
	r := newRig(t)
	r.f = New(r.h, Options{Workdir: r.workdir, ProgressInterval: 20 * time.Millisecond})
	s := r.serveHTTP(t, HTTPOptions{})
	cs := s.connect(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp, err := s.post(ctx, cs, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	recv(t, r.started, "the call to start")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("response %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// Then comment lines keep the stream alive while the call runs.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, ": ") {
		t.Fatalf("first line %q, %v; want an SSE comment", line, err)
	}
	cancel()
	recv(t, r.stopped, "the call to stop")
}
