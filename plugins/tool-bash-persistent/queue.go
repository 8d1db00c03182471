package bashtool

import (
	"context"
	"sync"
)

// fifo lets one call of an owner run at a time, strictly in arrival order
// (sync.Mutex does not promise order). A waiter whose context ends leaves
// the line without disturbing the others.
type fifo struct {
	mu      sync.Mutex
	busy    bool
	waiters []chan struct{}
}

// acquire waits for this caller's turn.
func (q *fifo) acquire(ctx context.Context) error {
	q.mu.Lock()
	if !q.busy {
		q.busy = true
		q.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	q.waiters = append(q.waiters, turn)
	q.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		for i, w := range q.waiters {
			if w == turn {
				q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
				q.mu.Unlock()
				return context.Cause(ctx)
			}
		}
		q.mu.Unlock()
		// The turn was handed over while we were giving up: pass it on.
		q.release()
		return context.Cause(ctx)
	}
}

// release hands the turn to the next waiter, if any.
func (q *fifo) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 {
		q.busy = false
		return
	}
	next := q.waiters[0]
	q.waiters = q.waiters[1:]
	close(next)
}
