package backendkit

import (
	"context"
	"io"
	"sync"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// DefaultRawWindow is how many of the newest raw bytes a session keeps for
// Session.Output: a few screens of a full-screen program, or the output of
// a busy minute that a reader has not taken yet.
const DefaultRawWindow = 64 << 10

// Raw is a session's raw output: every byte the terminal wrote, numbered
// from the session's start, of which the newest window are kept for
// readers (Session.Output). The read loop writes it before it renders, so
// the line renderer and every reader see the same bytes in the same order.
// A Raw keeps nothing until its first byte, and at most its window after.
// It is safe for concurrent use.
type Raw struct {
	mu     sync.Mutex
	window int
	ring   []byte // allocated on the first write; len == window then
	end    int64  // position after the newest byte
	ended  bool
	wake   chan struct{} // closed and replaced when bytes arrive or output ends
}

// NewRaw returns a Raw keeping the newest window bytes.
func NewRaw(window int) *Raw {
	if window <= 0 {
		window = DefaultRawWindow
	}
	return &Raw{window: window, wake: make(chan struct{})}
}

// Write appends p. It never blocks on a reader: a reader that falls more
// than the window behind loses the oldest bytes.
func (r *Raw) Write(p []byte) {
	if len(p) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	if r.ring == nil {
		r.ring = make([]byte, r.window)
	}
	if len(p) > r.window {
		r.end += int64(len(p) - r.window)
		p = p[len(p)-r.window:]
	}
	at := int(r.end % int64(r.window))
	n := copy(r.ring[at:], p)
	copy(r.ring, p[n:])
	r.end += int64(len(p))
	r.signal()
}

// Pos is the position after the newest byte: where the output written so
// far ends.
func (r *Raw) Pos() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end
}

// End marks the end of the output: readers that have everything get
// io.EOF.
func (r *Raw) End() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended {
		r.ended = true
		r.signal()
	}
}

func (r *Raw) signal() {
	close(r.wake)
	r.wake = make(chan struct{})
}

// Read returns the bytes from position from on, as Session.Output says:
// it waits until there are some, the output ends (io.EOF) or ctx ends.
func (r *Raw) Read(ctx context.Context, from int64) (termapi.Chunk, error) {
	for {
		r.mu.Lock()
		start := max(r.end-int64(r.window), 0)
		from = max(from, start)
		if from < r.end {
			c := termapi.Chunk{Pos: from, Data: r.copyLocked(from)}
			r.mu.Unlock()
			return c, nil
		}
		if r.ended {
			r.mu.Unlock()
			return termapi.Chunk{Pos: r.end}, io.EOF
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return termapi.Chunk{}, context.Cause(ctx)
		}
	}
}

// copyLocked copies the kept bytes from position from to the end.
func (r *Raw) copyLocked(from int64) []byte {
	out := make([]byte, r.end-from)
	at := int(from % int64(r.window))
	n := copy(out, r.ring[at:])
	copy(out[n:], r.ring)
	return out
}
