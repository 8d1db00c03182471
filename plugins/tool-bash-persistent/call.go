package bashtool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Model-visible texts. The first three are the original tool's, verbatim.
const (
	resetNotice       = "The persistent bash shell was reset; the next bash call starts from the workspace with a fresh current directory and environment."
	timeoutHeader     = "Your command timed out after %s seconds or experienced an OOM error. Below is partial output:"
	exitCodeLine      = "[exit code: %d]"
	interactiveNotice = "[The command was waiting for interactive input, which this tool does not provide, so it was interrupted. Pass input non-interactively: arguments, a pipe, a here-document, or a --yes style flag.]"
	// silenceNotice replaces interactiveNotice where the backend cannot
	// prove a wait for input (Capabilities.InputProof) and the command
	// was only silent.
	silenceNotice  = "[Nothing was printed for %s s and this shell's backend cannot see whether a program waits for input, so the command was taken to be waiting and interrupted. Pass input non-interactively, or run a long, quiet command in the background.]"
	strayHeader    = "[output from background jobs since the previous call]"
	abandonedShell = "[The shell had exited before this command: %s. The command ran in a new shell.]"
	unusableShell  = "[The shell was not at its prompt (a program had taken its terminal), so it was replaced. The command ran in a new shell.]"
	// keptShell starts the first result after dsh restarted and took the
	// owner's shell back from its keeper; lostShell says the keeper had
	// ended too, before the reset notice, and expiredShell that the keeper
	// ended the shell because no dsh took it back in time.
	keptShell         = "[dsh restarted; this shell was kept, with its directory, environment and jobs. While dsh was away: %s.]"
	lostShell         = "[dsh restarted, and this shell could not be kept: its keeper had ended too. The command was not run.]"
	expiredShell      = "[dsh restarted, and this shell could not be kept: no dsh took it back within --keep-shells (%s), so its keeper ended it. The command was not run.]"
	continuedShell    = "[The shell had been stopped (SIGSTOP); it was continued.]"
	droppedBackground = "[Older output of background jobs was dropped; what follows is the newest.]"
	startedLine       = "[The command was started in the background as job %%%[1]d and keeps running. Its output appears in later results; `wait %%%[1]d` waits for it and gives its status, `kill %%%[1]d` stops it.]"
	// savedLine ends a clipped result: some clients cut the middle of a
	// long result, which is where the clipping notice names the file.
	savedLine   = "[full output: %s]"
	savedBgLine = "[output of background jobs: %s]"
	// What the shell's limits did during the call.
	memoryLimitLine = "[The shell's processes reached their memory limit (%s), so the kernel killed one of them (normally the largest).]"
	pidsLimitLine   = "[The shell's processes reached their limit of %d processes and threads, so starting more failed.]"
)

// Kill reasons, as the terminals service records them.
const (
	reasonExited     = "persistent bash shell exited"
	reasonTimedOut   = "persistent bash command timed out"
	reasonAborted    = "persistent bash command aborted"
	reasonSendFailed = "persistent bash send failed"
	reasonStuck      = "persistent bash shell did not return from an interactive program"
	reasonUnusable   = "persistent bash shell was not at its prompt"
)

// interruptSignals escalate when a program waiting for input ignores the
// previous one: SIGINT is what a person would press; a REPL catches it, a
// pager or editor ignores it, SIGTERM ends those, SIGKILL ends anything. The
// shell itself is never killed: the backend refuses SIGKILL to it.
var interruptSignals = []termapi.Signal{termapi.SIGINT, termapi.SIGTERM, termapi.SIGKILL}

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
	timeoutMs := p.cfg.TimeoutMs
	if args.TimeoutMs > 0 {
		// A call may ask for less time, never for more.
		timeoutMs = min(args.TimeoutMs, timeoutMs)
	}
	command := args.Command
	if args.Background {
		// A job of the same shell, as `COMMAND &` would be; the newline
		// ends a comment or a here-document the command ends with.
		command = "{ " + command + "\n} &"
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
	if err := st.awaitClosed(ctx); err != nil {
		return "", fmt.Errorf("bash call cancelled before it ran: %w", err)
	}
	if err := st.awaitHandedOver(ctx); err != nil {
		return "", err
	}
	parked, resumed := st.takeParked(ctx)

	r := &run{p: p, st: st, parent: ctx, abandonParked: parked != nil && !resumed, command: args.Command, timeoutMs: timeoutMs, background: args.Background, carried: st.takeNotes()}
	defer func() {
		// A result carries the reports of earlier cancelled calls; a call
		// that ends without one keeps them for the next, after its own.
		if !r.delivered {
			st.notes = append(r.carried, st.notes...)
		}
		if r.cancelNote != "" {
			st.notes = append(st.notes, r.cancelNote)
		}
	}()
	// The owner's shell starts first, under a bound of its own: when many
	// agents start at once, the machine queues shell starts, and that wait
	// is not the command's (timeoutMs bounds the command).
	sctx, cancelStart := context.WithTimeoutCause(ctx, shellStartBound, errShellStartTimedOut)
	r.ctx = sctx
	err = r.ensureShell()
	cancelStart()
	switch {
	case err == nil:
	case !owner.Live():
		return "", errOwnerClosed
	case errors.Is(context.Cause(sctx), errShellStartTimedOut) && ctx.Err() == nil:
		return "", fmt.Errorf("bash: the shell did not start within %s (the machine may be starting many at once); try again: %w", shellStartBound, err)
	case ctx.Err() != nil:
		if errors.Is(context.Cause(ctx), errUnloaded) {
			return "", context.Cause(ctx)
		}
		return "", fmt.Errorf("bash call cancelled: %w", context.Cause(ctx))
	default:
		return "", err
	}

	timeout := time.Duration(timeoutMs) * time.Millisecond
	dctx, cancelDeadline := context.WithTimeoutCause(ctx, timeout, errTimedOut)
	defer cancelDeadline()
	r.ctx = dctx
	var text string
	switch {
	case resumed:
		text, err = r.resumeParked(parked)
	case r.lost && r.expired > 0:
		text = joinNonEmpty(fmt.Sprintf(expiredShell, shortDuration(r.expired)), resetNotice)
	case r.lost:
		text = joinNonEmpty(lostShell, resetNotice)
	case r.kept != nil:
		text, err = r.takeBack(command)
	default:
		text, err = r.execute(command)
	}
	r.delivered = err == nil
	return text, err
}

// shellStartBound bounds the wait for an owner's shell to start, queue
// included: far more than a shell needs, even on a loaded machine.
const shellStartBound = 2 * time.Minute

var errShellStartTimedOut = errors.New("the shell did not start in time")

// run is one call in progress.
type run struct {
	p      *plugin
	st     *ownerState
	ctx    context.Context // the call's deadline context
	parent context.Context // without the deadline: tells a timeout from a cancellation
	prefix []string        // notices that go before the output
	// command is the command as the call gave it.
	command string
	// timeoutMs is the call's timeout: the configured one, or less when
	// the call asked for less.
	timeoutMs int
	// background: the command was started as a background job.
	background bool
	// carried are the reports of the owner's earlier cancelled calls,
	// which this call's result starts with; delivered is set once it has.
	carried   []string
	delivered bool
	// cancelNote is the report of this call, when it was cancelled, for
	// the owner's next result.
	cancelNote string
	// started is when the command was handed to the shell.
	started time.Time

	retried bool // a dead or unusable shell was replaced once already
	// out is the command's output so far, bg what background jobs printed
	// before it; nil before the command is handed to the shell.
	out, bg *sink
	// pending is the line the terminal was still writing when the last
	// send settled before the command ended: the terminal goes on writing
	// it, so the next send delivers it again, complete. It is kept until
	// then, or until the call ends.
	pending string
	// abandonParked: the owner's previous command waits for a secret
	// whose answer never came; it is interrupted first.
	abandonParked bool
	// rawEnd is where the raw output of the last settle ends.
	rawEnd int64
	// exit is the command's status once it completed; -1 otherwise.
	exit    int
	notices string
	// live is the send started last, until drain has seen it settle: a
	// deadline that ends a wait leaves it in flight.
	live termapi.Send
	// timedOut: the call is past its deadline and handling that.
	timedOut bool
	// held, when set, takes the output instead of out, keeping its last
	// lines back (see heldTail).
	held *heldTail
	// kept is what the keeper of the shell this call took back says
	// happened while no dsh held it; lost, that its keeper had ended.
	kept *termapi.Kept
	lost bool
	// expired, with lost, is how long the keeper kept the shell without a
	// dsh before it ended it.
	expired time.Duration
	// hits are the limits the shell's processes ran into during the call.
	hits termapi.Limits
	// lastOut is when the command last printed, or began.
	lastOut time.Time
	// resetting: the result being rendered ends with the shell's reset.
	resetting bool
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
	r.openSinks()
	defer r.closeSinks()
	r.exit, r.notices, r.pending = -1, "", ""
	if r.abandonParked {
		// The previous command waits for a secret the client never sent:
		// interrupt it before this command runs.
		r.abandonParked = false
		if o, _, _, err := r.signalUntilPrompt(interruptSignals, func(termapi.Signal) time.Duration { return interruptStep }); err != nil || o != backAtPrompt {
			r.reset(reasonStuck)
			r.prefix = append(r.prefix, secretAbandoned, resetNotice)
			r.closeSinks()
			return r.execute(command)
		}
		r.closeSinks()
		r.openSinks()
		r.exit, r.notices, r.pending = -1, "", ""
		r.prefix = append(r.prefix, secretAbandoned)
	}
	r.lastOut = time.Now()
	r.started = time.Now()

	// Sends run under the call's context without its deadline: a send that
	// outlives it is not cancelled (a SIGINT), because what happens to the
	// command at the deadline is timeoutAction's to decide. Its own bound
	// still ends it at the deadline.
	send, err := r.terms().Exec(r.parent, r.owner(), r.st.shellID, termapi.ExecRequest{
		Command: command, Stream: true, Captured: true, Timeout: r.remaining(0),
	})
	switch {
	case (errors.Is(err, termapi.ErrSessionExited) || errors.Is(err, termapi.ErrShellBusy)) && r.retryable():
		return r.rerun(command, err)
	case err != nil:
		return r.sendFailed(err)
	}
	r.live = send
	return r.follow(command, send)
}

// openSinks makes the sinks of the command's output and of the background
// output before it; closeSinks closes them.
func (r *run) openSinks() {
	open := func() (io.WriteCloser, string, error) {
		return r.st.openOutput(&r.p.saved, r.p.cfg.OutputDir, r.p.cfg.MaxSavedBytes)
	}
	r.out = newSink(r.p.cfg.MaxOutputChars, open)
	r.bg = newSink(max(r.p.cfg.MaxOutputChars/4, 1), open)
}

func (r *run) closeSinks() {
	r.out.close()
	r.bg.close()
}

// follow follows the command's sends, from send on, until the call ends.
func (r *run) follow(command string, send termapi.Send) (string, error) {
	for {
		res, err := r.drain(send)
		switch {
		case r.ctx.Err() != nil || !r.owner().Live():
			return r.stopped()
		case err != nil:
			return r.sendFailed(err)
		case res.Exec != nil && res.Exec.State == termapi.ExecCompleted:
			return r.respond(), nil
		case exited(res) && res.Exec != nil && res.Exec.State == termapi.ExecPending && r.retryable():
			// The shell died before it took the command (a background kill
			// landed first): the command never ran.
			return r.rerun(command, fmt.Errorf("%w (%s)", termapi.ErrSessionExited, res.Status))
		case exited(res):
			return r.shellExited(res.Status), nil
		case res.Prompt:
			// Back at the prompt without the command's end: its line was
			// abandoned (something interrupted it, or it replaced the shell).
			return r.respond(), nil
		case res.Reason == termapi.WaitStdinRead && terminal.AsksForSecret(res, r.pending):
			next, out, err := r.answerSecret(command)
			if next == nil {
				return out, err
			}
			send = next
			continue
		case res.Reason == termapi.WaitStdinRead && r.p.cfg.OnInput == OnInputHandoff:
			if out, ok := r.handoff(command); ok {
				return out, nil
			}
			return r.interrupt()
		case res.Reason == termapi.WaitStdinRead:
			return r.interrupt()
		case res.Reason == termapi.WaitInferredIdle && !r.st.proven:
			// Silence is all a backend without the proof can tell: take it
			// for a wait, as such backends promise, rather than hold the
			// call until timeoutMs.
			return r.interruptEnded(fmt.Sprintf(silenceNotice, silentFor(r.lastOut)), "silent, taken to wait for input, interrupted")
		}
		// Silence or the backend's own bound, without proof of anything:
		// the command is still running. Wait again.
		if send, err = r.startSend(0); err != nil {
			return r.sendFailed(err)
		}
	}
}

func exited(res termapi.SendResult) bool {
	return res.Reason == termapi.WaitSessionExit || res.Status.Exited
}

// retryable: this call has not yet replaced a dead or unusable shell.
func (r *run) retryable() bool { return !r.retried }

// rerun reports a shell that could not take the command (it had died, or
// something other than the shell held its terminal), and runs the command
// once in a fresh shell.
func (r *run) rerun(command string, why error) (string, error) {
	r.retried = true
	status := termapi.Status{Exited: true, ExitCode: -1}
	for _, info := range r.terms().List(r.owner()) {
		if info.ID == r.st.shellID && info.Status.Exited {
			status = info.Status // the service's record says how it ended
		}
	}
	if errors.Is(why, termapi.ErrShellBusy) {
		r.reset(reasonUnusable)
		r.prefix = append(r.prefix, unusableShell)
	} else {
		r.reset(reasonExited)
		r.prefix = append(r.prefix, fmt.Sprintf(abandonedShell, exitMarker(status)))
	}
	return r.execute(command)
}

// ensureShell gives the owner a live shell.
func (r *run) ensureShell() error {
	if id := r.st.shellID; id != "" {
		for _, info := range r.terms().List(r.owner()) {
			if info.ID != id {
				continue
			}
			if !info.Status.Exited {
				return nil
			}
			// It died between calls (a background kill, say): say so, and
			// run this command in a fresh shell.
			r.prefix = append(r.prefix, fmt.Sprintf(abandonedShell, exitMarker(info.Status)))
			break
		}
		r.reset(reasonExited)
	}
	if r.p.keeping && !r.st.adopted && r.st.shellID == "" {
		adopted, err := r.adopt()
		if adopted || err != nil {
			return err
		}
	}
	info, err := r.terms().Spawn(r.ctx, r.owner(), terminal.SpawnRequest{Type: r.p.cfg.BackendType, Cwd: r.owner().Workdir()})
	if err != nil {
		return fmt.Errorf("bash: %w", err)
	}
	r.setShell(info.ID)
	r.st.proven = info.Capabilities.InputProof
	r.st.copyFiles = info.Capabilities.Files && !info.Capabilities.HostFiles
	return nil
}

// adopt takes back the shell a keeper kept for the owner's id, once per
// owner: the agent's dsh was restarted (or its client came back). It
// reports whether there was one. A shell whose keeper had ended too is
// closed, and the call says so with the reset notice.
func (r *run) adopt() (bool, error) {
	info, err := r.terms().Adopt(r.ctx, r.owner(), terminal.AdoptRequest{Type: r.p.cfg.BackendType})
	switch {
	case errors.Is(err, termapi.ErrNoSession):
		r.st.adopted = true
		return false, nil
	case err != nil:
		return false, fmt.Errorf("bash: take back the shell dsh kept: %w", err)
	}
	r.st.adopted = true
	r.setShell(info.ID)
	r.st.proven = info.Capabilities.InputProof
	r.st.copyFiles = info.Capabilities.Files && !info.Capabilities.HostFiles
	if info.Kept != nil && info.Kept.Lost {
		r.lost, r.expired = true, info.Kept.Expired
		r.reset(reasonExited)
		return true, nil
	}
	r.kept = info.Kept
	if r.kept == nil {
		r.kept = &termapi.Kept{}
	}
	return true, nil
}

// shortDuration is d as a person writes it: 1h, 90m, 2s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// takeBack runs the first call on a shell taken back from its keeper: the
// command that was running when dsh stopped ends first (its output and
// status lead the result), then this call's command runs; the result
// starts with the keptShell line.
func (r *run) takeBack(command string) (string, error) {
	k := r.kept
	r.kept = nil
	var meanwhile []string
	if k.Unit != nil {
		unit, done, err := r.resume()
		if !done {
			return joinNonEmpty(fmt.Sprintf(keptShell, "the command that was running had not finished; its output so far follows"), unit), err
		}
		ended := "the command that was running ended"
		if r.exit >= 0 {
			ended = fmt.Sprintf("the command that was running finished with exit code %d", r.exit)
		}
		if unit != "" {
			ended += "; its output comes first below"
		}
		meanwhile = append(meanwhile, ended)
		r.prefix = append(r.prefix, unit)
	}
	if k.Output > 0 {
		arrived := fmt.Sprintf("%s of output arrived (%s)", count(k.Output, "byte"), count(k.Lines, "line"))
		if k.Dropped > 0 {
			arrived += fmt.Sprintf(", %d of them dropped past the keeper's bound", k.Dropped)
		}
		meanwhile = append(meanwhile, arrived)
	}
	if len(meanwhile) == 0 {
		meanwhile = append(meanwhile, "nothing ran and nothing was printed")
	}
	r.prefix = append([]string{fmt.Sprintf(keptShell, strings.Join(meanwhile, "; "))}, r.prefix...)
	return r.execute(command)
}

// resume waits for the command the shell's last dsh lost to end, and
// renders it as a call's result would be. done is false when it did not
// end within this call (its result is then the whole answer: a timeout,
// the shell's death, an error).
func (r *run) resume() (string, bool, error) {
	prefix := r.prefix
	r.prefix = nil
	defer func() { r.prefix = prefix }()
	r.openSinks()
	defer r.closeSinks()
	r.exit, r.notices, r.pending = -1, "", ""
	send, err := r.terms().Resume(r.parent, r.owner(), r.st.shellID, termapi.SendRequest{Stream: true, Timeout: r.remaining(0)})
	switch {
	case errors.Is(err, termapi.ErrNoUnit):
		return "", true, nil
	case err != nil:
		out, err := r.sendFailed(err)
		return out, false, err
	}
	r.live = send
	r.retried = true // the lost command is never run again
	defer func() { r.retried = false }()
	out, err := r.follow("", send)
	return out, err == nil && !r.timedOut && r.st.shellID != "", err
}

// setShell records the owner's shell, also where the invariants look
// (under the plugin's lock): a shell is recorded there only once the
// terminals service lists it, and forgotten there before it is closed.
func (r *run) setShell(id string) {
	r.p.mu.Lock()
	if old := r.st.listed; old != "" && old != id {
		if r.st.retired == nil {
			r.st.retired = make(map[string]bool)
		}
		r.st.retired[old] = true
	}
	r.st.shellID, r.st.listed = id, id
	r.p.mu.Unlock()
}

// remaining is the call's time left, or limit when that is shorter.
func (r *run) remaining(limit time.Duration) time.Duration {
	bound := time.Until(deadline(r.ctx))
	if limit > 0 && limit < bound {
		bound = limit
	}
	return bound
}

// startSend starts an empty send: a wait for the command's shell to settle
// again. Its bound is the call's remaining time, or less when limit is
// positive.
func (r *run) startSend(limit time.Duration) (termapi.Send, error) {
	bound := r.remaining(limit)
	if bound <= 0 {
		// The deadline has passed; its timer fires at once.
		<-r.ctx.Done()
		return nil, context.Cause(r.ctx)
	}
	send, err := r.terms().StartSend(r.parent, r.owner(), r.st.shellID, termapi.SendRequest{Stream: true, Timeout: bound})
	if err == nil {
		r.live = send
	}
	return send, err
}

func deadline(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(math.MaxInt64 / 2)
	}
	return d
}

// drain reads a send's output to the end, then its result, and takes what
// the result says about the command.
func (r *run) drain(send termapi.Send) (termapi.SendResult, error) {
	for {
		text, err := send.Output(r.ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return termapi.SendResult{}, err
		}
		// A held line comes again, completed, at the start of text.
		r.pending = ""
		r.lastOut = time.Now()
		if r.held != nil {
			r.held.write(text)
		} else {
			r.out.write(text)
			host.Output(r.parent, text)
		}
	}
	res, err := send.Wait(r.ctx)
	if err != nil {
		return res, err
	}
	if r.live == send {
		r.live = nil
	}
	r.noteHits(res.LimitsHit)
	// Output has returned every complete line; only the line still being
	// written is new in the viewport.
	r.pending = res.Viewport[strings.LastIndexByte(res.Viewport, '\n')+1:]
	r.rawEnd = res.RawEnd
	if x := res.Exec; x != nil {
		if x.Background != "" {
			r.bg.write(x.Background)
		}
		if x.BackgroundTruncated && !slices.Contains(r.prefix, droppedBackground) {
			// Said once, however many of the call's results say it.
			r.prefix = append(r.prefix, droppedBackground)
		}
		if x.Continued {
			r.prefix = append(r.prefix, continuedShell)
		}
		if x.State == termapi.ExecCompleted {
			r.exit = x.ExitCode
		}
		r.notices = x.Notices
	}
	return res, nil
}

// interrupt handles a command proven to wait for input: signal the
// foreground group until the shell is back (escalating), and report the
// output so far with a notice. The next command is never typed into the
// waiting program.
func (r *run) interrupt() (string, error) { return r.interruptWith(interactiveNotice) }

// interruptWith is interrupt, with notice as the line that says why.
func (r *run) interruptWith(notice string) (string, error) {
	return r.interruptEnded(notice, "waited for input, interrupted")
}

// interruptEnded is interruptWith for a command that waits for input or,
// where the backend cannot prove it, is silent; ended is what the audit
// log says.
func (r *run) interruptEnded(notice, ended string) (string, error) {
	r.p.stats.stdinInterrupts.Add(1)
	host.Note(r.parent, "ended", ended)
	o, _, res, err := r.signalUntilPrompt(interruptSignals, func(termapi.Signal) time.Duration { return interruptStep })
	switch {
	case r.ctx.Err() != nil:
		return r.stopped()
	case err != nil:
		return r.sendFailed(err)
	case o == shellGone:
		r.prefix = append(r.prefix, notice)
		return r.shellExited(res.Status), nil
	case o == backAtPrompt:
		// The status of an interrupted command is noise, and so is the
		// newline bash prints when a builtin's read is interrupted.
		r.exit = -1
		r.flushPending()
		r.out.trimTrailingNewlines()
		return r.result(r.renderOutput(), notice), nil
	}
	r.resetting = true
	out := r.renderOutput()
	r.reset(reasonStuck)
	return r.result(out, notice, resetNotice), nil
}

// silentFor says how long ago since was, in seconds to a tenth.
func silentFor(since time.Time) string {
	return strconv.FormatFloat(time.Since(since).Round(100*time.Millisecond).Seconds(), 'f', -1, 64)
}

// respond renders a call whose command ended: its output, its job
// notices, and its exit status when that is not 0.
func (r *run) respond() string {
	host.Note(r.parent, "exitCode", max(r.exit, 0))
	if r.background && r.exit == 0 {
		if job, ok := r.out.takeJobAnnouncement(); ok {
			return r.result(r.renderOutput(), fmt.Sprintf(startedLine, job))
		}
	}
	out := r.renderOutput()
	if r.exit > 0 {
		return r.result(out, fmt.Sprintf(exitCodeLine, r.exit))
	}
	return r.result(out)
}

// result joins the non-empty parts of a call's result and, when output was
// clipped, ends it with the saved file's path.
func (r *run) result(parts ...string) string {
	parts = append(append(r.carried[:len(r.carried):len(r.carried)], parts...), r.savedLines()...)
	return joinNonEmpty(parts...)
}

// savedLines name the files that hold the whole of a clipped output.
func (r *run) savedLines() []string {
	var lines []string
	if r.out != nil {
		if p := r.out.saved(); p != "" {
			lines = append(lines, fmt.Sprintf(savedLine, p))
		}
	}
	if r.bg != nil {
		if p := r.bg.saved(); p != "" {
			lines = append(lines, fmt.Sprintf(savedBgLine, p))
		}
	}
	return lines
}

// shellExited renders a call whose shell died, and resets the owner.
func (r *run) shellExited(status termapi.Status) string {
	host.Note(r.parent, "ended", "shell exited")
	if status.Signal == "" {
		// An exiting interactive bash says "exit"; that is bash's chatter,
		// and the marker line below says it better.
		r.flushPending()
		r.out.dropTrailingLine("exit")
	}
	r.resetting = true
	out := r.renderOutput()
	r.reset(reasonExited)
	return r.result(out, exitMarker(status), resetNotice)
}

// stopped handles the call's end from outside: the deadline gives the
// timeout response (a result, not an error); a cancellation, an unload, or
// the owner closing resets the shell and is an error.
func (r *run) stopped() (string, error) {
	if !r.owner().Live() {
		r.reset(reasonAborted)
		return "", errOwnerClosed
	}
	if errors.Is(context.Cause(r.ctx), errTimedOut) && r.parent.Err() == nil && !r.timedOut {
		return r.onTimeout()
	}
	cause := context.Cause(r.parent)
	if errors.Is(cause, errUnloaded) {
		r.reset(reasonAborted)
		return "", cause
	}
	return r.onCancel(cause)
}

func (r *run) sendFailed(err error) (string, error) {
	if r.ctx.Err() != nil || !r.owner().Live() {
		return r.stopped()
	}
	r.reset(reasonSendFailed)
	return "", fmt.Errorf("bash: %w", err)
}

// testHookKeepShellOnReset breaks the tool on purpose, for the test that
// shows the invariants catch it: a reset closes the shell but the tool
// keeps holding it.
var testHookKeepShellOnReset atomic.Bool

// reset closes the owner's shell; the next call starts a fresh one.
func (r *run) reset(reason string) {
	id := r.st.shellID
	if id == "" {
		return
	}
	r.p.stats.resets.Add(1)
	if !testHookKeepShellOnReset.Load() {
		r.setShell("")
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), killBound)
	defer cancel()
	if _, err := r.terms().Kill(ctx, r.owner(), id, reason); err != nil && !errors.Is(err, termapi.ErrNoSession) {
		r.p.logger.Warn("closing a bash shell failed", "owner", r.owner().ID(), "session", id, "reason", reason, "err", err)
	}
}

// resetInBackground closes the owner's shell without waiting for it: a
// program that ignores SIGTERM keeps a close going for disposeGraceMs, and
// a timeout must not answer that late. The owner's next call waits until
// the close is over before it starts a shell.
func (r *run) resetInBackground(reason string) {
	id := r.st.shellID
	if id == "" {
		return
	}
	r.p.stats.resets.Add(1)
	r.setShell("")
	done := make(chan struct{})
	r.st.closing = done
	// Counted with the calls, so an unload waits for it.
	r.p.inflight.Add(1)
	owner := r.owner()
	go func() {
		defer r.p.inflight.Done()
		defer close(done)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.parent), killBound)
		defer cancel()
		if _, err := r.terms().Kill(ctx, owner, id, reason); err != nil && !errors.Is(err, termapi.ErrNoSession) {
			r.p.logger.Warn("closing a bash shell failed", "owner", owner.ID(), "session", id, "reason", reason, "err", err)
		}
	}()
}

// flushPending hands the held line to the output: the call is ending, and
// that line is what the terminal shows last.
func (r *run) flushPending() {
	r.out.write(r.pending)
	r.pending = ""
}

// renderOutput is the model's view of the output: notices about the call,
// background output from before the command under a header, the command's
// output (head and tail when long) and its job notices.
func (r *run) renderOutput() string {
	r.flushPending()
	if r.notices != "" {
		if !r.out.atLineStart() {
			r.out.write("\n")
		}
		r.out.write(r.notices)
		r.notices = ""
	}
	copy := r.copyForShell()
	r.bg.finish(copy)
	r.out.finish(copy)
	parts := append([]string(nil), r.prefix...)
	if bg := r.bg.text(); bg != "" {
		parts = append(parts, strayHeader+"\n"+bg)
	}
	parts = append(parts, r.out.text())
	parts = append(parts, r.limitLines()...)
	return joinNonEmpty(parts...)
}

// noteHits takes the limits a send ran into, counting each limit once per
// call.
func (r *run) noteHits(hit termapi.Limits) {
	if hit.Memory > 0 && r.hits.Memory == 0 {
		r.hits.Memory = hit.Memory
		r.p.stats.memoryHits.Add(1)
	}
	if hit.Pids > 0 && r.hits.Pids == 0 {
		r.hits.Pids = hit.Pids
		r.p.stats.pidsHits.Add(1)
	}
}

// limitLines say, in plain words, which limits the call ran into.
func (r *run) limitLines() []string {
	var lines []string
	if r.hits.Memory > 0 {
		lines = append(lines, fmt.Sprintf(memoryLimitLine, config.Bytes(r.hits.Memory)))
	}
	if r.hits.Pids > 0 {
		lines = append(lines, fmt.Sprintf(pidsLimitLine, r.hits.Pids))
	}
	return lines
}

// exitMarker describes how a shell ended.
func exitMarker(s termapi.Status) string {
	switch {
	case s.Lost != "":
		return fmt.Sprintf("[shell lost: %s]", s.Lost)
	case s.Signal != "":
		return fmt.Sprintf("[shell killed by signal: %s]", s.Signal)
	case s.ExitCode >= 0:
		return fmt.Sprintf("[shell exited: code %d]", s.ExitCode)
	}
	return "[shell exited]"
}

// count is n things, in the singular for one.
func count(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
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
