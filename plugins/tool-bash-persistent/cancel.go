package bashtool

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// The values of Config.CancelAction: what a call the client cancelled does
// with its command.
const (
	// CancelInterrupt signals the foreground job (SIGINT, then SIGTERM,
	// then SIGKILL) and keeps the shell.
	CancelInterrupt = "interrupt"
	// CancelReset closes the shell, as the original tool does.
	CancelReset = "reset"
)

// The line that starts the owner's next result after a cancelled call,
// followed by the output the command printed before. %s are the seconds
// the command ran and, when the shell is kept, the signal that ended it.
const (
	cancelledKept  = "[The previous command was cancelled after %s seconds and interrupted with %s. The shell and its state are kept. %s]"
	cancelledReset = "[The previous command was cancelled after %s seconds, and the shell was reset: this command ran from the workspace with a fresh current directory and environment. %s]"
	outputFollows  = "Its output until then:"
	printedNothing = "It printed nothing."
)

// takeNotes returns what the owner's next result starts with (the reports
// of cancelled calls) and forgets it; the call that takes them puts them
// back unless its result carries them.
func (st *ownerState) takeNotes() []string {
	notes := st.notes
	st.notes = nil
	return notes
}

// onCancel handles a call the client cancelled while its command ran: by
// CancelAction, the command is interrupted and the shell kept, or the
// shell is reset. The call fails with the cancellation, which the client
// does not read; the owner's next result starts with a line saying what
// happened, and the output the command printed before.
func (r *run) onCancel(cause error) (string, error) {
	err := fmt.Errorf("bash call cancelled: %w", cause)
	if r.out == nil || r.st.shellID == "" {
		// The command never reached the shell.
		if r.p.cfg.CancelAction == CancelReset {
			r.reset(reasonAborted)
		}
		return "", err
	}
	ran := cancelSeconds(time.Since(r.started))
	host.Note(r.parent, "ended", "cancelled ("+r.p.cfg.CancelAction+")")

	// The rest happens on the call's behalf, after the client has gone:
	// within a grace of its own.
	base := context.WithoutCancel(r.parent)
	ctx, cancel := context.WithTimeoutCause(base, timeoutGrace, errGraceOver)
	defer cancel()
	r.parent, r.ctx = base, ctx
	if r.p.cfg.CancelAction == CancelReset {
		// What the command printed up to its end (the cancel's SIGINT) is
		// in the report too.
		if send := r.live; send != nil {
			r.drainWithin(send, timeoutStep)
		}
		r.exit = -1
		r.flushPending()
		r.out.trimTrailingNewlines()
		body := r.renderOutput()
		r.reset(reasonAborted)
		r.note(cancelledReset, ran, "", body)
		return "", err
	}
	r.held = &heldTail{out: r.out}
	defer r.releaseHeld(nil)

	o, sig, res, serr := r.interruptCancelled()
	ended := 0
	if serr == nil && o == backAtPrompt {
		// What the command started beside its foreground job ends too, as
		// at a timeout under interrupt; a shell where that fails is reset.
		n, eerr := r.endCommand()
		if eerr != nil {
			r.p.logger.Warn("ending what a cancelled command started failed; resetting its shell", "owner", r.owner().ID(), "err", eerr)
			o = notBack
		}
		ended = n
	}
	switch {
	case serr == nil && o == backAtPrompt:
		r.releaseHeld(func(lines []string) []string {
			lines = dropReport(lines, signalReports[sig])
			if ended > 0 {
				lines = slices.DeleteFunc(lines, killedNotice.MatchString)
			}
			return lines
		})
		r.exit = -1
		if ended > 0 {
			r.notices = dropKilled(r.notices)
		}
		r.flushPending()
		r.out.trimTrailingNewlines()
		body := r.renderOutput()
		if ended > 0 {
			body = joinNonEmpty(body, fmt.Sprintf(leftRunningLine, ended))
		}
		r.note(cancelledKept, ran, string(sig), body)
		return "", err
	case serr == nil && o == shellGone:
		r.releaseHeld(nil)
		body := joinNonEmpty(r.renderOutput(), exitMarker(res.Status))
		r.reset(reasonAborted)
		r.note(cancelledReset, ran, "", body)
		return "", err
	}
	if serr != nil && !r.owner().Live() {
		r.reset(reasonAborted)
		return "", errOwnerClosed
	}
	r.releaseHeld(nil)
	body := r.renderOutput()
	r.resetInBackground(reasonAborted)
	r.note(cancelledReset, ran, "", body)
	return "", err
}

// note keeps the report of a cancelled command for the owner's next
// result: the line (format, with the seconds it ran and the signal, if
// any), then body, the output it printed.
func (r *run) note(format, ran, sig, body string) {
	tail := outputFollows
	if body == "" {
		tail = printedNothing
	}
	var line string
	if sig != "" {
		line = fmt.Sprintf(format, ran, sig, tail)
	} else {
		line = fmt.Sprintf(format, ran, tail)
	}
	r.cancelNote = joinNonEmpty(append([]string{line, body}, r.savedLines()...)...)
}

// interruptCancelled brings the shell back to its prompt after the call
// was cancelled. A send that was live has had its SIGINT from the backend
// already (a send's context ends it as Send.Cancel does): wait for it to
// settle, escalating with SIGTERM and SIGKILL while it does not; once no
// send is live, signal the foreground as for a command waiting for input.
func (r *run) interruptCancelled() (outcome, termapi.Signal, termapi.SendResult, error) {
	if send := r.live; send != nil {
		for i, sig := range interruptSignals {
			if i > 0 {
				if _, err := r.terms().Signal(r.ctx, r.owner(), r.st.shellID, sig); err != nil {
					if r.ctx.Err() != nil {
						return notBack, sig, termapi.SendResult{}, context.Cause(r.ctx)
					}
					return notBack, sig, termapi.SendResult{}, nil
				}
			}
			res, settled, err := r.drainWithin(send, stepAfter(sig))
			switch {
			case err != nil:
				return notBack, sig, res, err
			case !settled:
				continue
			case exited(res):
				return shellGone, sig, res, nil
			case res.Prompt:
				return backAtPrompt, sig, res, nil
			}
			// Settled without the prompt (a program waiting for input, or
			// silence): go on with the slot free.
			return r.signalUntilPrompt(interruptSignals[i:], stepAfter)
		}
		return notBack, "", termapi.SendResult{}, nil
	}
	return r.signalUntilPrompt(interruptSignals, stepAfter)
}

// drainWithin is drain bounded by step: settled is false when the send has
// not settled by then (it is still live, and may be drained again).
func (r *run) drainWithin(send termapi.Send, step time.Duration) (res termapi.SendResult, settled bool, err error) {
	outer := r.ctx
	ctx, cancel := context.WithTimeout(outer, step)
	defer cancel()
	r.ctx = ctx
	res, err = r.drain(send)
	r.ctx = outer
	if err != nil && ctx.Err() != nil && outer.Err() == nil {
		return res, false, nil
	}
	return res, err == nil, err
}

// cancelSeconds is how the report of a cancelled command says how long it
// ran: to a tenth of a second ("0.0", "4.2").
func cancelSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64)
}
