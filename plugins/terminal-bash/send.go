//go:build linux

package terminalbash

import (
	"time"

	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// send is one send in flight. Its fields from Send on are guarded by s.mu;
// the ones before do not change.
type send struct {
	s *session
	// startup marks the session's first wait, for the plumbing to report
	// that it is installed and the shell to be at its prompt; only that, the
	// shell's exit or the deadline settle it.
	startup  bool
	deadline time.Time
	// cmd is the command of the Exec this send belongs to: the Exec's own
	// send, or a send started while the command had not been reported
	// ended. nil outside an Exec.
	cmd *command
	// exec marks the Exec's own send, whose result carries the background
	// output from before the command.
	exec bool

	// Send holds the pending lines and the settled result; it provides
	// Output and Wait.
	backendkit.Send
	// atPrompt: settling because the shell is back at its prompt.
	atPrompt bool
	// input: how the terminal takes input, when settling because a
	// program is proven to read it.
	input termapi.InputMode

	// The send holds the session's slot until it has settled and neither
	// its writes nor its interrupt are still in progress.
	writing          bool
	cmdWriting       bool // the rest of an Exec's command goes into the input channel
	interrupting     bool
	interruptPending bool // Cancel arrived during the write: interrupt once it stops
}

func newSend(s *session, stream bool, deadline time.Time, cmd *command) *send {
	sn := &send{s: s, deadline: deadline, cmd: cmd}
	sn.Init(&s.mu, s.resume, s.cfg.maxRead, stream)
	return sn
}

// Base is the send's state that every engine keeps (backendkit.Slot).
func (sn *send) Base() *backendkit.Send { return &sn.Send }

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
	case sn.Settled():
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

var _ termapi.Send = (*send)(nil)
