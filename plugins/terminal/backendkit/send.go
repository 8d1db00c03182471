package backendkit

import (
	"context"
	"io"
	"sync"

	"github.com/dshdev/dsh/plugins/terminal/screen"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Send is what a backend's send shares with every other: the lines it has
// rendered and its caller has not pulled (Out), and how it settled. A
// backend embeds it in its own send type, which adds Cancel and whatever its
// protocol needs, and calls Init before the send is seen.
type Send struct {
	mu     *sync.Mutex
	resume chan<- struct{}
	stream bool

	// Out holds the committed lines the caller has not pulled yet.
	Out     screen.Pending
	settled bool
	result  termapi.SendResult
	done    chan struct{} // closed when the send settles
	more    chan struct{} // capacity 1: wakes an Output call
	// stopWatch detaches the hook that cancels the send with its context.
	stopWatch func() bool
}

// Init readies k for a send of the session whose lock is mu. Out keeps the
// newest maxPending bytes, or every line when the caller streams. resume is
// signalled, without blocking, each time a streaming caller pulls lines: a
// read loop that holds the terminal back for that caller waits on it.
func (k *Send) Init(mu *sync.Mutex, resume chan<- struct{}, maxPending int, stream bool) {
	k.mu, k.resume, k.stream = mu, resume, stream
	k.Out = screen.NewPending(maxPending, stream)
	k.done = make(chan struct{})
	k.more = make(chan struct{}, 1)
}

// Output returns the complete lines rendered since the previous call,
// blocking until there are some, the send settles, or ctx ends. After the
// send has settled it returns what is still pending (the lines the settled
// viewport starts with), then io.EOF. See termapi.Send.
func (k *Send) Output(ctx context.Context) (string, error) {
	for {
		k.mu.Lock()
		if k.Out.Len() > 0 {
			text := k.Out.Take()
			live := k.stream && !k.settled
			k.mu.Unlock()
			if live {
				select {
				case k.resume <- struct{}{}:
				default:
				}
			}
			return text, nil
		}
		settled := k.settled
		k.mu.Unlock()
		if settled {
			return "", io.EOF
		}
		select {
		case <-k.more:
		case <-k.done:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

// Wait blocks until the send settles or ctx ends; ctx ending does not
// affect the send. See termapi.Send.
func (k *Send) Wait(ctx context.Context) (termapi.SendResult, error) {
	select {
	case <-k.done:
	case <-ctx.Done():
		return termapi.SendResult{}, context.Cause(ctx)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.result, nil
}

// Deliver appends committed lines to Out and wakes a waiting Output.
func (k *Send) Deliver(lines []byte) {
	k.Out.Append(lines)
	select {
	case k.more <- struct{}{}:
	default:
	}
}

// Stream reports whether the caller pulls every line through Output.
func (k *Send) Stream() bool { return k.stream }

// Settled reports whether the send has settled.
func (k *Send) Settled() bool { return k.settled }

// Done is closed when the send settles.
func (k *Send) Done() <-chan struct{} { return k.done }

// Result is what the send settled with; the zero SendResult before it has.
func (k *Send) Result() termapi.SendResult { return k.result }

// Viewport is the pending lines plus the line being written (partial), cut
// to the newest limit bytes, and whether output was lost on the way:
// dropped from Out, or cut from a viewport the caller cannot pull
// otherwise. A streaming caller still pulls every pending line through
// Output, so a cut viewport loses nothing for it.
func (k *Send) Viewport(partial string, limit int) (string, bool) {
	unpulled := string(k.Out.Bytes())
	vp := screen.Viewport(unpulled, partial, limit)
	return vp, k.Out.Dropped() || (len(vp) < len(unpulled)+len(partial) && !k.stream)
}

// Watch calls cancel when ctx ends before the send settles. cancel runs on
// a goroutine of its own, without the lock.
func (k *Send) Watch(ctx context.Context, cancel func()) {
	if !k.settled && ctx.Done() != nil {
		k.stopWatch = context.AfterFunc(ctx, cancel)
	}
}

// Settle ends the send with res: Wait returns it, Output returns what is
// still pending and then io.EOF, and the context no longer cancels it. It
// reports false, and changes nothing, when the send had already settled.
func (k *Send) Settle(res termapi.SendResult) bool {
	if k.settled {
		return false
	}
	k.result, k.settled = res, true
	close(k.done)
	if k.stopWatch != nil {
		k.stopWatch()
	}
	return true
}

// Slot is a session's one-send rule, over the engine's own send type S
// (which embeds Send): the send that holds the slot, from its start until
// it has settled and its input is drained, and the live send, which
// receives the output. It is guarded by its session's lock.
type Slot[S interface {
	comparable
	Base() *Send
}] struct {
	// Holder holds the slot: no other send starts while it is set.
	Holder S
	// Live receives output and is judged for readiness; it is cleared
	// when it settles, which may be before the slot is free.
	Live S
}

// Take starts sn: it holds the slot, receives the output from now on, and
// starts with the lines on scr that no send has claimed yet.
func (sl *Slot[S]) Take(sn S, scr *Screen) {
	scr.Claim(sn.Base())
	sl.Holder, sl.Live = sn, sn
}

// LiveSend is the live send's Send, or nil between sends: where committed
// lines go (Screen.Keep).
func (sl *Slot[S]) LiveSend() *Send {
	var none S
	if sl.Live == none {
		return nil
	}
	return sl.Live.Base()
}
