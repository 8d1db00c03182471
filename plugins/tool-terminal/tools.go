package terminaltool

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// The tools' names.
const (
	OpenTool   = "terminal_open"
	SendTool   = "terminal_send"
	ReadTool   = "terminal_read"
	SignalTool = "terminal_signal"
	CloseTool  = "terminal_close"
	ListTool   = "terminal_list"
)

// OpenArgs are terminal_open's arguments. The fields have no doc comments
// on purpose: their names say it, and every request carries the schema.
type OpenArgs struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd,omitempty"`
	Rows    int    `json:"rows,omitempty"`
	Cols    int    `json:"cols,omitempty"`
}

// SendArgs are terminal_send's arguments.
type SendArgs struct {
	ID   string `json:"id"`
	Text string `json:"text,omitempty"`
	// Enter Tab Escape Backspace Up Down Left Right Home End PageUp PageDown F1-F12 C-a..C-z
	Keys []string `json:"keys,omitempty"`
	Rows int      `json:"rows,omitempty"`
	Cols int      `json:"cols,omitempty"`
}

// ReadArgs are terminal_read's arguments.
type ReadArgs struct {
	ID        string `json:"id"`
	WaitFor   string `json:"waitFor,omitempty"`
	TimeoutMs int    `json:"timeoutMs,omitempty"`
}

// SignalArgs are terminal_signal's arguments.
type SignalArgs struct {
	ID     string `json:"id"`
	Signal string `json:"signal" jsonschema:"enum=INT,enum=TERM,enum=KILL,enum=QUIT,enum=TSTP,enum=CONT,enum=HUP"`
}

// IDArgs are the arguments of the tools that take a terminal alone.
type IDArgs struct {
	ID string `json:"id"`
}

// ListArgs are terminal_list's arguments: none.
type ListArgs struct{}

// The tools' descriptions: short, since every request carries them.
const (
	openDescription   = "Run a program in a new terminal; returns its id and first read."
	sendDescription   = "Type text, then keys, into a terminal; rows and cols resize it."
	readDescription   = "Wait for an input prompt, exit, waitFor regexp or timeoutMs; return new output or the full screen."
	signalDescription = "Signal a terminal's program."
	closeDescription  = "End a terminal."
	listDescription   = "List your terminals."
)

func (p *plugin) tools() ([]host.Tool, error) {
	var tools []host.Tool
	add := func(t host.Tool, err error) error {
		if err != nil {
			return err
		}
		tools = append(tools, t)
		return nil
	}
	errs := []error{
		add(host.NewTool(OpenTool, openDescription, p.openTool)),
		add(host.NewTool(SendTool, sendDescription, p.sendTool)),
		add(host.NewTool(ReadTool, readDescription, p.readTool)),
		add(host.NewTool(SignalTool, signalDescription, p.signalTool)),
		add(host.NewTool(CloseTool, closeDescription, p.closeTool)),
		add(host.NewTool(ListTool, listDescription, p.listTool)),
	}
	return tools, errors.Join(errs...)
}

// size is the terminal size rows×cols asks for: the configured size when
// both are zero.
func (p *plugin) size(rows, cols int) (termapi.Size, error) {
	if rows == 0 && cols == 0 {
		return termapi.Size{Rows: p.cfg.Rows, Cols: p.cfg.Cols}, nil
	}
	if rows == 0 {
		rows = p.cfg.Rows
	}
	if cols == 0 {
		cols = p.cfg.Cols
	}
	size := termapi.Size{Rows: rows, Cols: cols}
	return size, size.Validate()
}

func (p *plugin) openTool(ctx context.Context, owner *host.Owner, args OpenArgs) (string, error) {
	if strings.TrimSpace(args.Command) == "" {
		return "", errors.New("command must be a non-empty string")
	}
	if strings.IndexByte(args.Command, 0) >= 0 {
		return "", errors.New("command contains a NUL byte")
	}
	if res, ok := host.ResumptionFrom(ctx); ok {
		// The client's retry of an open whose program asked for a secret:
		// go on with that terminal, with the answer.
		if t, err := p.find(owner, strings.TrimPrefix(res.State, "terminal:")); err == nil && res.State == resumeState(t.id) {
			out, err := t.read(ctx, readOpts{timeout: time.Duration(p.cfg.ReadTimeoutMs) * time.Millisecond, answer: &res.Answer})
			if err != nil {
				return "", err
			}
			return "id: " + t.id + "\n" + out, nil
		}
	}
	size, err := p.size(args.Rows, args.Cols)
	if err != nil {
		return "", err
	}
	cwd := args.Cwd
	if cwd != "" && !filepath.IsAbs(cwd) {
		cwd = filepath.Join(owner.Workdir(), cwd)
	}
	p.mu.Lock()
	ot, err := p.ownerLocked(owner)
	p.mu.Unlock()
	if err != nil {
		return "", err
	}
	if err := p.reserve(ot); err != nil {
		return "", err
	}
	info, err := p.terms.Spawn(ctx, owner, terminal.SpawnRequest{Type: p.cfg.BackendType, Cwd: cwd, Size: size})
	if err != nil {
		p.unreserve()
		return "", err
	}
	t := newTerm(p, owner, info.ID, args.Command, size, false)
	t.counted = true
	t.jobText = p.jobText(args.Command)
	t.startPump(0)
	t.mu.Lock()
	err = t.startExecLocked(p.wrap(args.Command), time.Duration(p.cfg.ReadTimeoutMs)*time.Millisecond)
	t.mu.Unlock()
	p.add(ot, t)
	if err != nil {
		_ = t.close(context.WithoutCancel(ctx))
		p.remove(t)
		return "", err
	}
	out, err := t.read(ctx, readOpts{timeout: time.Duration(p.cfg.ReadTimeoutMs) * time.Millisecond})
	if err != nil {
		return "", err
	}
	return "id: " + t.id + "\n" + out, nil
}

// jobText is how bash names a wrapped command in its job notices ("[1]+
// Stopped ..."): the subshell, with spaces inside its parentheses.
func (p *plugin) jobText(command string) string {
	return "( " + p.inner(command) + " )"
}

// inner is the subshell's body of wrap.
func (p *plugin) inner(command string) string {
	return "unset PROMPT_COMMAND PS0 PS1 PS2 PAGER GIT_PAGER; export TERM=" + p.cfg.Term + "; eval " + shellQuote(command)
}

// wrap is the shell text that runs command as a terminal's program: with a
// terminal as a person's is set (echo on, TERM for full-screen programs),
// none of the shell's own prompts and plumbing in its environment, and in
// a subshell, so that the shell it runs in stays out of its way.
func (p *plugin) wrap(command string) string {
	return "stty sane 2>/dev/null; (" + p.inner(command) + ")"
}

// shellQuote quotes s for bash as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (p *plugin) sendTool(ctx context.Context, owner *host.Owner, args SendArgs) (string, error) {
	t, err := p.find(owner, args.ID)
	if err != nil {
		return "", err
	}
	if args.Text == "" && len(args.Keys) == 0 && args.Rows == 0 && args.Cols == 0 {
		return "", errors.New("give text, keys, or rows and cols")
	}
	var done []string
	if args.Rows != 0 || args.Cols != 0 {
		size, err := p.size(args.Rows, args.Cols)
		if err != nil {
			return "", err
		}
		if err := p.terms.Resize(ctx, owner, t.id, size); err != nil {
			return "", err
		}
		t.mu.Lock()
		t.scr.Resize(size)
		t.mu.Unlock()
		done = append(done, fmt.Sprintf("resized to %dx%d", size.Cols, size.Rows))
	}
	if args.Text != "" || len(args.Keys) > 0 {
		t.mu.Lock()
		appCursor := t.scr.CursorKeys()
		t.mu.Unlock()
		keys, err := encodeKeys(args.Keys, appCursor)
		if err != nil {
			return "", err
		}
		if err := t.typeText(ctx, args.Text+keys); err != nil {
			return "", err
		}
		done = append(done, "sent")
	}
	return "[" + strings.Join(done, "; ") + "; terminal_read shows what follows]", nil
}

func (p *plugin) readTool(ctx context.Context, owner *host.Owner, args ReadArgs) (string, error) {
	t, err := p.find(owner, args.ID)
	if err != nil {
		return "", err
	}
	o := readOpts{timeout: time.Duration(p.cfg.ReadTimeoutMs) * time.Millisecond}
	if args.TimeoutMs < 0 || args.TimeoutMs > p.cfg.MaxReadTimeoutMs {
		return "", fmt.Errorf("timeoutMs must be between 0 and %d", p.cfg.MaxReadTimeoutMs)
	}
	if args.TimeoutMs > 0 {
		o.timeout = time.Duration(args.TimeoutMs) * time.Millisecond
	}
	if args.WaitFor != "" {
		if o.waitFor, err = regexp.Compile(args.WaitFor); err != nil {
			return "", fmt.Errorf("waitFor: %w", err)
		}
	}
	if res, ok := host.ResumptionFrom(ctx); ok && res.State == resumeState(t.id) {
		o.answer = &res.Answer
	}
	return t.read(ctx, o)
}

// signals are the names terminal_signal takes.
var signals = map[string]termapi.Signal{
	"INT": termapi.SIGINT, "TERM": termapi.SIGTERM, "KILL": termapi.SIGKILL,
	"QUIT": termapi.SIGQUIT, "TSTP": termapi.SIGTSTP, "CONT": termapi.SIGCONT,
	"HUP": termapi.SIGHUP,
}

func (p *plugin) signalTool(ctx context.Context, owner *host.Owner, args SignalArgs) (string, error) {
	t, err := p.find(owner, args.ID)
	if err != nil {
		return "", err
	}
	sig, ok := signals[strings.TrimPrefix(strings.ToUpper(args.Signal), "SIG")]
	if !ok {
		return "", fmt.Errorf("signal must be one of INT, TERM, KILL, QUIT, TSTP, CONT, HUP; got %q", args.Signal)
	}
	return t.signal(ctx, sig)
}

func (p *plugin) closeTool(ctx context.Context, owner *host.Owner, args IDArgs) (string, error) {
	t, err := p.find(owner, args.ID)
	if err != nil {
		return "", err
	}
	p.remove(t)
	if err := t.close(ctx); err != nil {
		return "", err
	}
	return "[closed " + t.id + "]", nil
}

func (p *plugin) listTool(ctx context.Context, owner *host.Owner, _ ListArgs) (string, error) {
	terms := p.list(owner)
	if len(terms) == 0 {
		return "[no terminals]", nil
	}
	var b strings.Builder
	for _, t := range terms {
		t.refresh(ctx)
		t.mu.Lock()
		state, idle := t.stateLocked(), time.Since(t.lastSeen).Round(time.Second)
		t.mu.Unlock()
		fmt.Fprintf(&b, "%s  %s, idle %s  %s\n", t.id, state, idle, t.command)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}
