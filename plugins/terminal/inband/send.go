package inband

import (
	"context"
	"io"
	"time"

	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/screen"
)

// send is one send in flight. The fields from out on are guarded by s.mu;
// the ones before do not change.
type send struct {
	s *Session
	// startup marks the session's first wait, for the shell's first prompt;
	// only that, the shell's exit or the deadline settle it.
	startup  bool
	stream   bool
	deadline time.Time
	// cmd is the command of the Exec this send belongs to (its own send,
	// or one started before that command was reported ended); nil outside
	// an Exec.
	cmd *command
	// exec marks the Exec's own send, whose result carries the output from
	// before the command.
	exec bool

	out       screen.Pending
	settled   bool
	result    terminal.SendResult
	atPrompt  bool          // settling because the shell is back at its prompt
	writes    int           // jobs of this send the writer has not finished
	done      chan struct{} // closed when the send settles
	more      chan struct{} // capacity 1: wakes an Output call
	stopWatch func() bool   // detaches the StartSend context's hook
}

func newSend(s *Session, stream bool, deadline time.Time) *send {
	return &send{
		s:        s,
		stream:   stream,
		deadline: deadline,
		out:      screen.NewPending(MaxReadBytes, stream),
		done:     make(chan struct{}),
		more:     make(chan struct{}, 1),
	}
}

// Output returns the complete lines rendered since the previous call,
// blocking until there are some, the send settles, or ctx ends. After the
// send has settled it returns what is still pending (the lines the settled
// viewport starts with), then io.EOF.
func (sn *send) Output(ctx context.Context) (string, error) {
	s := sn.s
	for {
		s.mu.Lock()
		if sn.out.Len() > 0 {
			text := sn.out.Take()
			s.mu.Unlock()
			if sn.stream {
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

// Cancel interrupts the foreground process group by typing ^C, after
// abandoning what of the send's text is not written yet (see
// interruptLocked). It does not settle the send: the prompt that follows
// does.
func (sn *send) Cancel() bool {
	s := sn.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if sn.settled {
		return false
	}
	s.interruptLocked(ctrlC)
	return true
}

// notify wakes an Output call waiting for lines.
func (sn *send) notify() {
	select {
	case sn.more <- struct{}{}:
	default:
	}
}

// viewport is the pending lines plus the line being written, cut to the
// newest limit bytes, and whether output was lost on the way. A streaming
// caller still pulls every pending line through Output, so a cut viewport
// loses nothing for it.
func (sn *send) viewport(partial string, limit int) (string, bool) {
	unpulled := string(sn.out.Bytes())
	vp := screen.Viewport(unpulled, partial, limit)
	return vp, sn.out.Dropped() || (len(vp) < len(unpulled)+len(partial) && !sn.stream)
}

var _ terminal.Send = (*send)(nil)
