package mcpfront

import (
	"context"
	"sync"
	"time"
)

// DefaultOrphanGrace is how long an HTTP session whose client has gone
// quiet lives on: see HTTPOptions.OrphanGrace.
const DefaultOrphanGrace = 30 * time.Second

// orphans closes the HTTP sessions whose client has left without a DELETE
// (Claude Code and Gemini CLI never send one). A client that is there
// holds its standalone GET stream open; when the last one closes and no
// request is in flight, a timer starts, and any request of the session
// stops it. When it fires, the session is closed, its shell with it. A
// session that never opened a GET stream is left to the idle timeout.
type orphans struct {
	grace time.Duration
	close func(ctx context.Context, id string)

	mu       sync.Mutex
	sessions map[string]*liveness
	counted  func() // tests: called after each request's end is counted
}

// liveness is what keeps one session's client counted as present.
type liveness struct {
	streams  int  // standalone GET streams open
	requests int  // other requests in flight (a call's POST lasts the call)
	streamed bool // the client has opened a GET stream: it uses them
	timer    *time.Timer
}

func newOrphans(grace time.Duration, closeSession func(ctx context.Context, id string)) *orphans {
	return &orphans{grace: grace, close: closeSession, sessions: make(map[string]*liveness)}
}

// begin counts a request of session id until the returned func is called.
func (o *orphans) begin(id string, stream bool) (end func()) {
	if id == "" || o.grace <= 0 {
		return func() {}
	}
	o.mu.Lock()
	l := o.sessions[id]
	if l == nil {
		l = &liveness{}
		o.sessions[id] = l
	}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if stream {
		l.streams++
		l.streamed = true
	} else {
		l.requests++
	}
	o.mu.Unlock()
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.counted != nil {
			defer o.counted()
		}
		if stream {
			l.streams--
		} else {
			l.requests--
		}
		if l.streams > 0 || l.requests > 0 {
			return
		}
		if !l.streamed {
			// No GET stream yet: this client may not use one at all, and
			// the idle timeout is its bound.
			delete(o.sessions, id)
			return
		}
		l.timer = time.AfterFunc(o.grace, func() { o.expire(id, l) })
	}
}

// expire closes the session, unless it came back in the meantime.
func (o *orphans) expire(id string, l *liveness) {
	o.mu.Lock()
	if o.sessions[id] != l || l.streams > 0 || l.requests > 0 || l.timer == nil {
		o.mu.Unlock()
		return
	}
	delete(o.sessions, id)
	o.mu.Unlock()
	o.close(context.Background(), id)
}

// forget drops a session that ended by other means (DELETE, idle timeout).
func (o *orphans) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l := o.sessions[id]; l != nil {
		if l.timer != nil {
			l.timer.Stop()
		}
		delete(o.sessions, id)
	}
}

// stop cancels every timer, for a front that is closing anyway.
func (o *orphans) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id, l := range o.sessions {
		if l.timer != nil {
			l.timer.Stop()
		}
		delete(o.sessions, id)
	}
}
