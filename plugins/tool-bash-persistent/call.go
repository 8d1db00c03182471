package bashtool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
)

// Model-visible texts. The first three are the original tool's, verbatim.
const (
	resetNotice       = "The persistent bash shell was reset; the next bash call starts from the workspace with a fresh current directory and environment."
	timeoutHeader     = "Your command timed out after %d seconds or experienced an OOM error. Below is partial output:"
	exitCodeLine      = "[exit code: %d]"
	interactiveNotice = "[The command was waiting for interactive input, which this tool does not provide, so it was interrupted. Pass input non-interactively: arguments, a pipe, a here-document, or a --yes style flag.]"
	strayHeader       = "[output from background jobs since the previous call]"
	abandonedShell    = "[The shell had exited before this command: %s. The command ran in a new shell.]"
)

// Kill reasons, as the terminals service records them.
const (
	reasonExited     = "persistent bash shell exited"
	reasonTimedOut   = "persistent bash command timed out"
	reasonAborted    = "persistent bash command aborted"
	reasonSendFailed = "persistent bash send failed"
	reasonInitFailed = "persistent bash initialization failed"
	reasonStuck      = "persistent bash shell did not return from an interactive program"
)

// interruptSignals escalate when a program waiting for input ignores the
// previous one: SIGINT is what a person would press; a REPL catches it, a
// pager or editor ignores it, SIGTERM ends those, SIGKILL ends anything. The
// shell itself is never killed: the backend refuses SIGKILL to it.
var interruptSignals = []terminal.Signal{terminal.SIGINT, terminal.SIGTERM, terminal.SIGKILL}

// interruptStep bounds how long one signal may take to bring the shell back.
const interruptStep = 2 * time.Second

// killBound bounds closing a shell when a call resets it.
const killBound = 30 * time.Second

// call runs one bash tool call for owner.
func (p *plugin) call(ctx context.Context, owner *host.Owner, args Args) (string, error) {
	if strings.TrimSpace(args.Command) == "" {
		return "", errEmptyCommand
	}
	if strings.IndexByte(args.Command, 0) >= 0 {
		return "", errNULCommand
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return "", errUnloaded
	}
	p.inflight.Add(1)
	p.mu.Unlock()
	defer p.inflight.Done()

	// The call ends with the plugin. (It also ends with its owner: closing
	// an owner closes its shells, and the call then sees the owner gone.)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(p.lifetime, func() { cancel(errUnloaded) })
	defer stop()

	st, err := p.ownerState(owner)
	if err != nil {
		return "", err
	}
	if err := st.queue.acquire(ctx); err != nil {
		return "", fmt.Errorf("bash call cancelled before it ran: %w", err)
	}
	defer st.queue.release()
	if ctx.Err() != nil {
		return "", fmt.Errorf("bash call cancelled before it ran: %w", context.Cause(ctx))
	}

	timeout := time.Duration(p.cfg.TimeoutMs) * time.Millisecond
	dctx, cancelDeadline := context.WithTimeoutCause(ctx, timeout, errTimedOut)
	defer cancelDeadline()
	r := &run{p: p, st: st, ctx: dctx, parent: ctx}
	return r.execute(args.Command)
}

// run is one call in progress.
type run struct {
	p      *plugin
	st     *ownerState
	ctx    context.Context // the call's deadline context
	parent context.Context // without the deadline: tells a timeout from a cancellation
	prefix []string        // notices that go before the output

	retried bool     // a dead shell was replaced once already
	c       *capture // the command's output so far; nil before it is typed
}

func (r *run) terms() *terminal.Service { return r.p.terms }
func (r *run) owner() *host.Owner       { return r.st.owner }

func (r *run) execute(command string) (string, error) {
	if err := r.ensureShell(); err != nil {
		if r.ctx.Err() != nil {
			return r.stopped()
		}
		return "", err
	}
	m := newMarkers()
	s := newSink(r.p.cfg.MaxOutputChars, func() (io.WriteCloser, string, error) { return r.st.openOutput(r.p.cfg.OutputDir) })
	defer s.close()
	c := newCapture(m, s)
	r.c = c

	line, ok := m.wrap(command)
	if !ok {
		path, remove, err := r.st.writeCommand(r.p.cfg.OutputDir, m.id, command)
		if err != nil {
			return "", fmt.Errorf("bash: %w", err)
		}
		defer remove()
		line = m.wrapFile(path)
	}
	send, err := r.startSend(line, true, 0)
	if errors.Is(err, terminal.ErrSessionExited) && r.retryable() {
		return r.rerun(command, terminal.Status{Exited: true, ExitCode: -1})
	}
	if err != nil {
		return r.sendFailed(err)
	}
	for {
		res, err := r.drain(send, c)
		switch {
		case r.ctx.Err() != nil || !r.owner().Live():
			return r.stopped()
		case err != nil:
			return r.sendFailed(err)
		case c.ended():
			return r.respond(c, true), nil
		case (res.Reason == terminal.WaitSessionExit || res.Status.Exited) && !c.started() && r.retryable():
			// The shell died before the line began (a background kill
			// landed first): the command never ran.
			return r.rerun(command, res.Status)
		case res.Reason == terminal.WaitSessionExit || res.Status.Exited:
			return r.shellExited(c, res.Status), nil
		case res.Reason == terminal.WaitStdinRead && res.Prompt:
			// Back at the prompt without the end marker: the line never
			// finished (exec replaced the shell, or bash abandoned the
			// line), or the shell lost the tool's functions. Whatever it
			// printed is the result; initialize the shell again before the
			// next command.
			r.st.needsInit = true
			return r.respond(c, false), nil
		case res.Reason == terminal.WaitStdinRead:
			return r.interrupt(c)
		}
		// Silence or the backend's own bound, without proof of anything:
		// the command is still running. Wait again.
		if send, err = r.startSend("", false, 0); err != nil {
			return r.sendFailed(err)
		}
	}
}

// retryable: this call has not yet restarted a dead shell.
func (r *run) retryable() bool { return !r.retried }

// rerun reports a shell that was already dead when the call began, and runs
// the command once in a fresh shell.
func (r *run) rerun(command string, status terminal.Status) (string, error) {
	r.retried = true
	for _, info := range r.terms().List(r.owner()) {
		if info.ID == r.st.shellID && info.Status.Exited {
			status = info.Status // the service's record says how it ended
		}
	}
	r.reset(reasonExited)
	r.prefix = append(r.prefix, fmt.Sprintf(abandonedShell, exitMarker(status)))
	return r.execute(command)
}

// ensureShell gives the owner a live, initialized shell.
func (r *run) ensureShell() error {
	if id := r.st.shellID; id != "" {
		for _, info := range r.terms().List(r.owner()) {
			if info.ID != id {
				continue
			}
			if !info.Status.Exited {
				if r.st.needsInit {
					return r.initShell()
				}
				return nil
			}
			// It died between calls (a background kill, say): say so, and
			// run this command in a fresh shell.
			r.prefix = append(r.prefix, fmt.Sprintf(abandonedShell, exitMarker(info.Status)))
			break
		}
		r.reset(reasonExited)
	}
	info, err := r.terms().Spawn(r.ctx, r.owner(), terminal.SpawnRequest{Type: r.p.cfg.BackendType, Cwd: r.owner().Workdir()})
	if err != nil {
		return fmt.Errorf("bash: start the shell: %w", err)
	}
	r.st.shellID = info.ID
	return r.initShell()
}

// initShell runs initScript in the owner's shell.
func (r *run) initShell() error {
	send, err := r.startSend(initScript, true, 0)
	if err == nil {
		var res terminal.SendResult
		res, err = r.drain(send, nil)
		if err == nil && (res.Reason == terminal.WaitSessionExit || res.Reason == terminal.WaitTimeout) {
			err = errors.New("persistent bash shell did not accept initialization")
		}
	}
	if err != nil {
		r.reset(reasonInitFailed)
		return fmt.Errorf("bash: start the shell: %w", err)
	}
	r.st.needsInit = false
	return nil
}

// startSend starts a send that streams its output to the call. Its bound
// is the call's remaining time, or less when limit is positive.
func (r *run) startSend(text string, submit bool, limit time.Duration) (terminal.Send, error) {
	bound := time.Until(deadline(r.ctx))
	if limit > 0 && limit < bound {
		bound = limit
	}
	if bound <= 0 {
		// The deadline has passed; its timer fires at once.
		<-r.ctx.Done()
		return nil, context.Cause(r.ctx)
	}
	return r.terms().StartSend(r.ctx, r.owner(), r.st.shellID, terminal.SendRequest{
		Text: text, Submit: submit, Stream: true, Timeout: bound,
	})
}

func deadline(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(math.MaxInt64 / 2)
	}
	return d
}

// drain reads a send's output to the end, then its result. A nil capture
// discards the output (initialization).
func (r *run) drain(send terminal.Send, c *capture) (terminal.SendResult, error) {
	for {
		text, err := send.Output(r.ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return terminal.SendResult{}, err
		}
		if c != nil {
			if err := c.push(text); err != nil {
				return terminal.SendResult{}, err
			}
		}
	}
	res, err := send.Wait(r.ctx)
	if err != nil {
		return res, err
	}
	if c != nil {
		// Output has returned every complete line; only the line still
		// being written is new in the viewport.
		partial := res.Viewport[strings.LastIndexByte(res.Viewport, '\n')+1:]
		c.finish(partial, res.Prompt)
	}
	return res, nil
}

// interrupt handles a command proven to wait for input: signal the
// foreground group until the shell is back (escalating), and report the
// output so far with a notice. The next command is never typed into the
// waiting program.
func (r *run) interrupt(c *capture) (string, error) {
	for _, sig := range interruptSignals {
		if _, err := r.terms().Signal(r.ctx, r.owner(), r.st.shellID, sig); err != nil {
			if r.ctx.Err() != nil {
				return r.stopped()
			}
			break // the shell itself is in the foreground, or gone: reset below
		}
		send, err := r.startSend("", false, interruptStep)
		if err != nil {
			return r.sendFailed(err)
		}
		res, err := r.drain(send, c)
		switch {
		case r.ctx.Err() != nil:
			return r.stopped()
		case err != nil:
			return r.sendFailed(err)
		case res.Reason == terminal.WaitSessionExit || res.Status.Exited:
			r.prefix = append(r.prefix, interactiveNotice)
			return r.shellExited(c, res.Status), nil
		case c.ended() || res.Prompt:
			r.st.needsInit = r.st.needsInit || !c.ended()
			return joinNonEmpty(r.renderOutput(c), interactiveNotice), nil
		}
	}
	out := r.renderOutput(c)
	r.reset(reasonStuck)
	return joinNonEmpty(out, interactiveNotice, resetNotice), nil
}

// respond renders a call that ran to its end (complete: the end marker and
// status were seen) or back to the prompt without it.
func (r *run) respond(c *capture, complete bool) string {
	out := r.renderOutput(c)
	if complete && c.status != 0 {
		return joinNonEmpty(out, fmt.Sprintf(exitCodeLine, c.status))
	}
	return out
}

// shellExited renders a call whose shell died, and resets the owner.
func (r *run) shellExited(c *capture, status terminal.Status) string {
	if status.Signal == "" {
		// An exiting interactive bash says "exit"; that is bash's chatter,
		// and the marker line below says it better.
		c.sink.dropTrailingLine("exit")
	}
	out := r.renderOutput(c)
	r.reset(reasonExited)
	return joinNonEmpty(out, exitMarker(status), resetNotice)
}

// stopped handles the call's end from outside: the deadline gives the
// timeout response (a result, not an error); a cancellation, an unload, or
// the owner closing resets the shell and is an error.
func (r *run) stopped() (string, error) {
	if !r.owner().Live() {
		r.reset(reasonAborted)
		return "", errOwnerClosed
	}
	if errors.Is(context.Cause(r.ctx), errTimedOut) && r.parent.Err() == nil {
		partial := ""
		if r.c != nil {
			partial = r.renderOutput(r.c)
		}
		r.reset(reasonTimedOut)
		secs := int(math.Round(float64(r.p.cfg.TimeoutMs) / 1000))
		return fmt.Sprintf(timeoutHeader, secs) + "\n" + partial + "\n" + resetNotice, nil
	}
	cause := context.Cause(r.parent)
	r.reset(reasonAborted)
	if errors.Is(cause, errUnloaded) {
		return "", cause
	}
	return "", fmt.Errorf("bash call cancelled: %w", cause)
}

func (r *run) sendFailed(err error) (string, error) {
	if r.ctx.Err() != nil || !r.owner().Live() {
		return r.stopped()
	}
	r.reset(reasonSendFailed)
	return "", fmt.Errorf("bash: %w", err)
}

// reset closes the owner's shell; the next call starts a fresh one.
func (r *run) reset(reason string) {
	id := r.st.shellID
	if id == "" {
		return
	}
	r.st.shellID = ""
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), killBound)
	defer cancel()
	if _, err := r.terms().Kill(ctx, r.owner(), id, reason); err != nil && !errors.Is(err, terminal.ErrNoSession) {
		r.p.logger.Warn("closing a bash shell failed", "owner", r.owner().ID(), "session", id, "reason", reason, "err", err)
	}
}

// renderOutput is the model's view of the output: notices about the call,
// background output from between calls, and the command's output (head and
// tail when long).
func (r *run) renderOutput(c *capture) string {
	c.flush()
	var parts []string
	parts = append(parts, r.prefix...)
	if s := c.strayNote(); s != "" {
		if !c.started() {
			// The start marker never came (the tool's functions were gone):
			// everything the terminal showed is the command's.
			return joinNonEmpty(append(parts, s)...)
		}
		parts = append(parts, strayHeader+"\n"+s)
	}
	parts = append(parts, c.sink.text())
	return joinNonEmpty(parts...)
}

// exitMarker describes how a shell ended.
func exitMarker(s terminal.Status) string {
	switch {
	case s.Signal != "":
		return fmt.Sprintf("[shell killed by signal: %s]", s.Signal)
	case s.ExitCode >= 0:
		return fmt.Sprintf("[shell exited: code %d]", s.ExitCode)
	}
	return "[shell exited]"
}

func joinNonEmpty(parts ...string) string {
	kept := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "\n")
}
