package mcpfront

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// headerDelay is how long a tools/call's response may wait for its first
// byte before the SSE headers go out on their own: long enough that a
// quick answer (or one of the SDK's early refusals, with its own status)
// is written as the SDK writes it, far below any client's timeout.
const headerDelay = 250 * time.Millisecond

// earlyWriter starts a tools/call's event stream before the call has
// anything to say. A call without a progress token sends nothing until its
// result, and some clients give up on a response that has not started
// (Claude Code and Gemini CLI after 60 s, though the call would have
// answered). After headerDelay with nothing written, it sends the SSE
// headers, then a comment line (which event-stream readers ignore) every
// interval, until the SDK writes: from then on the SDK's writes pass as
// they are, and its own status and headers, too late, are dropped.
type earlyWriter struct {
	http.ResponseWriter
	interval time.Duration
	// header is what the SDK sets, copied to the response when it
	// commits: the timer writes the real header map, under mu, and the
	// SDK never touches it.
	header http.Header

	mu        sync.Mutex
	committed bool // the status line has gone out
	ours      bool // and it was ours
	written   bool // the SDK has written: no more comments
	done      bool
	timer     *time.Timer
	stop      chan struct{}
}

// earlyHeaders wraps w for the request r, whose JSON-RPC method is
// method, if r is a tools/call that may be answered with an event stream;
// end must be called when the handler returns.
func earlyHeaders(w http.ResponseWriter, r *http.Request, method string, interval time.Duration) (http.ResponseWriter, func()) {
	if method != "tools/call" || !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return w, func() {}
	}
	e := &earlyWriter{ResponseWriter: w, interval: interval, header: w.Header().Clone(), stop: make(chan struct{})}
	e.timer = time.AfterFunc(headerDelay, e.start)
	return e, e.end
}

// start sends the headers, if nothing has been written, and keeps the
// stream alive until the SDK writes.
func (e *earlyWriter) start() {
	e.mu.Lock()
	if e.committed || e.done {
		e.mu.Unlock()
		return
	}
	h := e.ResponseWriter.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	e.ResponseWriter.WriteHeader(http.StatusOK)
	e.committed, e.ours = true, true
	e.flushLocked()
	e.mu.Unlock()
	tick := time.NewTicker(e.interval)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
		}
		e.mu.Lock()
		if e.written || e.done {
			e.mu.Unlock()
			return
		}
		e.ResponseWriter.Write([]byte(": the call is running\n\n"))
		e.flushLocked()
		e.mu.Unlock()
	}
}

func (e *earlyWriter) end() {
	e.mu.Lock()
	e.done = true
	e.mu.Unlock()
	e.timer.Stop()
	close(e.stop)
}

// Header is the SDK's view of the response headers.
func (e *earlyWriter) Header() http.Header { return e.header }

func (e *earlyWriter) WriteHeader(code int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.commitLocked(code)
}

func (e *earlyWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.commitLocked(http.StatusOK)
	e.written = true
	return e.ResponseWriter.Write(p)
}

// commitLocked sends the SDK's status and headers, unless the timer has
// sent its own.
func (e *earlyWriter) commitLocked(code int) {
	if e.committed {
		return
	}
	e.committed = true
	h := e.ResponseWriter.Header()
	for k, v := range e.header {
		h[k] = v
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *earlyWriter) Flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flushLocked()
}

func (e *earlyWriter) flushLocked() {
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (e *earlyWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }
