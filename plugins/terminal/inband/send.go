package inband

import (
	"time"

	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// send is one send in flight. The fields from Send on are guarded by s.mu;
// the ones before do not change.
type send struct {
	s *Session
	// startup marks the session's first wait, for the shell's first prompt;
	// only that, the shell's exit or the deadline settle it.
	startup  bool
	deadline time.Time
	// cmd is the command of the Exec this send belongs to (its own send,
	// or one started before that command was reported ended); nil outside
	// an Exec.
	cmd *command
	// exec marks the Exec's own send, whose result carries the output from
	// before the command.
	exec bool

	// Send holds the pending lines and the settled result; it provides
	// Output and Wait.
	backendkit.Send
	atPrompt bool // settling because the shell is back at its prompt
	writes   int  // jobs of this send the writer has not finished
}

func newSend(s *Session, stream bool, deadline time.Time, cmd *command) *send {
	sn := &send{s: s, deadline: deadline, cmd: cmd}
	sn.Init(&s.mu, s.resume, MaxReadBytes, stream)
	return sn
}

// Base is the send's state that every engine keeps (backendkit.Slot).
func (sn *send) Base() *backendkit.Send { return &sn.Send }

// busyLocked says what keeps a send in the slot; empty for no send.
func (sn *send) busyLocked() string {
	switch {
	case sn == nil:
		return ""
	case sn.Settled():
		return "the previous send's input is still being written"
	}
	return "a send is live"
}

// Cancel interrupts the foreground process group by typing ^C, after
// abandoning what of the send's text is not written yet (see
// interruptLocked). It does not settle the send: the prompt that follows
// does.
func (sn *send) Cancel() bool {
	s := sn.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if sn.Settled() {
		return false
	}
	s.interruptLocked(ctrlC)
	return true
}

var _ termapi.Send = (*send)(nil)
