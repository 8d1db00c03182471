package mcpfront

import (
	"context"
	"sync"
	"time"
)

// idleSessions closes the HTTP sessions whose client has sent no request
// for HTTPOptions.IdleTimeout: a session's timer runs from the moment it is
// made and whenever none of its POSTs is in flight, and a POST stops it (a
// running call keeps its session alive). This is what the SDK's
// SessionTimeout does, kept here because dsh answers some POSTs itself
// (fasthttp.go), which the SDK never sees.
type idleSessions struct {
	timeout time.Duration
	close   func(ctx context.Context, id string)

	mu       sync.Mutex
	sessions map[string]*idleSession
	stopped  bool
}

type idleSession struct {
	refs  int // POSTs in flight
	timer *time.Timer
}

func newIdleSessions(timeout time.Duration, closeSession func(ctx context.Context, id string)) *idleSessions {
	return &idleSessions{timeout: timeout, close: closeSession, sessions: make(map[string]*idleSession)}
}

// start begins timing the session id, which was just made.
func (s *idleSessions) start(id string) {
	if s.timeout <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.sessions[id] != nil {
		return
	}
	l := &idleSession{}
	l.timer = time.AfterFunc(s.timeout, func() { s.expire(id, l) })
	s.sessions[id] = l
}

// begin counts a POST of session id until the returned func is called.
func (s *idleSessions) begin(id string) (end func()) {
	if s.timeout <= 0 || id == "" {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.sessions[id]
	if l == nil {
		return func() {}
	}
	if l.refs == 0 {
		l.timer.Stop()
	}
	l.refs++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		l.refs--
		if l.refs == 0 && s.sessions[id] == l {
			l.timer.Reset(s.timeout)
		}
	}
}

// expire closes the session, unless a POST came meanwhile.
func (s *idleSessions) expire(id string, l *idleSession) {
	s.mu.Lock()
	if s.sessions[id] != l || l.refs > 0 {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, id)
	s.mu.Unlock()
	s.close(context.Background(), id)
}

// forget drops a session that has ended.
func (s *idleSessions) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.sessions[id]; l != nil {
		l.timer.Stop()
		delete(s.sessions, id)
	}
}

// stop cancels every timer, for a front that is closing anyway.
func (s *idleSessions) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for id, l := range s.sessions {
		l.timer.Stop()
		delete(s.sessions, id)
	}
}
