package bashtool

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Model-visible texts of a command that asks for a secret, and of a
// command handed over as a terminal.
const (
	secretAskMessage = "dsh: the command %q asks for a secret: %q. Your answer goes to the command only; the AI model never sees it."
	secretGiven      = "[The command asked for a secret (%q); the user gave it through the client, and it is not shown here.]"
	secretRefused    = "[The command asked for a secret (%q), which the user %s, so it was interrupted.]"
	secretAskFailed  = "[The command asked for a secret (%q); asking the user failed (%v), so it was interrupted.]"
	secretNoAsk      = "[The command asked for a secret (%q), which dsh never passes through the model, and this client cannot ask the user for it (MCP elicitation), so it was interrupted. The user can make the prompt unnecessary: an ssh agent or a key without a passphrase, a sudo rule (NOPASSWD) for the command, a credential helper or a token in the environment.]"
	handedOver       = "[The command is waiting for input, so it was handed over as terminal %s: go on with terminal_send and terminal_read. The shell and its state are kept; bash calls wait until the command ends or terminal_close ends it.]"
	stillHandedOver  = "the shell is still running the command handed over as terminal %s: finish it with terminal_send and terminal_read, or end it with terminal_close, then call bash again"
)

// answerSecret deals with a command proven to wait for a secret: the
// person at the client answers through elicitation, and the answer is
// typed into the terminal (not echoed, and kept nowhere else); the
// returned send waits for what follows. A refusal, a failure or a client
// that cannot be asked interrupts the command, and the call ends with out.
func (r *run) answerSecret(command string) (next termapi.Send, out string, err error) {
	prompt := strings.TrimSpace(r.pending)
	asker := host.AskerFrom(r.parent)
	if asker == nil {
		out, err = r.interruptWith(fmt.Sprintf(secretNoAsk, prompt))
		return nil, out, err
	}
	message := fmt.Sprintf(secretAskMessage, command, prompt)
	ans, aerr := asker.AskSecret(r.ctx, message)
	var later *host.InputRequired
	switch {
	case errors.As(aerr, &later):
		// The question goes with the call's result; the client's retry of
		// this call brings the answer (resumeParked).
		return nil, "", r.park(command, message)
	case aerr != nil && r.ctx.Err() != nil:
		out, err = r.stopped()
		return nil, out, err
	case aerr != nil:
		out, err = r.interruptWith(fmt.Sprintf(secretAskFailed, prompt, aerr))
		return nil, out, err
	case ans.Action != host.AnswerAccept:
		verb := "declined to give"
		if ans.Action == host.AnswerCancel {
			verb = "dismissed the request for"
		}
		out, err = r.interruptWith(fmt.Sprintf(secretRefused, prompt, verb))
		return nil, out, err
	}
	send, serr := r.typeSecret(ans.Secret, prompt)
	if serr != nil {
		if r.ctx.Err() != nil {
			out, err = r.stopped()
		} else {
			out, err = r.sendFailed(serr)
		}
		return nil, out, err
	}
	return send, "", nil
}

// handoff hands the waiting command over to the interactive terminal
// tools, when they are loaded; ok is false otherwise (the caller
// interrupts instead).
func (r *run) handoff(command string) (out string, ok bool) {
	adopter := r.p.adopter()
	if adopter == nil {
		r.p.logger.Warn("onInput is handoff but no plugin takes terminals (load tool-terminal); interrupting")
		return "", false
	}
	adopted, err := adopter.Adopt(r.parent, r.owner(), terminal.Handoff{SessionID: r.st.shellID, Command: command, RawEnd: r.rawEnd})
	if err != nil {
		r.p.logger.Info("handing a command over failed; interrupting it", "owner", r.owner().ID(), "err", err)
		return "", false
	}
	r.st.handedOver = adopted
	r.exit = -1
	return r.result(r.renderOutput(), fmt.Sprintf(handedOver, adopted.ID())), true
}

// awaitHandedOver fails while the owner's shell runs a command handed over
// as a terminal.
func (st *ownerState) awaitHandedOver(ctx context.Context) error {
	h := st.handedOver
	if h == nil {
		return nil
	}
	if h.Release(ctx) {
		st.handedOver = nil
		return nil
	}
	return fmt.Errorf(stillHandedOver, h.ID())
}

// adopter finds the instance that takes handed-over commands.
func (p *plugin) adopter() terminal.Adopter {
	if p.instances == nil {
		return nil
	}
	for _, in := range p.instances() {
		if a, ok := in.Value.(terminal.Adopter); ok {
			return a
		}
	}
	return nil
}

// secretAbandoned starts the result of a call that found the previous
// command still waiting for a secret its client never answered.
const secretAbandoned = "[The previous command was still waiting for a secret the client never sent; it was interrupted before this command ran.]"

// parked is a command waiting for a secret whose question went to the
// client with the call's result (multi-round-trip requests): the client's
// retry of the call carries the answer, and resumeParked goes on with it.
type parked struct {
	state   string // the call's requestState
	command string
	shellID string
	// What the call had gathered: its notices, its output, and the line
	// the command waits on.
	prefix          []string
	output, pending string
}

// takeParked returns the owner's parked command, if any, and whether this
// call is the client's retry that answers it. Either way it is no longer
// parked: a call that is not its retry interrupts it.
func (st *ownerState) takeParked(ctx context.Context) (*parked, bool) {
	p := st.parked
	if p == nil {
		return nil, false
	}
	st.parked = nil
	res, ok := host.ResumptionFrom(ctx)
	return p, ok && res.State == p.state && p.shellID == st.shellID && st.shellID != ""
}

// park leaves the command waiting and sends the question with the call's
// result.
func (r *run) park(command, message string) error {
	state := "bash:" + rand.Text()
	r.st.parked = &parked{
		state: state, command: command, shellID: r.st.shellID,
		prefix: slices.Clone(r.prefix), output: r.out.text(), pending: r.pending,
	}
	return &host.InputRequired{Message: message, State: state}
}

// resumeParked goes on with a parked command, with the answer the client's
// retry carries.
func (r *run) resumeParked(p *parked) (string, error) {
	res, _ := host.ResumptionFrom(r.parent)
	r.openSinks()
	defer r.closeSinks()
	r.exit, r.notices = -1, ""
	r.prefix = append(r.prefix, p.prefix...)
	r.out.write(p.output)
	r.pending = p.pending
	prompt := strings.TrimSpace(p.pending)
	if res.Answer.Action != host.AnswerAccept {
		verb := "declined to give"
		if res.Answer.Action == host.AnswerCancel {
			verb = "dismissed the request for"
		}
		return r.interruptWith(fmt.Sprintf(secretRefused, prompt, verb))
	}
	send, err := r.typeSecret(res.Answer.Secret, prompt)
	if err != nil {
		return r.sendFailed(err)
	}
	return r.follow(p.command, send)
}

// typeSecret types the person's answer and Enter into the waiting command.
func (r *run) typeSecret(secret, prompt string) (termapi.Send, error) {
	bound := r.remaining(0)
	if bound <= 0 {
		<-r.ctx.Done()
		return nil, context.Cause(r.ctx)
	}
	send, err := r.terms().StartSend(r.parent, r.owner(), r.st.shellID, termapi.SendRequest{Text: secret, Submit: true, Stream: true, Timeout: bound})
	if err != nil {
		return nil, err
	}
	r.live = send
	r.prefix = append(r.prefix, fmt.Sprintf(secretGiven, prompt))
	return send, nil
}
