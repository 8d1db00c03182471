package bashtool

import (
	"context"
	"runtime"
	"testing"
)

func TestFIFOOrderAndCancellation(t *testing.T) {
	var q fifo
	if err := q.acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	const n = 20
	got := make(chan int, n)
	cancelled, cancel := context.WithCancel(t.Context())
	for i := range n {
		ctx := t.Context()
		if i == 7 {
			ctx = cancelled
		}
		go func() {
			if err := q.acquire(ctx); err != nil {
				got <- -1
				return
			}
			got <- i
			q.release()
		}()
		// Wait until goroutine i is in the queue, so arrival order is known.
		for {
			q.mu.Lock()
			l := len(q.waiters)
			q.mu.Unlock()
			if l == i+1 {
				break
			}
			runtime.Gosched()
		}
	}
	cancel()
	if v := <-got; v != -1 {
		t.Fatalf("the cancelled waiter should leave first, got %d", v)
	}
	q.release()
	for want := range n {
		if want == 7 {
			continue
		}
		if v := <-got; v != want {
			t.Fatalf("turn %d went to %d", want, v)
		}
	}
}
