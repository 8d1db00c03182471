package backendkit

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func newTestSend(stream bool) (*Send, *sync.Mutex, chan struct{}) {
	var mu sync.Mutex
	resume := make(chan struct{}, 1)
	k := &Send{}
	k.Init(&mu, resume, 1<<10, stream)
	return k, &mu, resume
}

// TestSendOutputThenSettle: Output hands out delivered lines as they come,
// and after the send settles what is still pending, then io.EOF; Wait
// returns the result Settle was given, once.
func TestSendOutputThenSettle(t *testing.T) {
	k, mu, resume := newTestSend(true)
	ctx := t.Context()
	got := make(chan string)
	go func() {
		text, _ := k.Output(ctx)
		got <- text
	}()
	mu.Lock()
	k.Deliver([]byte("one\n"))
	mu.Unlock()
	if text := <-got; text != "one\n" {
		t.Fatalf("Output = %q, want the delivered line", text)
	}
	select {
	case <-resume:
	default:
		t.Fatal("a streaming pull did not signal resume")
	}

	mu.Lock()
	k.Deliver([]byte("two\n"))
	res := termapi.SendResult{Reason: termapi.WaitStdinRead, Viewport: "two\n"}
	if !k.Settle(res) || k.Settle(termapi.SendResult{Reason: termapi.WaitTimeout}) {
		t.Fatal("Settle: the first call must settle and the second must not")
	}
	mu.Unlock()
	if text, err := k.Output(ctx); text != "two\n" || err != nil {
		t.Fatalf("Output after settling = %q, %v; want the pending line", text, err)
	}
	if _, err := k.Output(ctx); err != io.EOF {
		t.Fatalf("Output when drained = %v, want io.EOF", err)
	}
	if r, err := k.Wait(ctx); err != nil || r.Reason != termapi.WaitStdinRead {
		t.Fatalf("Wait = %+v, %v; want the first result", r, err)
	}
	select {
	case <-resume:
		t.Fatal("a pull after settling signalled resume")
	default:
	}
}

// TestSendWatch: the context's end cancels a live send, and no longer
// once it has settled.
func TestSendWatch(t *testing.T) {
	k, mu, _ := newTestSend(false)
	ctx, cancel := context.WithCancel(t.Context())
	cancelled := make(chan struct{})
	mu.Lock()
	k.Watch(ctx, func() { close(cancelled) })
	mu.Unlock()
	cancel()
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the context's end did not cancel the send")
	}

	k, mu, _ = newTestSend(false)
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	mu.Lock()
	k.Watch(ctx, func() { t.Error("a settled send was cancelled") })
	k.Settle(termapi.SendResult{})
	mu.Unlock()
	cancel()
}

// TestSendWaitEndsWithContext: Wait gives up with the context, and the
// send is not affected.
func TestSendWaitEndsWithContext(t *testing.T) {
	k, _, _ := newTestSend(false)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := k.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want the context's error", err)
	}
	if k.Settled() {
		t.Fatal("the send settled when a Wait gave up")
	}
}

// TestViewportLoss: a viewport cut for a caller that does not stream is
// lost output; for a streaming caller it is not.
func TestViewportLoss(t *testing.T) {
	for _, stream := range []bool{false, true} {
		k, _, _ := newTestSend(stream)
		k.Deliver([]byte("0123456789\n"))
		vp, lost := k.Viewport("", 4)
		if len(vp) > 4 || lost == stream {
			t.Errorf("stream %v: Viewport = %q, lost %v", stream, vp, lost)
		}
	}
}
