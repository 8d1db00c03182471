package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshdev/dsh/internal/mcpfast"
)

// httpExchange is one POST's answer, as a client sees it.
type httpExchange struct {
	status       int
	contentType  string
	cacheControl string
	body         string
	framing      string // protocol, Content-Length and Transfer-Encoding
}

func (e httpExchange) String() string {
	return fmt.Sprintf("%d %s (Cache-Control %q) %q (%s)", e.status, e.contentType, e.cacheControl, e.body, e.framing)
}

// fastHTTPClient is a session driven by hand over streamable HTTP.
type fastHTTPClient struct {
	t       *testing.T
	url     string
	client  *http.Client
	session string
	version string
	token   string // sent as a bearer token, when set
}

// startFastHTTP serves r.f over HTTP and opens a session whose client
// declares capabilities.
func startFastHTTP(t *testing.T, r *rig, capabilities string) *fastHTTPClient {
	t.Helper()
	srv := httptest.NewServer(r.f.Handler(HTTPOptions{}))
	t.Cleanup(func() {
		r.f.Close(context.Background())
		srv.Close()
	})
	c := &fastHTTPClient{t: t, url: srv.URL, client: srv.Client(), version: "2025-11-25"}
	c.open(capabilities)
	return c
}

// open initializes c's session under c.version, its client declaring
// capabilities.
func (c *fastHTTPClient) open(capabilities string) {
	c.t.Helper()
	c.session = ""
	resp := c.send(c.t.Context(), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+c.version+`","capabilities":`+capabilities+`,"clientInfo":{"name":"raw","version":"0"}}}`, nil)
	resp.Body.Close()
	if c.session = resp.Header.Get("Mcp-Session-Id"); c.session == "" {
		c.t.Fatalf("initialize: %s, no session id", resp.Status)
	}
	c.exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
}

// send posts body on the session, with the headers a client sends, changed
// by edit.
func (c *fastHTTPClient) send(ctx context.Context, body string, edit func(http.Header)) *http.Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if edit != nil {
		edit(req.Header)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

func (c *fastHTTPClient) exchange(body string, edit func(http.Header)) httpExchange {
	c.t.Helper()
	return c.read(c.send(c.t.Context(), body, edit))
}

func (c *fastHTTPClient) read(resp *http.Response) httpExchange {
	c.t.Helper()
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return httpExchange{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), string(data), fmt.Sprint(resp.Proto, " length ", resp.ContentLength, " ", resp.TransferEncoding)}
}

// as is c with another bearer token (none for "").
func (c *fastHTTPClient) as(token string) *fastHTTPClient {
	d := *c
	d.token = token
	return &d
}

// TestFastHTTPMatchesSDK: every answer the HTTP handler writes when it
// answers tools/call itself is the one the SDK writes: status, content
// type, caching, framing (chunked, or not) and event stream, byte for
// byte, over HTTP/1.1 and HTTP/2. The same script runs
// with and without the fast path, behind bearer tokens: sessions under
// each protocol version the SDK serves statefully, the per-request
// (2026-07-28) generation, which a stateful server refuses, with and
// without a session, calls that fail, progress, a cancelled call, the
// headers the SDK refuses or reads, other tokens' requests, and calls on
// a session that has ended. dsh never asks the SDK for JSON responses, so
// every call's answer is an event stream; a client that accepts only JSON
// is refused, by the SDK.
func TestFastHTTPMatchesSDK(t *testing.T) {
	if noFastPath {
		t.Skip("DSH_MCP_FAST_PATH=false: there is no fast path to compare with the SDK")
	}
	const call = `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{%s}}`
	run := func(t *testing.T, sdkOnly, http2 bool) (got []httpExchange, served int64) {
		r := newRig(t)
		r.f = New(r.h, Options{Workdir: r.workdir, Version: "test", NoFastPath: sdkOnly, ProgressInterval: time.Hour})
		srv := httptest.NewUnstartedServer(r.f.Handler(HTTPOptions{Tokens: tokens(t, tokenA, tokenB)}))
		if http2 {
			srv.EnableHTTP2 = true
			srv.StartTLS()
		} else {
			srv.Start()
		}
		t.Cleanup(func() {
			r.f.Close(context.Background())
			srv.Close()
		})
		c := &fastHTTPClient{t: t, url: srv.URL, client: srv.Client(), version: "2025-11-25", token: tokenA}
		c.open(`{}`)
		ids := []string{`7`, `"s-1"`, `9007199254740993`, `"<&>"`}
		for i, params := range fastCallParams {
			got = append(got, c.exchange(fmt.Sprintf(call, ids[i%len(ids)], params), nil))
		}
		// A progress token: a notification comes first, on the same stream.
		got = append(got, c.exchange(fmt.Sprintf(call, `"p"`, `"_meta":{"progressToken":"tok"},"name":"echo","arguments":{"text":"p"}`), nil))
		// Headers the SDK refuses, or reads.
		echo := fmt.Sprintf(call, `1`, `"name":"echo","arguments":{"text":"h"}`)
		for _, edit := range []func(http.Header){
			func(h http.Header) { h.Set("Mcp-Protocol-Version", "1999-01-01") },
			func(h http.Header) { h.Set("Mcp-Protocol-Version", "2025-06-18") },
			func(h http.Header) { h.Set("Mcp-Protocol-Version", "2026-07-28") },
			func(h http.Header) { h.Del("Mcp-Protocol-Version") },
			func(h http.Header) { h.Set("Accept", "application/json") },
			func(h http.Header) { h.Set("Accept", "text/event-stream") },
			func(h http.Header) { h.Del("Accept") },
			func(h http.Header) { h.Set("Content-Type", "text/plain") },
			func(h http.Header) { h.Set("Content-Type", "application/json; charset=utf-8") },
			func(h http.Header) { h.Set("Last-Event-ID", "x_1") },
			func(h http.Header) { h.Set("Accept", "*/*") },
			func(h http.Header) { h.Set("Mcp-Session-Id", "nosuch") },
		} {
			got = append(got, c.exchange(echo, edit))
		}
		// Bodies that are not one plain call.
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":[]}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call"}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}`,
			`[` + echo + `]`,
			`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"text":"n"}}}`,
			`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`,
		} {
			got = append(got, c.exchange(body, nil))
		}
		// _meta naming a protocol version, which stateful HTTP refuses.
		got = append(got, c.exchange(fmt.Sprintf(call, `2`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"},"name":"echo","arguments":{"text":"v"}`), nil))
		// The per-request generation: a probe, then calls, with the
		// session's id and without one.
		perRequest := fmt.Sprintf(call, `"pr"`, `"_meta":`+perRequestMeta+`,"name":"echo","arguments":{"text":"pr"}`)
		newGen := func(h http.Header) { h.Set("Mcp-Protocol-Version", "2026-07-28") }
		got = append(got, c.exchange(perRequest, newGen))
		got = append(got, c.exchange(perRequest, nil))
		stateless := c.as(tokenA)
		stateless.session = ""
		got = append(got, stateless.exchange(`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":`+perRequestMeta+`}}`, newGen))
		got = append(got, stateless.exchange(perRequest, newGen))
		// Other sessions, under the older protocol versions, calling in
		// turn with the first; one of them another token's.
		older := []*fastHTTPClient{c.as(tokenA), c.as(tokenB)}
		for i, v := range []string{"2025-06-18", "2025-03-26"} {
			older[i].version = v
			older[i].open(`{"roots":{}}`)
		}
		for i := range 3 {
			for j, s := range append(older, c) {
				got = append(got, s.exchange(fmt.Sprintf(call, fmt.Sprint(10+i), fmt.Sprintf(`"name":"echo","arguments":{"text":"%d %d"}`, i, j)), nil))
			}
		}
		// Another token, a wrong one and none, on the first session.
		for _, tok := range []string{tokenB, "wrong-token-wrong-token-wrong-token", ""} {
			got = append(got, c.as(tok).exchange(echo, nil))
		}
		// A cancelled call: its POST ends without an answer.
		answered := make(chan httpExchange, 1)
		go func() {
			answered <- c.read(c.send(context.WithoutCancel(t.Context()), fmt.Sprintf(call, `"b"`, `"name":"block"`), nil))
		}()
		recv(t, r.started, "the call to start")
		// A second call with the id of the one in flight is refused.
		got = append(got, c.exchange(fmt.Sprintf(call, `"b"`, `"name":"echo","arguments":{"text":"dup"}`), nil))
		got = append(got, c.exchange(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b"}}`, nil))
		recv(t, r.stopped, "the call to be cancelled")
		got = append(got, recv(t, answered, "the cancelled call's POST to end"))
		// A call while the front closes is a protocol error.
		r.f.mu.Lock()
		r.f.closing = true
		r.f.mu.Unlock()
		got = append(got, c.exchange(fmt.Sprintf(call, `8`, `"name":"echo","arguments":{"text":"late"}`), nil))
		r.f.mu.Lock()
		r.f.closing = false
		r.f.mu.Unlock()
		// A call on a session its client has deleted.
		del, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		del.Header.Set("Mcp-Session-Id", older[0].session)
		del.Header.Set("Authorization", "Bearer "+tokenA)
		resp, err := srv.Client().Do(del)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, older[0].read(resp))
		got = append(got, older[0].exchange(echo, nil))
		return got, r.f.httpServed.Load()
	}
	for _, http2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[http2], func(t *testing.T) {
			want, _ := run(t, true, http2)
			got, served := run(t, false, http2)
			if served < 20 {
				t.Errorf("the fast path answered %d calls, want at least 20", served)
			}
			if len(got) != len(want) {
				t.Fatalf("%d answers, want %d", len(got), len(want))
			}
			if proto := "HTTP/" + map[bool]string{false: "1.1", true: "2.0"}[http2]; !strings.HasPrefix(got[0].framing, proto) {
				t.Fatalf("answered over %s, want %s", got[0].framing, proto)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("answer %d:\n fast %v\n  sdk %v", i, got[i], want[i])
				}
			}
		})
	}
}

// The calls of a client that can be asked questions, or that the front
// must ask for its roots, stay with the SDK: it sends those requests on
// the call's own stream.
func TestFastHTTPLeavesAskingToTheSDK(t *testing.T) {
	if noFastPath {
		t.Skip("DSH_MCP_FAST_PATH=false")
	}
	const whoami = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami"}}`
	t.Run("elicitation", func(t *testing.T) {
		r := newRig(t)
		c := startFastHTTP(t, r, `{"elicitation":{}}`)
		if e := c.exchange(whoami, nil); e.status != http.StatusOK {
			t.Fatalf("call: %v", e)
		}
		if n := r.f.httpServed.Load(); n != 0 {
			t.Fatalf("the fast path answered %d calls of a client that declared elicitation", n)
		}
	})
	t.Run("roots", func(t *testing.T) {
		r := newRig(t)
		r.f = New(r.h, Options{Workdir: r.workdir, AllowedRoots: []string{r.workdir}})
		c := startFastHTTP(t, r, `{}`)
		c.exchange(whoami, nil)
		if n := r.f.httpServed.Load(); n != 0 {
			t.Fatalf("the fast path answered a session's first call with roots allowed")
		}
		c.exchange(whoami, nil)
		if n := r.f.httpServed.Load(); n != 1 {
			t.Fatalf("the fast path answered %d of the later calls, want 1", n)
		}
	})
}

// A call answered by the handler is cancelled by the client's
// notifications/cancelled (not only by its POST going away), and its POST
// gets no answer.
func TestFastHTTPCancelled(t *testing.T) {
	r := newRig(t)
	c := startFastHTTP(t, r, `{}`)
	answered := make(chan string, 1)
	go func() {
		resp := c.send(context.WithoutCancel(t.Context()), `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"block"}}`, nil)
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		answered <- string(data)
	}()
	recv(t, r.started, "the call to start")
	if e := c.exchange(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b"}}`, nil); e.status != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %v", e)
	}
	if cause := recv(t, r.stopped, "the call to be cancelled"); !errors.Is(cause, context.Canceled) {
		t.Fatalf("the tool saw %v, want context.Canceled", cause)
	}
	if body := recv(t, answered, "the POST to end"); strings.Contains(body, "data:") {
		t.Fatalf("the cancelled call was answered: %q", body)
	}
	if want := 1 - int64(boolInt(noFastPath)); r.f.httpServed.Load() != want {
		t.Fatalf("the fast path took %d calls, want %d", r.f.httpServed.Load(), want)
	}
}

// A call whose id is that of a call in flight on the session is refused,
// as the SDK refuses it.
func TestFastHTTPDuplicateID(t *testing.T) {
	r := newRig(t)
	c := startFastHTTP(t, r, `{}`)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := c.send(ctx, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"block"}}`, nil)
	defer resp.Body.Close()
	recv(t, r.started, "the call to start")
	e := c.exchange(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, nil)
	want := httpExchange{status: http.StatusBadRequest, contentType: "application/json", cacheControl: "no-cache, no-transform", body: `{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"duplicate in-flight request ID 5"}}`, framing: "HTTP/1.1 length 93 []"}
	if e != want {
		t.Fatalf("a second call with id 5: %v, want %v", e, want)
	}
	cancel()
	recv(t, r.stopped, "the call to stop")
}

// A session's idle timer does not run while a POST of it is in flight,
// and runs again once none is.
func TestIdleSessionsCountPOSTs(t *testing.T) {
	closed := make(chan string, 1)
	s := newIdleSessions(time.Hour, func(_ context.Context, id string) { closed <- id })
	defer s.stop()
	s.start("a")
	end := s.begin("a")
	l := s.sessions["a"]
	s.expire("a", l) // as if the timer had fired
	select {
	case id := <-closed:
		t.Fatalf("session %s closed during a POST", id)
	default:
	}
	end()
	s.expire("a", l)
	if id := recv(t, closed, "the idle session to close"); id != "a" {
		t.Fatalf("closed %q", id)
	}
}

// TestCannotBeAskedAgreesWithTheSDK: whenever cannotBeAsked spares a call
// the SDK's decoding of its capabilities, the SDK finds no elicitation in
// them either, for capabilities in the call's _meta, the session's
// initialize, both or neither, spelled and typed every way.
func TestCannotBeAskedAgreesWithTheSDK(t *testing.T) {
	r := newRig(t)
	plain := startFastHTTP(t, r, `{}`)
	asking := &fastHTTPClient{t: t, url: plain.url, client: plain.client, version: plain.version}
	asking.open(`{"elicitation":{}}`)
	sessions := map[string]*mcp.ServerSession{
		"no session":          nil,
		"plain session":       r.f.users.session(plain.session),
		"elicitation session": r.f.users.session(asking.session),
	}
	metas := map[string]string{
		"no params":                  "",
		"no _meta":                   `{"name":"echo"}`,
		"no capabilities":            `{"name":"echo","_meta":{"progressToken":1}}`,
		"null capabilities":          `{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":null}}`,
		"empty capabilities":         `{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`,
		"roots only":                 `{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}}}}`,
		"elicitation":                `{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}`,
		"elicitation, other case":    `{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{"Elicitation":{"form":{}}}}}`,
		"null elicitation":           `{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":null}}}`,
		"capabilities not an object": `{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":"x"}}`,
		"undecodable capabilities":   `{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":5}}}`,
	}
	spared := 0
	for sname, ss := range sessions {
		for mname, params := range metas {
			req := &mcp.CallToolRequest{Session: ss}
			if params != "" {
				req.Params = new(mcp.CallToolParamsRaw)
				if err := json.Unmarshal([]byte(params), req.Params); err != nil {
					t.Fatal(err)
				}
			}
			if !cannotBeAsked(req) {
				continue
			}
			spared++
			if caps := req.ClientCapabilities(); caps != nil && caps.Elicitation != nil {
				t.Errorf("%s, %s: spared, but the SDK finds elicitation %+v", sname, mname, caps.Elicitation)
			}
		}
	}
	if spared < 10 {
		t.Errorf("cannotBeAsked spared %d of the cases, want at least 10", spared)
	}
	// The fast path hands the SDK the capabilities undecoded
	// (json.RawMessage): those of the per-request protocol, at every call.
	fastSpared := 0
	for mname, params := range metas {
		switch mname {
		case "no params", "null capabilities", "capabilities not an object":
			continue // the SDK refuses the last two before any handler runs
		}
		_, raw, _, ok := mcpfast.Decode(json.RawMessage(strings.Replace(params, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`, 1)))
		if !ok {
			continue
		}
		req := &mcp.CallToolRequest{Params: raw}
		if !cannotBeAsked(req) {
			if mname == "roots only" {
				t.Error("roots only, from the fast path: not spared the SDK's decoding")
			}
			continue
		}
		fastSpared++
		if caps := req.ClientCapabilities(); caps != nil && caps.Elicitation != nil {
			t.Errorf("%s, from the fast path: spared, but the SDK finds elicitation %+v", mname, caps.Elicitation)
		}
	}
	if fastSpared < 3 {
		t.Errorf("cannotBeAsked spared %d of the fast path's cases, want at least 3", fastSpared)
	}
	// A typed value, as an in-process caller may put there, goes to the SDK.
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{mcp.MetaKeyClientCapabilities: &mcp.ClientCapabilities{}}}}
	if cannotBeAsked(req) {
		t.Error("a typed capabilities value was not left to the SDK")
	}
}
