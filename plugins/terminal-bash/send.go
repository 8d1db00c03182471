//go:build linux

package terminalbash

import (
	"context"
	"io"
	"time"

	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/screen"
)

// send is one send in flight. Its fields from out on are guarded by s.mu;
// the ones before do not change.
type send struct {
	s *session
	// startup marks the session's first wait, for the plumbing to report
	// that it is installed and the shell to be at its prompt; only that, the
	// shell's exit or the deadline settle it.
	startup  bool
	stream   bool
	deadline time.Time
	// cmd is the command of the Exec this send belongs to: the Exec's own
	// send, or a send started while the command had not been reported
	// ended. nil outside an Exec.
	cmd *command
	// exec marks the Exec's own send, whose result carries the background
	// output from before the command.
	exec bool

	out     screen.Pending
	settled bool
	result  terminal.SendResult
	// atPrompt: settling because the shell is back at its prompt.
	atPrompt bool
	done     chan struct{} // closed when the send settles
	// more wakes an Output call waiting for lines; capacity 1.
	more chan struct{}
	// stopWatch detaches the StartSend context's cancel hook.
	stopWatch func() bool

	// The send holds the session's slot until it has settled and neither
	// its writes nor its interrupt are still in progress.
	writing          bool
	cmdWriting       bool // the rest of an Exec's command goes into the input channel
	interrupting     bool
	interruptPending bool // Cancel arrived during the write: interrupt once it stops
}

func newSend(s *session, stream bool, deadline time.Time) *send {
	return &send{
		s:        s,
		stream:   stream,
		deadline: deadline,
		out:      screen.NewPending(s.cfg.maxRead, stream),
		done:     make(chan struct{}),
		more:     make(chan struct{}, 1),
	}
}

// Output returns the complete lines produced since the previous call,
// blocking until there are some, the send settles, or ctx ends. After the
// send has settled it returns what is still pending (the same lines the
// settled viewport starts with), then io.EOF.
func (sn *send) Output(ctx context.Context) (string, error) {
	s := sn.s
	for {
		s.mu.Lock()
		if sn.out.Len() > 0 {
			text := sn.out.Take()
			stream := sn.stream && !sn.settled
			s.mu.Unlock()
			if stream {
				// The read loop may be holding the terminal back for us.
				select {
				case s.resume <- struct{}{}:
				default:
				}
			}
			return text, nil
		}
		settled := sn.settled
		s.mu.Unlock()
		if settled {
			return "", io.EOF
		}
		select {
		case <-sn.more:
		case <-sn.done:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

// Wait blocks until the send settles or ctx ends; ctx ending does not
// affect the send.
func (sn *send) Wait(ctx context.Context) (terminal.SendResult, error) {
	select {
	case <-sn.done:
	case <-ctx.Done():
		return terminal.SendResult{}, context.Cause(ctx)
	}
	sn.s.mu.Lock()
	defer sn.s.mu.Unlock()
	return sn.result, nil
}

// Cancel interrupts the foreground process group with a real SIGINT, after
// discarding typed input nobody has read yet, as ^C does (see interrupt).
// A write still in progress is abandoned first, so the interrupt never
// lands in the middle of the text and the rest of the text is never typed
// afterwards. Cancel does not wait for any of it: the interrupt runs on its
// own, holding the send's slot, and the send keeps running until the
// terminal settles.
func (sn *send) Cancel() bool {
	s := sn.s
	s.mu.Lock()
	switch {
	case sn.settled:
		s.mu.Unlock()
		return false
	case sn.interrupting || sn.interruptPending:
		s.mu.Unlock()
		return true
	case sn.writing:
		sn.interruptPending = true
		s.term.master.SetWriteDeadline(time.Now())
		s.mu.Unlock()
		return true
	}
	sn.interrupting = true
	s.workers.Add(1)
	s.mu.Unlock()
	go s.interrupt(sn)
	return true
}

// inputBusy reports that the send's write or interrupt is still under way.
// The terminal cannot be ready for the next send before they are over, so
// the prompt and the stdin proof are not taken as readiness meanwhile (they
// are looked at again when the write or interrupt ends); the silence bound
// and the deadline still apply. Guarded by s.mu.
func (sn *send) inputBusy() bool {
	return sn.writing || sn.interrupting || sn.interruptPending
}

// notify wakes an Output call waiting for lines.
func (sn *send) notify() {
	select {
	case sn.more <- struct{}{}:
	default:
	}
}

// viewport is the pending lines plus the partial line, cut to the newest
// limit bytes, and whether output was lost on the way: dropped from a
// bounded buffer, or cut from a viewport the caller cannot pull otherwise.
// A streaming caller still pulls every pending line through Output, so a
// cut viewport loses nothing for it.
func (sn *send) viewport(partial string, limit int) (string, bool) {
	unpulled := string(sn.out.Bytes())
	vp := screen.Viewport(unpulled, partial, limit)
	return vp, sn.out.Dropped() || (len(vp) < len(unpulled)+len(partial) && !sn.stream)
}

var _ terminal.Send = (*send)(nil)
