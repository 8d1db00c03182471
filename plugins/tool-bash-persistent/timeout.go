package bashtool

import (
	"context"
	"errors"
	"fmt"
	"github.com/dshdev/dsh/host"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// The values of Config.TimeoutAction: what a call does with a command that
// runs past timeoutMs.
const (
	// TimeoutReset closes the shell, as the original tool does.
	TimeoutReset = "reset"
	// TimeoutInterrupt signals the foreground job (SIGINT, then SIGTERM,
	// then SIGKILL) and keeps the shell.
	TimeoutInterrupt = "interrupt"
	// TimeoutBackground stops the foreground job and resumes it as a
	// background job of the same shell.
	TimeoutBackground = "background"
)

// Model-visible lines that end a timeout's result when the shell is kept.
const (
	interruptedLine  = "[The command was interrupted with %s when it timed out. The shell and its state are kept: current directory, variables, functions, background jobs.]"
	backgroundedLine = "[The command was moved to the background as job %%%[1]d when it timed out, and keeps running. The shell and its state are kept. Its output appears in later results; `wait %%%[1]d` waits for it and gives its status, `kill %%%[1]d` stops it.]"
	// A command of which bash could move only the program it ran: the
	// shell does not move its own loops and lists. The second %s says
	// what became of the rest.
	partMovedLine   = "[The command timed out while running `%[2]s`, which was moved to the background as job %%%[1]d and keeps running; %[3]s The shell and its state are kept. Its output appears in later results; `wait %%%[1]d` waits for it and gives its status, `kill %%%[1]d` stops it.]"
	restNotRun      = "the rest of the command was not run (bash can move only the program it runs, not a loop or list around it)."
	restRan         = "the shell went on at once with the rest of the command (bash can move only the program it runs, not a loop or list around it)."
	endedLine       = "[The command ended as it timed out. The shell and its state are kept.]"
	leftRunningLine = "[The command had left %d processes running (background jobs and what they started); they were ended too. Jobs from earlier commands are kept.]"
)

// How long a timeout may take beyond timeoutMs when the shell is kept.
// After each signal but SIGKILL the shell gets timeoutStep to come back to
// its prompt; after SIGKILL, which nothing can ignore, only the shell's own
// latency counts, so killStep is generous. timeoutGrace bounds the whole:
// SIGTSTP, resuming the job, or the three signals of an interrupt, with
// ending what the command started and a timeoutStep for the shell to come
// back by itself once that is gone.
const (
	timeoutStep  = 500 * time.Millisecond
	killStep     = 2 * time.Second
	timeoutGrace = 5 * time.Second
)

// busyShellWait bounds the wait for a shell that holds the foreground
// itself once every signal that could end it without a reset has been
// sent; the call's own deadline bounds it too.
const busyShellWait = 30 * time.Second

var errGraceOver = errors.New("the foreground job did not stop within the timeout's grace")

// seconds renders a duration given in milliseconds as the timeout header
// says it: whole seconds as an integer, as the original does, anything else
// exactly ("0.5", "1.25").
func seconds(ms int) string {
	if ms%1000 == 0 {
		return strconv.Itoa(ms / 1000)
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64)
}

// onTimeout answers a call whose deadline passed: with the partial output
// under the original's header, then either the reset notice (the shell is
// closed in the background, so the answer does not wait for a program that
// ignores SIGTERM) or, when timeoutAction keeps the shell, a line that says
// what became of the command.
func (r *run) onTimeout() (string, error) {
	r.timedOut = true
	host.Note(r.parent, "ended", "timed out ("+string(r.p.cfg.TimeoutAction)+")")
	r.p.stats.timeouts.Add(1)
	header := fmt.Sprintf(timeoutHeader, seconds(r.timeoutMs))
	if r.out == nil || r.st.shellID == "" || r.p.cfg.TimeoutAction == TimeoutReset {
		return r.timeoutReset(header, ""), nil
	}
	ctx, cancel := context.WithTimeoutCause(r.parent, timeoutGrace, errGraceOver)
	defer cancel()
	r.ctx = ctx

	// The send in flight has the deadline for its bound, so it settles now.
	if send := r.live; send != nil {
		res, err := r.drain(send)
		switch {
		case err != nil:
			return r.graceFailed(header, err)
		case exited(res):
			return r.timeoutReset(header, exitMarker(res.Status)), nil
		case res.Prompt:
			// The command ended right at the deadline: that is its result.
			return r.respond(), nil
		}
	}
	// What the shell prints once signals land ends with its report of the
	// job ("Killed", "[1]+  Stopped  make"), which the result's last line
	// says better: hold the last lines back to drop it.
	r.held = &heldTail{out: r.out}
	defer r.releaseHeld(nil)

	var line string
	if r.p.cfg.TimeoutAction == TimeoutBackground {
		var (
			gone *termapi.Status
			err  error
		)
		switch line, gone, err = r.toBackground(); {
		case err != nil:
			return r.graceFailed(header, err)
		case gone != nil:
			return r.timeoutReset(header, exitMarker(*gone)), nil
		}
	}
	if line == "" {
		// What the command started beside its foreground job (background
		// jobs, daemons, a fork bomb) ends first, so that it holds nothing
		// back; the rest once the shell is at its prompt. A shell where
		// ending them fails is reset, which ends everything.
		ended, err := r.endCommand()
		if err != nil {
			r.p.logger.Warn("ending what a timed-out command started failed; resetting its shell", "owner", r.owner().ID(), "err", err)
			return r.timeoutReset(header, ""), nil
		}
		o, sig, res := notBack, termapi.Signal(""), termapi.SendResult{}
		if ended > 0 {
			// With what it started gone, the command may end by itself (a
			// shell function waiting for its jobs does).
			o, res, err = r.awaitPrompt(timeoutStep)
		}
		if err == nil && o == notBack {
			o, sig, res, err = r.signalUntilPrompt(interruptSignals, stepAfter)
		}
		switch {
		case err != nil:
			return r.graceFailed(header, err)
		case o == shellGone:
			return r.timeoutReset(header, exitMarker(res.Status)), nil
		case o != backAtPrompt:
			return r.timeoutReset(header, ""), nil
		}
		more, err := r.endCommand()
		if err != nil {
			r.p.logger.Warn("ending what a timed-out command started failed; resetting its shell", "owner", r.owner().ID(), "err", err)
			return r.timeoutReset(header, ""), nil
		}
		ended += more
		r.releaseHeld(func(lines []string) []string {
			lines = dropReport(lines, signalReports[sig])
			if ended > 0 {
				// The shell's reports of the jobs that were killed ("[1]+
				// Killed  make"): the result's line says it better.
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
		line = endedLine
		if sig != "" {
			line = fmt.Sprintf(interruptedLine, sig)
		}
		if ended > 0 {
			line += "\n" + fmt.Sprintf(leftRunningLine, ended)
		}
	}
	return r.result(header + "\n" + r.renderOutput() + "\n" + line), nil
}

// endCommand ends what the timed-out command left running, on a backend
// that can tell (termapi.Capabilities.EndCommand); elsewhere it does
// nothing.
func (r *run) endCommand() (int, error) {
	n, err := r.terms().EndCommand(r.ctx, r.owner(), r.st.shellID)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return 0, nil
	case err != nil:
		return 0, err
	}
	r.p.stats.commandsEnded.Add(uint64(n))
	return n, nil
}

// awaitPrompt waits up to limit for the shell to come back to its prompt
// by itself.
func (r *run) awaitPrompt(limit time.Duration) (outcome, termapi.SendResult, error) {
	send, err := r.startSend(limit)
	if err != nil {
		return notBack, termapi.SendResult{}, err
	}
	res, err := r.drain(send)
	switch {
	case err != nil:
		return notBack, res, err
	case exited(res):
		return shellGone, res, nil
	case res.Prompt:
		return backAtPrompt, res, nil
	}
	return notBack, res, nil
}

// dropKilled removes the notices of jobs killed by SIGKILL.
func dropKilled(notices string) string {
	var kept []string
	for line := range strings.SplitSeq(notices, "\n") {
		if line != "" && !killedNotice.MatchString(line) {
			kept = append(kept, line)
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return strings.Join(kept, "\n") + "\n"
}

// killedNotice is bash's notice of a job killed by SIGKILL.
var killedNotice = regexp.MustCompile(`^\[\d+\][+-]? +Killed +`)

// stepAfter is how long the shell gets to come back after sig.
func stepAfter(sig termapi.Signal) time.Duration {
	if sig == termapi.SIGKILL {
		return killStep
	}
	return timeoutStep
}

// timeoutReset gives the original's timeout result (with marker before the
// reset notice when the shell died on the way) and closes the shell
// without waiting for it.
func (r *run) timeoutReset(header, marker string) string {
	r.releaseHeld(nil)
	partial := ""
	if r.out != nil {
		r.resetting = true
		partial = r.renderOutput()
	}
	r.resetInBackground(reasonTimedOut)
	text := header + "\n" + partial + "\n"
	if marker != "" {
		text += marker + "\n"
	}
	return r.result(text + resetNotice)
}

// graceFailed ends a timeout whose handling failed: a cancellation or the
// owner closing is the caller's error as always; anything else (the grace
// ran out, a send failed) resets the shell.
func (r *run) graceFailed(header string, err error) (string, error) {
	switch {
	case !r.owner().Live():
		r.reset(reasonAborted)
		return "", errOwnerClosed
	case r.parent.Err() != nil:
		cause := context.Cause(r.parent)
		r.reset(reasonAborted)
		if errors.Is(cause, errUnloaded) {
			return "", cause
		}
		return "", fmt.Errorf("bash call cancelled: %w", cause)
	}
	if !errors.Is(err, errGraceOver) {
		r.p.logger.Warn("keeping a shell after a timeout failed", "owner", r.owner().ID(), "err", err)
	}
	return r.timeoutReset(header, ""), nil
}

// toBackground stops the foreground job with SIGTSTP and resumes it with
// bg, as a background job of the same shell. It returns the line for the
// result, or "" when the job did not stop (it ignores SIGTSTP, or the
// shell itself is in the foreground): the caller interrupts it instead.
// gone is set when the shell exited meanwhile.
func (r *run) toBackground() (line string, gone *termapi.Status, err error) {
	o, _, res, err := r.signalUntilPrompt([]termapi.Signal{termapi.SIGTSTP}, stepAfter)
	switch {
	case err != nil:
		return "", nil, err
	case o == shellGone:
		return "", &res.Status, nil
	case o != backAtPrompt:
		return "", nil, nil
	}
	// The line ran on past the stopped job when the shell completed it
	// with a status other than the stop's (128+SIGTSTP); the bash backend
	// ends the line at the job instead (ExecAbandoned).
	restRanOn := res.Exec != nil && res.Exec.State == termapi.ExecCompleted && res.Exec.ExitCode != stoppedStatus
	// The job's partial line belongs to the command's output; bg's own
	// report must not join it.
	pending := r.pending
	r.pending = ""
	text, err := r.quietExec(`\builtin bg`)
	if err != nil {
		r.held.write(pending)
		return "", nil, err
	}
	m := jobReport.FindStringSubmatchIndex(text)
	if m == nil {
		// Nothing to resume: the command ended before the stop reached it.
		r.releaseHeld(nil)
		r.out.write(pending)
		r.exit = -1
		r.out.trimTrailingNewlines()
		if text = strings.TrimSpace(text); text != "" {
			r.out.write("\n" + text)
		}
		return endedLine, nil, nil
	}
	job, _ := strconv.Atoi(text[m[2]:m[3]])
	line = fmt.Sprintf(backgroundedLine, job)
	if moved := strings.TrimSuffix(text[m[3]:m[1]], "\n"); !coversCommand(moved, r.command) {
		rest := restNotRun
		if restRanOn {
			rest = restRan
		}
		line = fmt.Sprintf(partMovedLine, job, jobCommand(moved), rest)
	}
	r.releaseHeld(func(lines []string) []string { return dropStopReport(lines, job) })
	r.out.write(pending)
	if !r.out.atLineStart() {
		r.out.write("\n")
	}
	// What else the terminal showed meanwhile is the job's output, resumed.
	r.out.write(text[:m[0]] + text[m[1]:])
	r.out.trimTrailingNewlines()
	r.exit = -1
	r.notices = dropJobNotice(r.notices, job)
	return line, nil, nil
}

// stoppedStatus is the status bash gives a job stopped by SIGTSTP.
const stoppedStatus = 128 + 20

// jobCommand is the command of a job as bg reports it ("]+ make &" after
// the job number): the text between the marks and the final &.
func jobCommand(report string) string {
	report = strings.TrimLeft(report, "]+- ")
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(report), "&"))
}

// coversCommand reports whether the job bg resumed (its report, as
// jobCommand takes it) is all that was left of command: the command is
// the job, or ends with it, so nothing came after it.
func coversCommand(report, command string) bool {
	job := strings.Join(strings.Fields(jobCommand(report)), " ")
	cmd := strings.Join(strings.Fields(strings.TrimRight(strings.TrimSpace(command), ";&")), " ")
	if job == "" || !strings.HasSuffix(cmd, job) {
		return false
	}
	at := len(cmd) - len(job)
	return at == 0 || strings.IndexByte(" ;&|({", cmd[at-1]) >= 0
}

// jobReport is bg's report of the job it resumed, "[1]+ sleep 100 &"; a
// command with newlines in its words spans lines.
var jobReport = regexp.MustCompile(`(?ms)^\[(\d+)\][+-]? .*? &$\n?`)

// signalReports are the lines bash prints when a foreground job dies of a
// signal (SIGINT gets an empty line).
var signalReports = map[termapi.Signal]string{
	termapi.SIGTERM: "Terminated",
	termapi.SIGKILL: "Killed",
}

// dropReport removes bash's report line from the end of lines (the last
// held lines of the output; an empty last element is a final newline).
func dropReport(lines []string, report string) []string {
	n := len(lines)
	if n > 0 && lines[n-1] == "" {
		n--
	}
	if report != "" && n > 0 && lines[n-1] == report {
		return append(lines[:n-1:n-1], lines[n:]...)
	}
	return lines
}

// dropStopReport removes bash's report that job stopped, "[1]+  Stopped
// make", and the empty line it prints before it.
func dropStopReport(lines []string, job int) []string {
	prefix := "[" + strconv.Itoa(job) + "]"
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.HasPrefix(lines[i], prefix) || !strings.Contains(lines[i], "Stopped") {
			continue
		}
		from := i
		if i > 0 && lines[i-1] == "" {
			from = i - 1
		}
		return append(lines[:from:from], lines[i+1:]...)
	}
	return lines
}

// heldTail passes output on to a sink but keeps its last few lines back,
// so that a report the shell prints at the end can be dropped from them.
// What it holds is small: only lines shorter than heldMax are kept back.
type heldTail struct {
	out *sink
	buf string
}

const (
	heldLines = 3
	heldMax   = 4 << 10
)

func (h *heldTail) write(text string) {
	h.buf += text
	// Keep back the last heldLines lines (a final newline ends the last).
	keep := len(h.buf)
	if keep > 0 && h.buf[keep-1] == '\n' {
		keep--
	}
	for range heldLines {
		keep = strings.LastIndexByte(h.buf[:max(keep, 0)], '\n')
		if keep < 0 {
			break
		}
	}
	keep++ // the start of the held lines; 0 when fewer lines are here
	if len(h.buf)-keep > heldMax {
		keep = len(h.buf) - heldMax
		for keep < len(h.buf) && !utf8.RuneStart(h.buf[keep]) {
			keep++
		}
	}
	if keep > 0 {
		h.out.write(h.buf[:keep])
		h.buf = h.buf[keep:]
	}
}

// releaseHeld hands the held lines to the sink, through edit when it is
// not nil, and stops holding. It does nothing once released.
func (r *run) releaseHeld(edit func(lines []string) []string) {
	h := r.held
	if h == nil {
		return
	}
	r.held = nil
	text := h.buf
	if edit != nil && text != "" {
		text = strings.Join(edit(strings.Split(text, "\n")), "\n")
	}
	h.out.write(text)
}

// dropJobNotice removes the "Stopped" notice of job from notices: the
// result says what became of it.
func dropJobNotice(notices string, job int) string {
	prefix := "[" + strconv.Itoa(job) + "]"
	var kept []string
	for line := range strings.SplitSeq(notices, "\n") {
		if line != "" && !strings.HasPrefix(line, prefix) {
			kept = append(kept, line)
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return strings.Join(kept, "\n") + "\n"
}

// quietExec runs a command of dsh's own in the owner's shell, which must be
// at its prompt, and returns what the terminal showed meanwhile, for the
// caller to sort out. Background output from before it goes to the
// command's output, which it follows.
func (r *run) quietExec(command string) (string, error) {
	send, err := r.terms().Exec(r.parent, r.owner(), r.st.shellID, termapi.ExecRequest{
		Command: command, Stream: true, Captured: true, Timeout: r.remaining(killStep),
	})
	if err != nil {
		return "", err
	}
	r.live = send
	var b strings.Builder
	for {
		text, err := send.Output(r.ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		b.WriteString(text)
	}
	res, err := send.Wait(r.ctx)
	if err != nil {
		return "", err
	}
	r.live = nil
	if x := res.Exec; x != nil {
		if x.Background != "" {
			r.out.write(x.Background)
		}
		r.notices += x.Notices
	}
	if exited(res) {
		return "", fmt.Errorf("%w (%s)", termapi.ErrSessionExited, res.Status)
	}
	b.WriteString(res.Viewport[strings.LastIndexByte(res.Viewport, '\n')+1:])
	return b.String(), nil
}

// How a signal escalation ended.
type outcome int

const (
	backAtPrompt outcome = iota // the shell is at its prompt again
	shellGone                   // the shell exited
	notBack                     // no signal brought the shell back
)

// signalUntilPrompt sends each of sigs in turn to the foreground group
// until the shell is back at its prompt, giving it step(sig) after each.
// It returns the signal that brought it back. A signal the backend refuses
// (SIGKILL while the shell itself is in the foreground) ends it as notBack.
// An error is a failed send or the end of the call's context.
func (r *run) signalUntilPrompt(sigs []termapi.Signal, step func(termapi.Signal) time.Duration) (outcome, termapi.Signal, termapi.SendResult, error) {
	for _, sig := range sigs {
		if _, err := r.terms().Signal(r.ctx, r.owner(), r.st.shellID, sig); err != nil {
			if r.ctx.Err() != nil {
				return notBack, sig, termapi.SendResult{}, context.Cause(r.ctx)
			}
			if errors.Is(err, termapi.ErrRefuseKillShell) {
				// The shell itself holds the foreground: busy in a trap
				// or a loop of builtins, or only slow to reach its prompt
				// on a loaded machine. No signal ends that but a reset,
				// which loses the owner's state: wait for it longer first.
				o, res, err := r.awaitPrompt(busyShellWait)
				return o, sig, res, err
			}
			return notBack, sig, termapi.SendResult{}, nil
		}
		send, err := r.startSend(step(sig))
		if err != nil {
			return notBack, sig, termapi.SendResult{}, err
		}
		res, err := r.drain(send)
		switch {
		case err != nil:
			return notBack, sig, res, err
		case exited(res):
			return shellGone, sig, res, nil
		case res.Prompt:
			return backAtPrompt, sig, res, nil
		}
	}
	return notBack, "", termapi.SendResult{}, nil
}
