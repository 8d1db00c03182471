package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxLineBytes bounds one message on stdio. A longer line is answered with
// an error and skipped, and the session goes on.
const MaxLineBytes = 16 << 20

// StdioTransport is MCP's stdio transport (one JSON-RPC message per line)
// made robust: a line that is not a valid JSON-RPC 2.0 message is answered
// with the error the specification prescribes (-32700 for what is not
// JSON, -32600 for what is not a request, a notification or a response,
// including batches, which MCP does not use, and lines over MaxLineBytes),
// and the session goes on. The SDK's transport ends the session, and with
// it the agent's shell, at the first such line. Only the end of input, or
// a write that fails, ends it here. A request the client has cancelled
// (notifications/cancelled) gets no response at all, as the specification
// asks.
type StdioTransport struct {
	Reader io.ReadCloser
	Writer io.Writer
	// Logger receives one debug record per rejected line; nil discards.
	Logger *slog.Logger

	conn atomic.Pointer[lineConn] // the last connection made
	// ready, when set, holds the connection's first read until it closes:
	// Serve installs the fast path in between, so it sees every call.
	ready chan struct{}
	// sdkOnly hands every request to the SDK (tests compare the two).
	sdkOnly bool
}

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	log := t.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &lineConn{
		in:       t.Reader,
		out:      t.Writer,
		log:      log,
		incoming: make(chan jsonrpc.Message),
		pending:  make(map[string]bool),
		calls:    callState{inFlight: make(map[string]context.CancelCauseFunc), sdkMeta: make(map[string][]byte)},
		closed:   make(chan struct{}),
		drained:  make(chan struct{}),
		readDone: make(chan struct{}),
		ready:    t.ready,
		idle:     make(chan func()),
	}
	t.conn.Store(c)
	go c.readLoop()
	return c, nil
}

// lineConn is one stdio session. A goroutine reads lines, answers the bad
// ones and hands the good ones to Read; writes share one lock, so an
// error answer never lands inside a message of the SDK's.
type lineConn struct {
	in  io.ReadCloser
	out io.Writer
	log *slog.Logger

	writeMu sync.Mutex
	// progressUnread: a progress notification was written that the client
	// may not have read yet (see writeAnswer). Guarded by writeMu.
	progressUnread bool

	// Requests from the client not answered yet, by id, and whether the
	// client has cancelled them: the answer to a cancelled request is
	// dropped (a client that gets one may treat it as an unknown id and
	// drop the connection). Bounded by the requests in flight.
	pendingMu sync.Mutex
	pending   map[string]bool
	// calls are the tools/call requests answered without the SDK
	// (fastcall.go), once fast is set.
	calls callState
	fast  atomic.Pointer[fastCalls]
	// idle hands a call to a worker waiting for one (see run).
	idle        chan func()
	idleWorkers atomic.Int32
	workers     sync.WaitGroup

	// Once the input has ended, the requests read before are still
	// answered: inputEnded is set and drained closes when none is pending.
	// Guarded by pendingMu.
	inputEnded bool
	drained    chan struct{}
	// initKey is the idKey of the initialize request; initAnswered is set
	// once its answer is written, so that no answer overtakes it.
	initKey      string
	initAnswered atomic.Bool

	ready     <-chan struct{} // see StdioTransport.ready
	incoming  chan jsonrpc.Message
	readErr   error // why the read loop ended; set before readDone closes
	readDone  chan struct{}
	closeOnce sync.Once
	closed    chan struct{}
}

func (c *lineConn) SessionID() string { return "" }

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg := <-c.incoming:
		return msg, nil
	case <-c.readDone:
		return nil, c.readErr
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *lineConn) Write(_ context.Context, msg jsonrpc.Message) error {
	initAnswer := false
	resp, isResponse := msg.(*jsonrpc.Response)
	if isResponse && resp.ID.IsValid() {
		key := idKey(resp.ID)
		c.pendingMu.Lock()
		c.sdkAnsweredLocked(key, resp)
		initAnswer = key == c.initKey
		c.pendingMu.Unlock()
		defer c.answered(key)
		if c.dropAnswer(resp.ID, key) {
			return nil
		}
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcpfront: encode: %w", err)
	}
	data = append(data, '\n')
	switch req, _ := msg.(*jsonrpc.Request); {
	case initAnswer:
		// Calls may take the fast path from the moment this line is on its
		// way, not only once it is written: a client that has read it must
		// find them served there. The write lock keeps every later answer
		// behind this line.
		c.writeMu.Lock()
		defer c.writeMu.Unlock()
		c.initAnswered.Store(true)
		return c.writeLocked(data)
	case isResponse:
		return c.writeAnswer(data)
	case req != nil && req.Method == "notifications/progress":
		c.writeMu.Lock()
		defer c.writeMu.Unlock()
		c.progressUnread = true
		return c.writeLocked(data)
	}
	return c.writeRaw(data)
}

// writeAnswer writes a response line. When a progress notification went
// out before it, the response waits (at most progressReadBound) until
// the client has read everything written so far: Claude Code's client
// (the MCP TypeScript SDK) handles a notification a microtask after the
// message it came with, so a progress report read in the same chunk as
// its call's response is handled once the response has retired its
// token, and the client reports "a progress notification for an unknown
// token" as a connection error. A client that read the report on its own
// handles it first. Where the output is neither a pipe nor a socket,
// nothing can be known and nothing waits.
func (c *lineConn) writeAnswer(line []byte) error {
	var deadline time.Time
	pause := 50 * time.Microsecond
	for {
		c.writeMu.Lock()
		if c.progressUnread {
			if n, ok := unreadOutput(c.out); ok && n > 0 {
				now := time.Now()
				if deadline.IsZero() {
					deadline = now.Add(progressReadBound)
				}
				select {
				case <-c.closed:
				default:
					if now.Before(deadline) {
						c.writeMu.Unlock()
						// The kernel says when there is room to write, never
						// when the reader has emptied the pipe: look again.
						time.Sleep(pause)
						pause = min(2*pause, 5*time.Millisecond)
						continue
					}
				}
			}
			c.progressUnread = false
		}
		err := c.writeLocked(line)
		c.writeMu.Unlock()
		return err
	}
}

// progressReadBound bounds how long a response waits for the client to
// read a progress report (writeAnswer): a client that reads nothing for
// that long gets the response anyway.
const progressReadBound = 2 * time.Second

// dropAnswer reports whether the answer to request id (whose idKey is
// key) is to be dropped, because the client cancelled the request.
func (c *lineConn) dropAnswer(id jsonrpc.ID, key string) bool {
	c.pendingMu.Lock()
	cancelled := c.pending[key]
	c.pendingMu.Unlock()
	if cancelled {
		c.log.Debug("dropped the response to a cancelled request", "id", id.Raw())
	}
	return cancelled
}

// answered forgets a request once its answer is written (or dropped):
// only then may an answer that must follow it go out, or the connection
// end after the input did.
func (c *lineConn) answered(key string) {
	c.pendingMu.Lock()
	delete(c.pending, key)
	if key == c.initKey {
		c.initAnswered.Store(true)
	}
	c.noteDrainedLocked()
	c.pendingMu.Unlock()
}

func (c *lineConn) writeLine(data []byte) error { return c.writeRaw(append(data, '\n')) }

// writeRaw writes line, which ends with its newline.
func (c *lineConn) writeRaw(line []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.writeLocked(line)
}

// writeLocked is writeRaw with writeMu held.
func (c *lineConn) writeLocked(line []byte) error {
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	if _, err := c.out.Write(line); err != nil {
		return fmt.Errorf("mcpfront: write: %w", err)
	}
	return nil
}

// Close ends the session. The read loop ends once its pending read does:
// stdin cannot be unblocked portably, so it is closed, which ends the read
// on a pipe.
func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		// As the SDK does for the requests it runs: no new call, and the
		// calls in flight are answered before the connection closes.
		c.pendingMu.Lock()
		c.calls.done = true
		c.pendingMu.Unlock()
		c.waitCalls()
		close(c.closed)
		c.in.Close()
		c.workers.Wait()
	})
	return nil
}

func (c *lineConn) readLoop() {
	defer close(c.readDone)
	defer func() { c.endCalls(c.readErr) }()
	if c.ready != nil {
		select {
		case <-c.ready:
		case <-c.closed:
			c.readErr = io.EOF
			return
		}
	}
	r := bufio.NewReaderSize(c.in, 64<<10)
	for {
		line, tooLong, err := readLine(r, MaxLineBytes)
		if len(line) > 0 || tooLong {
			if msg := c.check(line, tooLong); msg != nil {
				select {
				case c.incoming <- msg:
				case <-c.closed:
					c.readErr = io.EOF
					return
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				// The client closed its end: what it sent is answered.
				// Any other error is a broken connection.
				err = io.EOF
				c.drain()
			}
			c.readErr = err
			return
		}
	}
}

// drain waits, once the input has ended, until every request read before
// has been answered: a client may write a whole session and close its end
// at once (printf ... | dsh serve), and the SDK would cancel what it has
// not answered yet the moment its reader fails. A client that has gone
// altogether (its end of the output closed too) gets its calls cancelled
// as before, and so does a connection that closes.
func (c *lineConn) drain() {
	c.pendingMu.Lock()
	c.inputEnded = true
	c.noteDrainedLocked()
	c.pendingMu.Unlock()
	select {
	case <-c.drained:
		return
	case <-c.closed:
		return
	default:
	}
	gone, stop := writerGone(c.out)
	defer stop()
	select {
	case <-c.drained:
	case <-c.closed:
	case <-gone:
		c.log.Debug("the client closed its end of the output: its requests are cancelled")
	}
}

// noteDrainedLocked closes drained once the input has ended and no
// request waits for its answer. Called with pendingMu held.
func (c *lineConn) noteDrainedLocked() {
	if !c.inputEnded || len(c.pending) > 0 {
		return
	}
	select {
	case <-c.drained:
	default:
		close(c.drained)
	}
}

// readLine reads one line without its end (\n or \r\n). A line longer than
// max is consumed to its end and reported as tooLong, without its bytes.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > max+2 { // +2: room for the line's end
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !tooLong {
			buf = bytes.TrimRight(buf, "\r\n")
			tooLong = len(buf) > max
		}
		if tooLong {
			return nil, true, err
		}
		return bytes.TrimSpace(buf), false, err
	}
}

// wireMessage is what a JSON-RPC 2.0 message may hold, for checking.
type wireMessage struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// check returns the message a line holds, or answers the line with an
// error and returns nil. A tools/call it may answer itself (serveCall)
// also returns nil.
func (c *lineConn) check(line []byte, tooLong bool) jsonrpc.Message {
	if !tooLong && line[0] == '{' {
		if req, plain, _ := decodeLine(line); plain {
			c.track(req)
			if c.serveCall(req) {
				return nil
			}
			return req
		}
	}
	return c.checkSlowly(line, tooLong)
}

// checkSlowly is check for any line: it finds what is wrong with it.
func (c *lineConn) checkSlowly(line []byte, tooLong bool) jsonrpc.Message {
	reject := func(id json.RawMessage, code int64, msg string) jsonrpc.Message {
		c.log.Debug("rejected a stdin line", "code", code, "reason", msg, "bytes", len(line))
		c.answer(id, code, msg)
		return nil
	}
	switch {
	case tooLong:
		return reject(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes", MaxLineBytes))
	case line[0] != '{' && !json.Valid(line):
		return reject(nil, jsonrpc.CodeParseError, parseError)
	case line[0] == '[':
		return reject(nil, jsonrpc.CodeInvalidRequest, "invalid request: batches are not supported")
	case line[0] != '{':
		return reject(nil, jsonrpc.CodeInvalidRequest, "invalid request: not a JSON-RPC object")
	}
	// Unmarshal checks the whole line first, so an object that is not
	// valid JSON is a syntax error here, and is scanned once.
	var w wireMessage
	if err := json.Unmarshal(line, &w); err != nil {
		if _, ok := errors.AsType[*json.SyntaxError](err); ok {
			return reject(nil, jsonrpc.CodeParseError, parseError)
		}
		return reject(nil, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	id := validID(w.ID)
	switch {
	case w.ID != nil && id == nil:
		return reject(nil, jsonrpc.CodeInvalidRequest, "invalid request: id must be a string or a number")
	case w.JSONRPC == nil || *w.JSONRPC != "2.0":
		return reject(id, jsonrpc.CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	case w.Method == nil && w.Result == nil && w.Error == nil:
		return reject(id, jsonrpc.CodeInvalidRequest, "invalid request: no method, result or error")
	case w.Method != nil && *w.Method == "":
		return reject(id, jsonrpc.CodeInvalidRequest, "invalid request: empty method")
	}
	if req, ok := decodeRequest(line); ok {
		c.track(req)
		if c.serveCall(req) {
			return nil
		}
		return req
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return reject(id, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	if req, ok := msg.(*jsonrpc.Request); ok {
		c.track(req)
	}
	return msg
}

// track notes a request that will be answered, and a cancellation of one.
func (c *lineConn) track(req *jsonrpc.Request) {
	if req.ID.IsValid() {
		key := idKey(req.ID)
		c.pendingMu.Lock()
		c.pending[key] = false
		if req.Method == "initialize" && c.initKey == "" {
			c.initKey = key
		}
		c.pendingMu.Unlock()
		return
	}
	if req.Method != "notifications/cancelled" {
		return
	}
	var params struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &params) != nil {
		return
	}
	id, err := jsonrpc.MakeID(params.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	key := idKey(id)
	c.pendingMu.Lock()
	if _, inFlight := c.pending[key]; inFlight {
		c.pending[key] = true
		c.cancelCallLocked(key)
	}
	c.pendingMu.Unlock()
}

// idKey makes a map key of a request id: 1 and "1" are different ids.
func idKey(id jsonrpc.ID) string {
	return fmt.Sprintf("%T:%v", id.Raw(), id.Raw())
}

// validID returns raw if it is an id JSON-RPC allows (a string or a whole
// number), else nil.
func validID(raw json.RawMessage) json.RawMessage {
	switch {
	case len(raw) == 0:
		return nil
	case raw[0] == '"':
		return raw // a string: the line was checked to be JSON
	}
	if _, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return raw
	}
	return nil
}

// parseError answers a line that is not one JSON value.
const parseError = "parse error: not one JSON value"

// answer writes an error response for a line that got no further. A write
// that fails is the reader's problem too: the next read sees it.
func (c *lineConn) answer(id json.RawMessage, code int64, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	resp, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	_ = c.writeLine(resp)
}
