package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stdio transport answers a plain tools/call itself: it runs the call
// through the front as the SDK's handler would, and writes the response
// the SDK would write, byte for byte (TestFastCallMatchesSDK). A tools/call
// is what an agent sends over and over, and the SDK's dispatch costs more
// than the rest of a trivial call: it decodes the request's parameters
// three to five times, each through a json.Decoder that allocates 32 KiB,
// and hands the request across two goroutines. mcpbench put its share at
// 0.08-0.1 ms of CPU and more than 0.1 ms of latency per call.
//
// Only a request the SDK would answer the same way is served here; the
// SDK gets everything else, and every other method. A plain tools/call
// names one of the front's tools and carries no multi-round-trip state,
// and either
//
//   - has no protocol version in its _meta (the protocol of initialize),
//     on a session that is initialized, or
//   - carries a _meta (SEP-2575's per-request protocol) byte-identical to
//     the one of a tools/call the SDK has answered with a result on this
//     connection: the SDK validated exactly those bytes. Its result gets
//     what the SDK adds for that protocol: the server's info in _meta and
//     the result type "complete".
//
// A cancellation (notifications/cancelled) or the end of input cancels
// a call as the SDK would cancel its own (the answer to a cancelled call
// is dropped, as for every call), and closing the connection waits for the
// calls' answers first, as the SDK waits for its own requests. Until Serve
// has installed the fast path, the connection reads nothing, so the first
// call takes it too.

// newProtocolVersion is the first protocol version whose requests carry
// their own _meta (SEP-2575); the SDK's own constant is unexported.
const newProtocolVersion = "2026-07-28"

// fastCalls is what a connection needs to answer tools/call itself: the
// front and the SDK's session for this connection.
type fastCalls struct {
	front *Front
	ss    *mcp.ServerSession
	tools map[string]bool
	// serverInfo is what the SDK puts in a per-request result's _meta.
	serverInfo     *mcp.Implementation
	serverInfoJSON []byte
	// complete is an empty result of type "complete"; nil if this SDK
	// does not produce one that way, and then per-request calls go to it.
	complete *mcp.CallToolResult
}

func newFastCalls(f *Front, ss *mcp.ServerSession) *fastCalls {
	fc := &fastCalls{front: f, ss: ss, tools: make(map[string]bool), serverInfo: f.impl}
	fc.serverInfoJSON, _ = json.Marshal(f.impl) // an Implementation always marshals
	for _, t := range f.host.Tools().List() {
		fc.tools[t.Name] = true
	}
	// The result type is unexported: a result decoded from JSON holds it.
	var complete mcp.CallToolResult
	if json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), &complete) == nil {
		if data, err := marshalResult(&complete); err == nil && bytes.Contains(data, []byte(`"resultType":"complete"`)) {
			fc.complete = &complete
		}
	}
	return fc
}

// callState is the fast path's part of a connection. Guarded by
// lineConn.pendingMu.
type callState struct {
	// inFlight cancels each call the connection is running, by id key.
	inFlight map[string]context.CancelCauseFunc
	// sdkMeta is the per-request _meta of each tools/call the SDK is
	// answering, by id key; accepted is the last one it answered with a
	// result.
	sdkMeta  map[string][]byte
	accepted []byte
	// done: the input has ended, no call starts.
	done bool
	wg   sync.WaitGroup
	// served counts the calls answered here.
	served int
}

// callParams is what the fast path reads of a tools/call's params, in one
// pass with the SDK's decoder and options; the SDK decodes a tools/call
// that fails here, and reports the error.
type callParams struct {
	Meta           json.RawMessage `json:"_meta"`
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage `json:"requestState"`
}

// callMeta is what the fast path reads of a tools/call's _meta.
type callMeta struct {
	ProgressToken   any `json:"progressToken"`
	ProtocolVersion any `json:"io.modelcontextprotocol/protocolVersion"`
}

// decodeCall decodes a tools/call's params into what the front's handler
// reads of them (the name, the arguments, the progress token), and
// reports whether they select SEP-2575's per-request protocol, as the SDK
// decides it. ok is false for params only the SDK should answer.
func decodeCall(params json.RawMessage) (p *callParams, raw *mcp.CallToolParamsRaw, perRequest, ok bool) {
	p = new(callParams)
	if _, err := segjson.Parse(params, p, decodeFlags); err != nil || !absent(p.InputResponses) || !absent(p.RequestState) {
		return nil, nil, false, false
	}
	raw = &mcp.CallToolParamsRaw{Name: p.Name, Arguments: p.Arguments}
	if absent(p.Meta) {
		return p, raw, false, true
	}
	var m callMeta
	if _, err := segjson.Parse(p.Meta, &m, decodeFlags); err != nil || p.Meta[0] != '{' {
		return nil, nil, false, false
	}
	if m.ProgressToken != nil {
		raw.Meta = mcp.Meta{"progressToken": m.ProgressToken}
	}
	v, isString := m.ProtocolVersion.(string)
	return p, raw, isString && v >= newProtocolVersion, true
}

func absent(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// serveCall starts req as a call of the fast path and reports true, or
// reports false: the SDK answers it. req is tracked already.
func (c *lineConn) serveCall(req *jsonrpc.Request) bool {
	fc := c.fast.Load()
	if fc == nil || req.Method != "tools/call" || !req.ID.IsValid() {
		return false
	}
	p, params, perRequest, ok := decodeCall(req.Params)
	if !ok || !fc.tools[p.Name] {
		return false
	}
	key := idKey(req.ID)
	if !perRequest && (fc.ss.InitializeParams() == nil || !c.initAnswered.Load()) {
		// The SDK refuses a call before initialize; and until the answer
		// to initialize is written, a call waits behind it in the SDK's
		// queue, so that its answer cannot come first.
		return false
	}
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	switch _, dup := c.calls.inFlight[key]; {
	case dup || c.calls.done:
		return false
	case perRequest && (fc.complete == nil || c.calls.accepted == nil || !bytes.Equal(p.Meta, c.calls.accepted)):
		// Let the SDK validate this _meta; its answer teaches us.
		c.calls.sdkMeta[key] = bytes.Clone(p.Meta)
		return false
	}
	// The SDK's handlers run in the connection's context, which nothing
	// cancels but the ends above.
	ctx, cancel := context.WithCancelCause(context.Background())
	c.calls.inFlight[key] = cancel
	c.calls.served++
	c.calls.wg.Add(1)
	c.run(func() {
		defer c.calls.wg.Done()
		res, err := fc.front.call(ctx, params.Name, &mcp.CallToolRequest{Session: fc.ss, Params: params})
		c.pendingMu.Lock()
		delete(c.calls.inFlight, key)
		c.pendingMu.Unlock()
		cancel(nil)
		c.answerCall(fc, req.ID, key, perRequest, res, err)
	})
	return true
}

// run runs call on a worker: one that is idle, or a new one. A worker
// waits for the next call once it has run one, until the connection
// closes, so a call starts on a stack the calls before it have grown
// (a new goroutine grows its stack four times on a call's way to bash).
// Only maxIdleWorkers wait: after a burst of concurrent calls the rest
// end.
func (c *lineConn) run(call func()) {
	select {
	case c.idle <- call:
	default:
		c.workers.Go(func() {
			for {
				call()
				if c.idleWorkers.Add(1) > maxIdleWorkers {
					c.idleWorkers.Add(-1)
					return
				}
				select {
				case call = <-c.idle:
					c.idleWorkers.Add(-1)
				case <-c.closed:
					return
				}
			}
		})
	}
}

// maxIdleWorkers bounds the workers that wait for a call: calls of one
// owner run one at a time, so a session rarely has more than one or two
// in flight.
const maxIdleWorkers = 4

// answerCall writes the response to a call of the fast path, as the SDK
// builds it: the result marshalled without HTML escaping, and for the
// per-request protocol with the server's info and its type. The front's
// result, one text block, is appended straight into the line.
func (c *lineConn) answerCall(fc *fastCalls, id jsonrpc.ID, key string, perRequest bool, res *mcp.CallToolResult, err error) {
	defer c.answered(key)
	if c.dropAnswer(id, key) {
		return
	}
	var line []byte
	if text, ok := onlyText(res); ok && err == nil {
		line = appendCallResult(nil, fc, id, perRequest, text, res.IsError)
	} else {
		line, err = encodeCallResponse(fc, id, perRequest, res, err)
		if err != nil {
			c.log.Warn("encoding a call's answer failed", "error", err)
			return
		}
		line = append(line, '\n')
	}
	if err := c.writeRaw(line); err != nil {
		c.log.Debug("writing a call's answer failed", "error", err)
	}
}

// onlyText returns the text of a result that is one plain text block.
func onlyText(res *mcp.CallToolResult) (string, bool) {
	if res == nil || len(res.Content) != 1 || res.Meta != nil || res.StructuredContent != nil || res.InputRequests != nil {
		return "", false
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok || tc.Meta != nil || tc.Annotations != nil {
		return "", false
	}
	return tc.Text, true
}

// appendCallResult appends the response line to a call whose result is one
// text block, as encodeCallResponse would encode it (TestAppendCallResult).
func appendCallResult(dst []byte, fc *fastCalls, id jsonrpc.ID, perRequest bool, text string, isError bool) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	switch v := id.Raw().(type) {
	case int64:
		dst = strconv.AppendInt(dst, v, 10)
	default:
		data, _ := marshalResult(v) // a string
		dst = append(dst, data...)
	}
	dst = append(dst, `,"result":{`...)
	if perRequest {
		dst = append(dst, `"_meta":{"`+mcp.MetaKeyServerInfo+`":`...)
		dst = append(dst, fc.serverInfoJSON...)
		dst = append(dst, "},"...)
	}
	dst = append(dst, `"content":[{"type":"text","text":`...)
	quoted, _ := json.Marshal(text) // HTML-escaped, as the result's MarshalJSON does
	dst = append(dst, quoted...)
	dst = append(dst, "}]"...)
	if isError {
		dst = append(dst, `,"isError":true`...)
	}
	if perRequest {
		dst = append(dst, `,"resultType":"complete"`...)
	}
	return append(dst, "}}\n"...)
}

// encodeCallResponse encodes the response to a call the way the SDK does.
func encodeCallResponse(fc *fastCalls, id jsonrpc.ID, perRequest bool, res *mcp.CallToolResult, err error) ([]byte, error) {
	resp := &jsonrpc.Response{ID: id, Error: err}
	if err == nil {
		if perRequest {
			r := *fc.complete
			r.Content, r.IsError, r.StructuredContent = res.Content, res.IsError, res.StructuredContent
			r.Meta = mcp.Meta{mcp.MetaKeyServerInfo: fc.serverInfo}
			res = &r
		}
		if resp.Result, err = marshalResult(res); err != nil {
			return nil, fmt.Errorf("mcpfront: marshal result: %w", err)
		}
	}
	return jsonrpc.EncodeMessage(resp)
}

// marshalResult marshals v as the SDK marshals a result: without HTML
// escaping.
func marshalResult(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// sdkAnswered learns from the SDK's response to a request: a result to a
// per-request tools/call accepts its _meta. Called with pendingMu held.
func (c *lineConn) sdkAnsweredLocked(key string, resp *jsonrpc.Response) {
	meta, ok := c.calls.sdkMeta[key]
	if !ok {
		return
	}
	delete(c.calls.sdkMeta, key)
	if resp.Error == nil {
		c.calls.accepted = meta
	}
}

// cancelCallLocked cancels a call of the fast path the client cancelled.
func (c *lineConn) cancelCallLocked(key string) {
	if cancel := c.calls.inFlight[key]; cancel != nil {
		cancel(context.Canceled)
	}
}

// endCalls cancels the calls in flight with cause, as the SDK does when
// the connection's input ends, and refuses new ones. Input that broke
// rather than ended is a client that has gone: the answers of its calls
// are dropped, as the SDK's are when its connection fails, not written to
// whatever is left of the pipe.
func (c *lineConn) endCalls(cause error) {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	c.calls.done = true
	for key, cancel := range c.calls.inFlight {
		cancel(cause)
		if !errors.Is(cause, io.EOF) {
			c.pending[key] = true
		}
	}
}

// waitCalls waits for the calls of the fast path to be answered.
func (c *lineConn) waitCalls() { c.calls.wg.Wait() }
