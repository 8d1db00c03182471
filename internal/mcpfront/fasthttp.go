package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshdev/dsh/internal/mcpfast"
)

// Over streamable HTTP, the handler answers a plain tools/call itself, as
// the stdio transport does (fastcall.go): it runs the call through the
// same handler and writes the event stream the SDK would write for it,
// byte for byte (TestFastHTTPMatchesSDK). The SDK's way costs more CPU
// than the rest of a trivial call: it decodes the body and the call's
// parameters four times over, each through a json.Decoder that allocates
// 32 KiB, makes a stream with a random id, and hands the call across two
// goroutines and a channel.
//
// Only a POST the SDK would answer the same way is answered here; the SDK
// gets every other request. A plain tools/call is one JSON-RPC request
// (no batch) with an id, on a session dsh recorded (so the token was
// checked) that is initialized, with the headers the SDK asks for
// (Content-Type application/json, Accept of both JSON and an event stream,
// no Last-Event-ID, a protocol version the SDK serves statefully or none),
// naming one of the front's tools, with no protocol version in its _meta
// and no multi-round-trip state. Two kinds of session stay with the SDK
// for their calls, because a call may send the client a request of its own
// there, which the SDK routes to the call's stream: a client that declared
// elicitation (a tool may ask it for a secret), and, when the front has
// allowed roots, a session's first call (which asks the client for its
// roots).
//
// What the SDK does around a call is done here too: the session's idle
// timer stops while the POST runs (idleSessions counts every POST), a
// progress token gets notifications/progress on the call's own stream, a
// notifications/cancelled for the call cancels it (the POST then gets no
// answer, as with the SDK), a POST that goes away cancels it, and a
// second call with the id of one in flight is refused as the SDK refuses
// it.

// fastHTTP answers req, which POST r carries on session id, and reports
// true; or reports false, and the SDK answers it.
func (f *Front) fastHTTP(w http.ResponseWriter, r *http.Request, id string, req *jsonrpc.Request) bool {
	if f.fastEncoder == nil {
		return false
	}
	switch {
	case req.Method == "notifications/cancelled":
		f.httpCalls.cancel(id, req.Params)
		return false // the SDK answers the POST (202), and knows no such call
	case req.Method != "tools/call" || !req.ID.IsValid() || !f.fastHeaders(r):
		return false
	}
	ss := f.users.session(id)
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || (ip.Capabilities != nil && ip.Capabilities.Elicitation != nil) {
		return false
	}
	p, params, perRequest, ok := mcpfast.Decode(req.Params)
	if !ok || perRequest || p.Versioned || !f.toolNames[p.Name] {
		return false
	}
	if len(f.roots) > 0 && !f.hasOwner(ss) {
		return false
	}
	// The writers wrap w as they wrap it for the SDK, in the same order,
	// and the SDK's headers are set before it refuses a duplicate id: a
	// refused call's answer has them, and a cancelled call's silenced
	// stream has none (its headers go out only with its first write).
	w, endEarly := earlyHeaders(w, r, req.Method, f.progress)
	defer endEarly()
	w, end := f.requests.begin(w, r)
	defer end()
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	key := idKey(req.ID)
	if !f.httpCalls.add(id, key, cancel) {
		writeRPCError(w, http.StatusBadRequest, req.ID, &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("duplicate in-flight request ID %v", req.ID.Raw()),
		})
		return true
	}
	defer f.httpCalls.remove(id, key)
	f.httpServed.Add(1)
	// The SDK flushes each event, so its stream is framed as one that goes
	// on: chunked over HTTP/1.1, without a Content-Length over HTTP/2.
	// Over HTTP/1.1 the header asks net/http for that framing without a
	// flush (the answer and the stream's end then go out in one write);
	// HTTP/2 has no such header, and the answer is flushed there.
	flushLast := r.ProtoMajor >= 2
	if !flushLast {
		h.Set("Transfer-Encoding", "chunked")
	}

	s := &sseStream{w: w}
	ctx = context.WithValue(ctx, progressSinkKey{}, s.progress)
	res, err := f.call(ctx, p.Name, &mcp.CallToolRequest{
		Session: ss,
		Params:  params,
		Extra:   &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header},
	})
	line, err := f.fastEncoder.Answer(make([]byte, 0, 256), req.ID, false, res, err)
	if err != nil {
		f.logger.Warn("encoding a call's answer failed", "error", err)
		return true
	}
	// The answer is the stream's last event.
	s.event(line[:len(line)-1], flushLast) // without its newline
	return true
}

// fastHeaders reports whether r has the headers with which the SDK serves
// a call on a session as it would serve any: its checks pass, and nothing
// asks for a different answer.
func (f *Front) fastHeaders(r *http.Request) bool {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return false
		}
	}
	if jsonOK, streamOK := accepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return false
	}
	if len(r.Header.Values("Last-Event-ID")) > 0 {
		return false
	}
	v := r.Header.Get("Mcp-Protocol-Version")
	return v == "" || f.statefulVersions[v]
}

// accepts is the SDK's reading of a request's Accept headers: whether
// they take JSON, and an event stream.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for raw := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// writeRPCError answers a request with a JSON-RPC error, as the SDK
// answers a request it refuses before it runs.
func writeRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, jerr *jsonrpc.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: jerr}); err == nil {
		w.Write(data)
	}
}

// hasOwner reports whether ss has had an owner.
func (f *Front) hasOwner(ss *mcp.ServerSession) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.owners[ss]
	return ok
}

// sseStream writes a call's events, as the SDK writes them (no event id:
// the handler keeps no event store).
type sseStream struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func (s *sseStream) event(data []byte, flush bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := make([]byte, 0, len("event: message\ndata: \n\n")+len(data))
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		return // the client has gone: the POST's context says so
	}
	if fl, ok := s.w.(http.Flusher); ok && flush {
		fl.Flush()
	}
}

// progress sends notifications/progress on the call's stream, where the
// SDK sends the notifications of a call.
func (s *sseStream) progress(_ context.Context, params *mcp.ProgressNotificationParams) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: "notifications/progress", Params: raw})
	if err != nil {
		return err
	}
	s.event(data, true)
	return nil
}

// progressSinkKey marks a call's context with where its progress goes, when
// not to its SDK session.
type progressSinkKey struct{}

type progressSink = func(context.Context, *mcp.ProgressNotificationParams) error

// httpCalls are the calls the HTTP handler answers itself, by session id
// and request id key: a notifications/cancelled finds them here.
type httpCalls struct {
	mu       sync.Mutex
	sessions map[string]map[string]context.CancelCauseFunc
}

// add records a call, unless one with its id is in flight on the session.
func (c *httpCalls) add(session, key string, cancel context.CancelCauseFunc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == nil {
		c.sessions = make(map[string]map[string]context.CancelCauseFunc)
	}
	calls := c.sessions[session]
	if calls == nil {
		calls = make(map[string]context.CancelCauseFunc)
		c.sessions[session] = calls
	}
	if calls[key] != nil {
		return false
	}
	calls[key] = cancel
	return true
}

func (c *httpCalls) remove(session, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.sessions[session]
	delete(calls, key)
	if len(calls) == 0 {
		delete(c.sessions, session)
	}
}

// cancel cancels the call a notifications/cancelled with params names, if
// it is one of the session's.
func (c *httpCalls) cancel(session string, params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	c.mu.Lock()
	cancel := c.sessions[session][idKey(id)]
	c.mu.Unlock()
	if cancel != nil {
		cancel(context.Canceled)
	}
}
