package mcpfront

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"

	"github.com/dshdev/dsh/internal/mcpfast"
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

// fastCalls is what a connection needs to answer tools/call itself: the
// front and the SDK's session for this connection.
type fastCalls struct {
	front *Front
	ss    *mcp.ServerSession
	tools map[string]bool
	enc   *mcpfast.Encoder
}

func newFastCalls(f *Front, ss *mcp.ServerSession) *fastCalls {
	fc := &fastCalls{front: f, ss: ss, tools: make(map[string]bool), enc: f.fastEncoder}
	for _, t := range f.host.Tools().List() {
		fc.tools[t.Name] = true
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

// serveCall starts req as a call of the fast path and reports true, or
// reports false: the SDK answers it. req is tracked already.
func (c *lineConn) serveCall(req *jsonrpc.Request) bool {
	fc := c.fast.Load()
	if fc == nil || req.Method != "tools/call" || !req.ID.IsValid() {
		return false
	}
	p, params, perRequest, ok := mcpfast.Decode(req.Params)
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
	case perRequest && (!fc.enc.PerRequest() || c.calls.accepted == nil || !bytes.Equal(p.Meta, c.calls.accepted)):
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
	line, err := fc.enc.Answer(nil, id, perRequest, res, err)
	if err != nil {
		c.log.Warn("encoding a call's answer failed", "error", err)
		return
	}
	if err := c.writeAnswer(line); err != nil {
		c.log.Debug("writing a call's answer failed", "error", err)
	}
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
