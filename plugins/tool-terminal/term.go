package terminaltool

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/emulator"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// term is one interactive terminal: a session of the terminals service
// running one command, the screen its output draws, and what its sends
// proved. See the package doc for the model.
type term struct {
	p       *plugin
	owner   *host.Owner
	id      string
	command string
	// adopted: handed over by another tool (the bash tool's shell), whose
	// session it stays; released when the command ends.
	adopted  bool
	released chan struct{} // closed when an adopted terminal lets go

	// ctx is the terminal's life: the pump and the sends run under it;
	// it ends when the terminal is closed or released.
	ctx     context.Context
	cancel  context.CancelFunc
	workers sync.WaitGroup // the pump and the send watchers

	mu      sync.Mutex
	scr     *emulator.Screen
	pos     int64         // raw output fed to scr up to here
	rawEnd  int64         // where the raw output of the last settle ends
	pumped  bool          // the pump has ended: pos moves no more
	lost    bool          // raw output was lost before it was fed
	changed chan struct{} // closed and replaced at every event
	// live is the send in flight, nil when none; readStarted marks one a
	// read started (an empty wait), typed marks one that carried input.
	live termapi.Send
	// waiting: the last send settled on a proven wait for input and nothing
	// was typed since; input is how that wait takes input.
	waiting bool
	input   termapi.InputMode
	silent  bool // the last send settled on silence, without proof
	res     termapi.SendResult
	// asked: the secret prompt of this wait was dealt with (asked, or said
	// to be unanswerable), so it is not asked again.
	asked bool
	// ended says how the command ended ("" while it runs); stopped that a
	// SIGTSTP stopped it and the shell is back at its prompt.
	ended   string
	stopped bool
	// let go: the session is not the terminal's any more (its command
	// ended, or it was closed); gone: the terminal itself was closed.
	letGo    bool
	gone     bool
	scrOnce  sync.Once
	sendErr  error
	lastSeen time.Time // the last output or input
	notes    []string  // for the next read
	// jobText is how the shell names the command in its job notices.
	jobText string
	// escAt is when a send ending in a lone Escape was typed.
	escAt time.Time
	// shown: a read has shown the screen, so an unchanged one need not be
	// shown again.
	shown bool
	// drawing: the program draws on the main screen by cursor address.
	drawing bool
	// counted: the terminal counts against the limits (guarded by
	// plugin.mu).
	counted bool
}

// errClosed: the terminal was closed while a call used it.
var errClosed = errors.New("the terminal was closed")

func newTerm(p *plugin, owner *host.Owner, id, command string, size termapi.Size, adopted bool) *term {
	ctx, cancel := context.WithCancel(p.lifetime)
	return &term{
		p: p, owner: owner, id: id, command: command, adopted: adopted,
		released: make(chan struct{}),
		ctx:      ctx, cancel: cancel,
		scr:      emulator.New(size, maxPendingBytes),
		changed:  make(chan struct{}),
		lastSeen: time.Now(),
	}
}

// maxPendingBytes bounds the main-screen output kept between two reads.
const maxPendingBytes = 256 << 10

// broadcastLocked wakes everything waiting for an event.
func (t *term) broadcastLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// startPump feeds the session's raw output to the screen from position
// from on, until the output ends or the terminal is closed.
func (t *term) startPump(from int64) {
	t.pos = from
	t.workers.Go(func() {
		for {
			t.mu.Lock()
			pos := t.pos
			t.mu.Unlock()
			c, err := t.p.terms.Output(t.ctx, t.owner, t.id, pos)
			t.mu.Lock()
			t.feedLocked(c)
			if err != nil {
				t.pumped = true
				t.broadcastLocked()
			}
			t.mu.Unlock()
			if err != nil {
				return
			}
		}
	})
}

// feedLocked hands a chunk to the screen, skipping what was fed already.
func (t *term) feedLocked(c termapi.Chunk) {
	if c.End() <= t.pos {
		return
	}
	data := c.Data
	if c.Pos < t.pos {
		data = data[t.pos-c.Pos:]
	} else if c.Pos > t.pos {
		t.lost = true
	}
	t.scr.Write(data)
	t.pos = c.End()
	t.lastSeen = time.Now()
	t.broadcastLocked()
}

// startSendLocked starts a send (text typed, or an empty wait) and the
// goroutine that takes its result. The caller checked that none is live.
func (t *term) startSendLocked(text string, timeout time.Duration) error {
	send, err := t.p.terms.StartSend(t.ctx, t.owner, t.id, termapi.SendRequest{Text: text, Timeout: timeout})
	if err != nil {
		return err
	}
	t.live = send
	if text != "" {
		t.waiting, t.silent, t.asked = false, false, false
		t.lastSeen = time.Now()
	}
	t.watch(send)
	return nil
}

// startExecLocked runs command in the terminal's shell as its program.
func (t *term) startExecLocked(command string, timeout time.Duration) error {
	send, err := t.p.terms.Exec(t.ctx, t.owner, t.id, termapi.ExecRequest{Command: command, Timeout: timeout})
	if err != nil {
		return err
	}
	t.live = send
	t.waiting, t.silent, t.asked = false, false, false
	t.watch(send)
	return nil
}

// watch takes send's result when it settles.
func (t *term) watch(send termapi.Send) {
	t.workers.Go(func() {
		res, err := send.Wait(t.ctx)
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.live == send {
			t.live = nil
		}
		switch {
		case err == nil:
			t.settledLocked(res)
		case t.ctx.Err() == nil:
			t.sendErr = err
		}
		t.broadcastLocked()
	})
}

// settledLocked takes what a settled send proved.
func (t *term) settledLocked(res termapi.SendResult) {
	t.res = res
	t.rawEnd = max(t.rawEnd, res.RawEnd)
	t.silent = res.Reason == termapi.WaitInferredIdle
	t.waiting = res.Reason == termapi.WaitStdinRead && !res.Prompt
	if t.waiting {
		t.input = res.Input
	}
	switch x := res.Exec; {
	case res.Reason == termapi.WaitSessionExit || res.Status.Exited:
		t.ended = "the terminal's shell " + res.Status.String()
	case x != nil && res.Prompt && x.State == termapi.ExecCompleted && x.ExitCode >= 128+19 && x.ExitCode <= 128+22:
		// Job control stopped the command (SIGSTOP, SIGTSTP, or ^Z typed,
		// SIGTTIN, SIGTTOU): the shell is back at its prompt with it as a
		// stopped job, and reports the stop's status.
		t.stopped = true
	case x != nil && x.State == termapi.ExecCompleted:
		t.ended = fmt.Sprintf("exited with code %d", x.ExitCode)
	case x != nil && res.Prompt && x.State == termapi.ExecAbandoned:
		t.ended = "ended (interrupted)"
		if x.ExitCode > 128 {
			t.ended = fmt.Sprintf("ended (interrupted, status %d)", x.ExitCode)
		}
	}
	if t.ended != "" {
		t.stopped = false
	}
}

// awaitIdleLocked waits until no send is live, so a new one may start.
// It returns with the lock held.
func (t *term) awaitIdleLocked(ctx context.Context) error {
	for t.live != nil {
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			t.mu.Lock()
			return context.Cause(ctx)
		case <-t.ctx.Done():
			t.mu.Lock()
			return errClosed
		}
		t.mu.Lock()
	}
	if t.gone || t.letGo {
		return errClosed
	}
	return nil
}

// typeText types text into the terminal, after the send in flight settles.
func (t *term) typeText(ctx context.Context, text string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.awaitIdleLocked(ctx); err != nil {
		return err
	}
	if t.ended != "" {
		return fmt.Errorf("terminal %s: its command has %s; nothing reads what you type", t.id, t.ended)
	}
	if err := t.startSendLocked(text, typeBound); err != nil {
		return err
	}
	if strings.HasSuffix(text, "\x1b") {
		t.escAt = time.Now()
	}
	return nil
}

// escSettle is how long after a lone Escape a proven wait is taken again:
// a program that reads Escape waits its escape timeout to tell the key
// from the start of a longer key sequence (vim's ttimeoutlen is 100 ms
// with its defaults, ncurses programs set 25 ms or use 1 s), and until
// then has not acted on it.
const escSettle = 200 * time.Millisecond

// typeBound bounds a send that types: a read that follows waits on it,
// then on sends of its own, so it needs no longer life; and a program
// that neither proves a wait nor falls silent must not hold the next
// input back for long.
const typeBound = time.Second

// readOpts are a read's conditions.
type readOpts struct {
	waitFor *regexp.Regexp
	timeout time.Duration
	// answer is the person's answer the call carries (a client's retry
	// after the question went with a result), until it is used.
	answer *host.Answer
}

// read waits until something worth reading happened (see the package doc)
// and renders the terminal.
func (t *term) read(ctx context.Context, o readOpts) (string, error) {
	deadline := time.Now().Add(o.timeout)
	timer := time.NewTimer(o.timeout)
	defer timer.Stop()
	t.mu.Lock()
	var why string
	for {
		if t.gone {
			t.mu.Unlock()
			return "", errClosed
		}
		if err := t.sendErr; err != nil {
			t.sendErr = nil
			t.mu.Unlock()
			return "", err
		}
		if t.pos < t.rawEnd && !t.pumped {
			// What the terminal wrote before the last settle is not on
			// the screen yet: the pump is about to feed it.
			if !t.waitLocked(ctx, timer.C) {
				if ctx.Err() != nil {
					t.mu.Unlock()
					return "", context.Cause(ctx)
				}
				why = "running"
				break
			}
			continue
		}
		if t.ended != "" {
			why = t.ended
			break
		}
		if o.waitFor != nil && t.matchLocked(o.waitFor) {
			why = "output matched waitFor"
			break
		}
		if t.stopped && t.live == nil {
			why = "stopped (SIGTSTP); terminal_signal CONT resumes it"
			break
		}
		if (t.waiting || t.silent) && t.live == nil {
			if replies := t.scr.Replies(); len(replies) > 0 {
				// The program asked its terminal something (vim asks
				// for the cursor position) and waits for the answer.
				if err := t.startSendLocked(string(replies), typeBound); err != nil {
					t.mu.Unlock()
					return "", err
				}
				continue
			}
		}
		if t.waiting && t.live == nil {
			if wait := escSettle - time.Since(t.escAt); wait > 0 {
				// A lone Escape: the program waits for its escape timeout
				// before it acts on the key, and proves a wait meanwhile.
				// Prove it again once that is over.
				t.mu.Unlock()
				esc := time.NewTimer(wait)
				select {
				case <-esc.C:
				case <-ctx.Done():
					esc.Stop()
					return "", context.Cause(ctx)
				}
				t.mu.Lock()
				t.escAt, t.waiting = time.Time{}, false
				continue
			}
			if !t.asked && terminal.AsksForSecret(t.res, t.promptLocked()) {
				note, cont, err := t.askSecretLocked(ctx, &o)
				if err != nil {
					t.mu.Unlock()
					return "", err
				}
				t.notes = append(t.notes, note)
				if !cont {
					why = "waiting for a secret"
					break
				}
				continue
			}
			if o.waitFor == nil {
				why = "waiting for input"
				break
			}
		}
		if t.silent && t.live == nil && o.waitFor == nil {
			why = "quiet; running, with no proof it waits for input"
			break
		}
		if t.live == nil {
			left := time.Until(deadline)
			if left <= 0 {
				why = "running"
				break
			}
			if err := t.startSendLocked("", left); err != nil {
				t.mu.Unlock()
				return "", err
			}
			t.silent = false
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
			t.mu.Lock()
			continue
		case <-timer.C:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
		t.mu.Lock()
		why = "running"
		break
	}
	ended := t.ended != ""
	out := t.renderLocked(why)
	t.mu.Unlock()
	if ended {
		t.finish()
	}
	return out, nil
}

// waitLocked waits, with the lock released, for the next event, the
// timer or ctx; it reports whether an event came.
func (t *term) waitLocked(ctx context.Context, timer <-chan time.Time) bool {
	ch := t.changed
	t.mu.Unlock()
	defer t.mu.Lock()
	select {
	case <-ch:
		return true
	case <-timer:
	case <-ctx.Done():
	}
	return false
}

// matchLocked reports whether the screen or the output not read yet
// matches re.
func (t *term) matchLocked(re *regexp.Regexp) bool {
	if t.scr.AltScreen() {
		return re.MatchString(t.scr.Text())
	}
	return re.MatchString(t.scr.PeekLines())
}

// promptLocked is the line the program waits on: the line being written
// on the main screen, the cursor's row on the alternate screen.
func (t *term) promptLocked() string {
	if t.scr.AltScreen() {
		snap := t.scr.Text()
		rows := strings.Split(snap, "\n")
		if len(rows) > 0 {
			return rows[len(rows)-1]
		}
		return ""
	}
	_, partial, _ := splitPeek(t.scr.PeekLines())
	return partial
}

func splitPeek(s string) (lines, partial string, ok bool) {
	i := strings.LastIndexByte(s, '\n')
	return s[:i+1], s[i+1:], i >= 0
}

// askSecretLocked handles a program asking for a secret: the person at
// the client answers through elicitation, and the answer is typed into
// the terminal, never shown; a refusal interrupts the program. It returns
// the note for the read, and whether the read goes on waiting; or, when
// the question must go with the call's result, the host.InputRequired to
// return (the program goes on waiting, and the client's retry of the call
// brings the answer).
func (t *term) askSecretLocked(ctx context.Context, o *readOpts) (note string, cont bool, err error) {
	prompt := strings.TrimSpace(t.promptLocked())
	var ans host.Answer
	if o.answer != nil {
		ans, o.answer = *o.answer, nil
	} else {
		asker := host.AskerFrom(ctx)
		if asker == nil {
			t.asked = true
			return fmt.Sprintf(noElicitationNote, prompt), false, nil
		}
		message := fmt.Sprintf(askMessage, t.command, prompt)
		t.mu.Unlock()
		var aerr error
		ans, aerr = asker.AskSecret(ctx, message)
		t.mu.Lock()
		var later *host.InputRequired
		switch {
		case errors.As(aerr, &later):
			return "", false, &host.InputRequired{Message: message, State: resumeState(t.id)}
		case aerr != nil:
			t.asked = true
			return fmt.Sprintf("[Asking the user for the secret (%q) failed: %v. The program still waits for it.]", prompt, aerr), false, nil
		}
	}
	t.asked = true
	if ans.Action == host.AnswerAccept {
		if err := t.awaitIdleLocked(ctx); err != nil {
			return fmt.Sprintf("[The user gave the secret (%q), but it could not be typed: %v.]", prompt, err), false, nil
		}
		if err := t.startSendLocked(ans.Secret+"\r", typeBound); err != nil {
			return fmt.Sprintf("[The user gave the secret (%q), but it could not be typed: %v.]", prompt, err), false, nil
		}
		return fmt.Sprintf(givenNote, prompt), true, nil
	}
	verb := "declined to give"
	if ans.Action == host.AnswerCancel {
		verb = "dismissed the request for"
	}
	t.mu.Unlock()
	_, serr := t.p.terms.Signal(ctx, t.owner, t.id, termapi.SIGINT)
	t.mu.Lock()
	t.waiting = false
	if serr != nil {
		return fmt.Sprintf("[The user %s the secret (%q); interrupting the program failed: %v.]", verb, prompt, serr), false, nil
	}
	return fmt.Sprintf("[The user %s the secret (%q), so the program was interrupted (SIGINT).]", verb, prompt), true, nil
}

// resumeState is the requestState of a question about terminal id: the
// client's retry of the call carries it back.
func resumeState(id string) string { return "terminal:" + id }

// Model-visible texts of the secret flow.
const (
	askMessage        = "dsh: the program %q asks for a secret: %q. Your answer goes to the program only; the AI model never sees it."
	givenNote         = "[The program asked for a secret (%q); the user gave it through the client, and it is not shown here.]"
	noElicitationNote = "[The program asks for a secret (%q). dsh keeps secrets away from the model, and this client cannot ask the user for one (MCP elicitation). The user can answer it from a client that supports elicitation, or make it unnecessary: an ssh agent or a key without a passphrase, a sudo rule (NOPASSWD) for the command, a credential helper or a token in the environment.]"
)

// finish lets go of a terminal whose command ended: an adopted one goes
// back to its tool; an opened one's session is closed (its final screen
// stays readable).
func (t *term) finish() {
	t.mu.Lock()
	if t.letGo {
		t.mu.Unlock()
		return
	}
	t.letGo = true
	t.mu.Unlock()
	t.cancel()
	t.workers.Wait()
	if t.adopted {
		close(t.released)
	} else {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.p.lifetime), killBound)
		defer cancel()
		if _, err := t.p.terms.Kill(ctx, t.owner, t.id, "terminal command ended"); err != nil && !errors.Is(err, termapi.ErrNoSession) {
			t.p.logger.Warn("closing an ended terminal failed", "terminal", t.id, "err", err)
		}
	}
	t.p.forgetOpen(t)
}

// killBound bounds closing a terminal's session.
const killBound = 30 * time.Second

// renderLocked renders the terminal for a read: the notes, then the screen
// of a full-screen program or the new lines, then the state.
func (t *term) renderLocked(why string) string {
	var b strings.Builder
	for _, n := range t.notes {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	t.notes = nil
	if t.lost {
		b.WriteString("[Some output was lost: the terminal wrote faster than it was read.]\n")
		t.lost = false
	}
	drawn := t.scr.Drawn()
	lines, partial, dropped := t.scr.Lines()
	// A program that draws on the main screen by cursor address (top) is
	// shown as a screen until it writes plain lines again.
	switch {
	case drawn:
		t.drawing = true
	case lines != "":
		t.drawing = false
	}
	if t.scr.AltScreen() || t.drawing {
		snap := t.scr.Snapshot()
		cursor := fmt.Sprintf("cursor %d,%d", snap.Row, snap.Col)
		if snap.CursorHidden {
			cursor = "cursor hidden"
		}
		if len(snap.Changed) == 0 && t.shown {
			fmt.Fprintf(&b, "[screen %dx%d, %s, unchanged since the last read; %s]", snap.Size.Cols, snap.Size.Rows, cursor, why)
			return b.String()
		}
		t.shown = true
		fmt.Fprintf(&b, "[screen %dx%d, %s, changed %s; %s]\n", snap.Size.Cols, snap.Size.Rows, cursor, spans(snap.Changed), why)
		for i, row := range snap.Rows {
			if row == "" {
				continue
			}
			fmt.Fprintf(&b, "%2d|%s\n", i+1, row)
		}
		return strings.TrimRight(b.String(), "\n")
	}
	text := lines + partial
	if t.jobText != "" {
		// A job notice names the command as the shell ran it: show the
		// model's command instead of dsh's wrapper.
		text = strings.ReplaceAll(text, t.jobText, t.command)
	}
	max := t.p.cfg.MaxOutputChars
	if n := len([]rune(text)); n > max {
		r := []rune(text)
		text = string(r[n-max:])
		if i := strings.IndexByte(text, '\n'); i >= 0 && i < 200 {
			text = text[i+1:]
		}
		dropped = true
	}
	if dropped {
		b.WriteString("[... earlier output dropped; this is the newest]\n")
	}
	b.WriteString(text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[%s]", why)
	return b.String()
}

// spans writes row numbers as ranges: 1-3,7.
func spans(rows []int) string {
	if len(rows) == 0 {
		return "none"
	}
	var b strings.Builder
	for i := 0; i < len(rows); {
		j := i
		for j+1 < len(rows) && rows[j+1] == rows[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if i == j {
			fmt.Fprintf(&b, "%d", rows[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", rows[i], rows[j])
		}
		i = j + 1
	}
	return b.String()
}

// state is the terminal's state for terminal_list.
func (t *term) stateLocked() string {
	switch {
	case t.ended != "":
		return t.ended
	case t.stopped:
		return "stopped"
	case t.waiting && t.live == nil:
		return "running, waiting for input"
	}
	return "running"
}

// close ends the terminal: an opened one's session is closed, with its
// program; an adopted one's program is ended and its shell given back.
func (t *term) close(ctx context.Context) error {
	t.mu.Lock()
	letGo := t.letGo
	t.letGo, t.gone = true, true
	t.broadcastLocked()
	t.mu.Unlock()
	defer t.scrOnce.Do(t.scr.Close)
	if letGo {
		return nil
	}
	var err error
	if t.adopted {
		err = t.endAdopted(ctx)
	}
	t.cancel()
	t.workers.Wait()
	if t.adopted {
		close(t.released)
		t.p.forgetOpen(t)
		return err
	}
	defer t.p.forgetOpen(t)
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killBound)
	defer cancel()
	if _, kerr := t.p.terms.Kill(kctx, t.owner, t.id, "terminal closed"); kerr != nil && !errors.Is(kerr, termapi.ErrNoSession) {
		return kerr
	}
	return nil
}

// endAdopted ends the program of an adopted terminal (SIGINT, SIGTERM,
// then SIGKILL to its group, until the shell is back at its prompt), so
// the shell it ran in goes back to its tool with its state; a shell that
// does not come back is closed.
func (t *term) endAdopted(ctx context.Context) error {
	for _, sig := range []termapi.Signal{termapi.SIGINT, termapi.SIGTERM, termapi.SIGKILL} {
		t.mu.Lock()
		ended := t.ended != ""
		t.mu.Unlock()
		if ended {
			return nil
		}
		if _, err := t.p.terms.Signal(ctx, t.owner, t.id, sig); err != nil && !errors.Is(err, termapi.ErrRefuseKillShell) {
			break
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		t.awaitEnd(wctx)
		cancel()
	}
	t.mu.Lock()
	ended := t.ended != ""
	t.mu.Unlock()
	if ended {
		return nil
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killBound)
	defer cancel()
	_, err := t.p.terms.Kill(kctx, t.owner, t.id, "handed-over program did not end")
	if errors.Is(err, termapi.ErrNoSession) {
		err = nil
	}
	return err
}

// awaitEnd waits, with empty sends, until the command has ended or ctx
// ends.
func (t *term) awaitEnd(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.ended == "" && ctx.Err() == nil {
		if t.live == nil {
			left := time.Until(deadlineOf(ctx))
			if left <= 0 || t.startSendLocked("", left) != nil {
				return
			}
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		t.mu.Lock()
	}
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Hour)
}

// signal delivers sig to the terminal's program. CONT resumes a command
// that job control stopped in the foreground again (the shell's fg): a
// signal alone would leave it in the background.
func (t *term) signal(ctx context.Context, sig termapi.Signal) (string, error) {
	t.mu.Lock()
	if t.letGo {
		ended := t.ended
		t.mu.Unlock()
		return "", fmt.Errorf("terminal %s: its command has %s", t.id, ended)
	}
	if sig == termapi.SIGCONT && t.stopped {
		defer t.mu.Unlock()
		if err := t.awaitIdleLocked(ctx); err != nil {
			return "", err
		}
		if err := t.startExecLocked("fg >/dev/null", typeBound); err != nil {
			return "", err
		}
		t.stopped = false
		return "[continued in the foreground; terminal_read shows what follows]", nil
	}
	t.waiting, t.silent, t.asked = false, false, false
	t.mu.Unlock()
	res, err := t.p.terms.Signal(ctx, t.owner, t.id, sig)
	if err != nil {
		return "", err
	}
	if res.TargetPGID > 0 {
		return fmt.Sprintf("[%s sent to process group %d; terminal_read shows what follows]", sig, res.TargetPGID), nil
	}
	return fmt.Sprintf("[%s sent; terminal_read shows what follows]", sig), nil
}

// refresh learns, in a moment, whether a terminal nobody has read lately
// still runs: an empty send answers at once for a command that ended and
// within milliseconds for one that waits for input. A command that ended
// lets its session go, once the screen has everything before the end.
func (t *term) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, refreshBound)
	defer cancel()
	t.mu.Lock()
	for !t.letGo && ctx.Err() == nil {
		if t.ended != "" {
			if t.pos >= t.rawEnd || t.pumped {
				break
			}
		} else if t.live == nil {
			if t.waiting || t.stopped {
				break
			}
			if err := t.startSendLocked("", refreshBound/2); err != nil {
				break
			}
		}
		if !t.waitLocked(ctx, nil) {
			break
		}
	}
	ended := t.ended != "" && !t.letGo
	t.mu.Unlock()
	if ended {
		t.finish()
	}
}

// refreshBound bounds refresh.
const refreshBound = 200 * time.Millisecond
