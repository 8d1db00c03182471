package mcpfront

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// rawHTTP drives the streamable HTTP transport by hand, as a client that
// leaves without a DELETE does.
type rawHTTP struct {
	t       *testing.T
	url     string
	client  *http.Client
	session string
}

func (c *rawHTTP) do(ctx context.Context, method, body string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode >= 300 {
		c.t.Fatalf("%s: %s", method, resp.Status)
	}
	return resp
}

// post sends body and reads the whole answer.
func (c *rawHTTP) post(body string) string {
	c.t.Helper()
	resp := c.do(c.t.Context(), http.MethodPost, body)
	defer resp.Body.Close()
	if c.session == "" {
		c.session = resp.Header.Get("Mcp-Session-Id")
	}
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

func startRawHTTP(t *testing.T, r *rig, grace time.Duration) (*rawHTTP, *orphans) {
	t.Helper()
	srv := httptest.NewServer(r.f.Handler(HTTPOptions{OrphanGrace: grace}))
	t.Cleanup(func() {
		r.f.Close(context.Background())
		srv.Close()
	})
	c := &rawHTTP{t: t, url: srv.URL, client: srv.Client()}
	c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if c.session == "" {
		t.Fatal("no session id")
	}
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r.f.mu.Lock()
	o := r.f.orphans[len(r.f.orphans)-1]
	r.f.mu.Unlock()
	return c, o
}

// openStream opens the session's standalone GET stream; the returned func
// closes it, as a client that goes away does.
func (c *rawHTTP) openStream() (closeStream func()) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(c.t.Context())
	resp := c.do(ctx, http.MethodGet, "")
	return func() {
		cancel()
		resp.Body.Close()
	}
}

// TestHTTPOrphanedSessionCloses: a client that closes its GET stream and
// sends nothing more (Claude Code and Gemini CLI never send DELETE) loses
// its session, and its shell, after the grace.
func TestHTTPOrphanedSessionCloses(t *testing.T) {
	r := newRig(t)
	c, _ := startRawHTTP(t, r, 20*time.Millisecond)
	c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami"}}`)
	c.openStream()()
	recv(t, r.closed, "the orphaned session's owner to close")
}

// TestHTTPRunningCallKeepsSession: with a call running, a closed GET stream
// does not end the session; the grace starts once the call has ended.
func TestHTTPRunningCallKeepsSession(t *testing.T) {
	r := newRig(t)
	c, orphans := startRawHTTP(t, r, 20*time.Millisecond)
	c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami"}}`)
	closeStream := c.openStream()
	counted := make(chan struct{}, 16)
	orphans.mu.Lock()
	orphans.counted = func() { counted <- struct{}{} }
	orphans.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	called := make(chan struct{})
	go func() {
		defer close(called)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if resp, err := c.client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	recv(t, r.started, "the call to start")
	closeStream()
	recv(t, counted, "the stream's end to be counted")
	orphans.mu.Lock()
	l := orphans.sessions[c.session]
	streams, requests, timer := l.streams, l.requests, l.timer
	orphans.mu.Unlock()
	if streams != 0 || requests != 1 || timer != nil {
		t.Fatalf("with the call running: %d streams, %d requests, timer %v", streams, requests, timer != nil)
	}
	select {
	case id := <-r.closed:
		t.Fatalf("owner %s closed while its call ran", id)
	default:
	}
	cancel() // the client gives the call up, and leaves
	<-called
	recv(t, r.closed, "the session's owner to close after the call")
}

// TestHTTPStreamlessSessionIsLeftAlone: a client that never opens a GET
// stream is not taken for gone between its requests.
func TestHTTPStreamlessSessionIsLeftAlone(t *testing.T) {
	r := newRig(t)
	c, orphans := startRawHTTP(t, r, time.Nanosecond)
	c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami"}}`)
	orphans.mu.Lock()
	_, tracked := orphans.sessions[c.session]
	orphans.mu.Unlock()
	if tracked {
		t.Error("a session without a GET stream has a grace timer")
	}
	if got := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`); !strings.Contains(got, "still here") {
		t.Errorf("second call: %q", got)
	}
}

// TestHTTPCancelledRequestGetsNoResponse: once the client cancels a call,
// the POST that carried it ends without an answer.
func TestHTTPCancelledRequestGetsNoResponse(t *testing.T) {
	r := newRig(t)
	c, _ := startRawHTTP(t, r, -1)
	body := make(chan string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"block"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := c.client.Do(req)
		if err != nil {
			body <- "error: " + err.Error()
			return
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body <- string(data)
	}()
	recv(t, r.started, "the call to start")
	c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"Esc"}}`)
	recv(t, r.stopped, "the call to stop")
	if got := recv(t, body, "the POST to end"); strings.Contains(got, `"id":5`) {
		t.Errorf("the cancelled call was answered: %q", got)
	}
}
