//go:build linux

package dshcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chzyer/readline"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/private"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
)

// replTool is the tool every line of the REPL calls.
const replTool = "bash"

func replCommand(g *globals) *cobra.Command {
	var workdir, session string
	var keep time.Duration
	cmd := &cobra.Command{
		Use:   "repl",
		Short: "Type commands into the bash tool and see exactly what the model sees",
		Long: `repl gives you the shell a model gets: one owner, one persistent shell
started in --workdir. Each command you type is one call of the bash tool,
{"command": TEXT}. Its output is printed as it comes, and what the call
returns to the model after it, on stdout, so that stdout ends up with
exactly what the model received; then a bracketed line on stderr gives the
elapsed time and says whether the result was an error.

On a terminal, lines are edited as in a shell: the arrow keys move and
walk the history (kept in dsh's private directory), Ctrl-R searches it,
Ctrl-L clears the screen. A command that is not complete (an open loop or
if, an unterminated quote or here-document, a line ending in a backslash)
continues on the next line, after a "> " prompt, and is sent as one call.

Ctrl-C while a command runs interrupts it (SIGINT to it, as in a terminal;
the shell and its state stay); a second Ctrl-C cancels the call, as a
client cancels one for the model: the command is ended (SIGINT, then
SIGTERM, then SIGKILL), the shell kept (unless the tool's cancelAction is
reset), and the next result starts with a line saying so. At the prompt,
Ctrl-C twice or Ctrl-D (end of input) exits.`,
		Example: `  dsh repl
  dsh repl --workdir /tmp
  printf 'cd /tmp\npwd\n' | dsh repl`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			wd, err := resolveWorkdir(workdir)
			if err != nil {
				return err
			}
			// SIGTERM ends the REPL; SIGINT is the person's, see repl.run.
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM)
			defer stop()
			interrupts := make(chan os.Signal, 1)
			signal.Notify(interrupts, os.Interrupt)
			defer signal.Stop(interrupts)

			if err := checkSessionFlags(cmd, "", session, keep); err != nil {
				return err
			}
			h, err := g.loadHost(ctx, wd, keepingOptions(keepingScope(cmd, "", session), keep)...)
			if err != nil {
				return err
			}
			// closeHost closes the host with the whole shutdown budget,
			// counted from the moment it is called.
			closeHost := func() error {
				closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
				defer cancel()
				return h.Close(closeCtx)
			}
			if !slices.ContainsFunc(h.Tools().List(), func(t host.ToolInfo) bool { return t.Name == replTool }) {
				return errors.Join(usageError{fmt.Errorf("the deployment has no %q tool (see dsh tools)", replTool)}, closeHost())
			}
			ownerID := host.NewOwnerID("repl")
			if session != "" {
				ownerID = sessionOwnerID(session)
			}
			owner, err := h.NewOwner(ownerID, wd)
			if err != nil {
				return errors.Join(err, closeHost())
			}
			r := &repl{
				tools:       h.Tools(),
				owner:       owner,
				in:          g.stdin,
				out:         g.stdout,
				status:      g.stderr,
				interactive: isTerminal(g.stdin),
				dim:         isTerminal(g.stderr),
				interrupts:  interrupts,
			}
			for _, inst := range h.Instances() {
				if i, ok := inst.Value.(host.Interrupter); ok {
					r.interrupters = append(r.interrupters, i)
				}
			}
			if r.interactive && isTerminal(g.stderr) {
				src, err := newReadlineSource(g.stdin, g.stderr)
				if err != nil {
					return errors.Join(err, closeHost())
				}
				r.source = src
			}
			r.run(ctx)
			if session != "" {
				// The shell waits in its keeper for the next dsh of this
				// name.
				detachCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
				err := owner.Detach(detachCtx)
				cancel()
				return errors.Join(err, closeHost())
			}
			return closeHost()
		},
	}
	cmd.Flags().StringVarP(&workdir, "workdir", "w", "", "the shell's workspace (default: the current directory)")
	cmd.Flags().StringVar(&session, "session", "", "name the shell and keep it past dsh: a dsh repl or dsh serve started again with the same --session, by the same user, takes it back")
	cmd.Flags().DurationVar(&keep, "keep-shells", backendplugin.DefaultKeep, "with --session: how long a kept shell waits for a dsh to take it back before it is ended with what it started")
	return cmd
}

// repl reads commands and runs each as one call of the bash tool.
type repl struct {
	tools *host.Tools
	owner *host.Owner
	in    io.Reader
	// out gets the model-visible text and nothing else; status gets the
	// prompt, the elapsed times and hints.
	out, status io.Writer
	interactive bool // a person is typing: show a prompt
	dim         bool // status is a terminal: dim what is not the model's
	interrupts  <-chan os.Signal
	// interrupters interrupt the owner's running command (SIGINT to its
	// shell's foreground job).
	interrupters []host.Interrupter
	// source reads the lines; nil: the lines of in, one by one.
	source lineSource
}

// lineSource reads the lines a person types.
type lineSource interface {
	// next shows prompt and returns the next line, errPromptInterrupt for
	// a Ctrl-C at the prompt, or an error that ends the REPL (io.EOF).
	next(ctx context.Context, prompt string) (string, error)
	close()
}

// errPromptInterrupt is a Ctrl-C at the prompt.
var errPromptInterrupt = errors.New("interrupt at the prompt")

// The prompts: the first line of a command, and the lines that continue it.
const (
	promptFirst = "dsh$ "
	promptMore  = "> "
)

// run reads and runs commands until end of input, two Ctrl-C in a row at
// the prompt, or ctx is done.
func (r *repl) run(ctx context.Context) {
	if r.source == nil {
		r.source = newChanSource(r.in, r.status, r.interactive, r.interrupts)
	}
	defer r.source.close()
	armed := false // one Ctrl-C at the prompt; a second one exits
	for {
		command, err := r.readCommand(ctx)
		switch {
		case errors.Is(err, errPromptInterrupt):
			if armed {
				fmt.Fprintln(r.status)
				return
			}
			armed = true
			fmt.Fprintln(r.status, r.faint("\n[Ctrl-C again or Ctrl-D to exit]"))
			continue
		case err != nil && command == "":
			if r.interactive && ctx.Err() == nil {
				fmt.Fprintln(r.status)
			}
			return
		}
		armed = false
		if strings.TrimSpace(command) != "" {
			r.call(ctx, command)
		}
		if err != nil {
			return // the input ended inside a command, which was sent
		}
	}
}

// readCommand reads one command: a line, and the lines that continue it
// while bash would wait for more (see incomplete).
func (r *repl) readCommand(ctx context.Context) (string, error) {
	command, err := r.source.next(ctx, promptFirst)
	if err != nil {
		return "", err
	}
	for incomplete(command) {
		line, err := r.source.next(ctx, promptMore)
		if errors.Is(err, errPromptInterrupt) {
			return "", nil // Ctrl-C drops what was typed, as in bash
		}
		if err != nil {
			return command, err
		}
		command += "\n" + line
	}
	return command, nil
}

// incomplete reports whether bash would read more lines to complete
// command: bash's own parser says so (bash -n), for an open compound
// command, quote or here-document; or the last line ends in a backslash.
func incomplete(command string) bool {
	if strings.TrimSpace(command) == "" {
		return false
	}
	last := command[strings.LastIndexByte(command, '\n')+1:]
	if n := len(last) - len(strings.TrimRight(last, "\\")); n%2 == 1 {
		return true
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return false
	}
	check := exec.Command(bash, "--norc", "--noprofile", "-n")
	check.Stdin = strings.NewReader(command + "\n")
	check.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	out, _ := check.CombinedOutput()
	return bytes.Contains(out, []byte("unexpected end of file")) || bytes.Contains(out, []byte("delimited by end-of-file"))
}

// call runs one command. Its output is printed as the tool reads it; a
// first Ctrl-C meanwhile interrupts the command, a second one cancels the
// call.
func (r *repl) call(ctx context.Context, command string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	args, err := json.Marshal(map[string]string{"command": command})
	if err != nil {
		fmt.Fprintf(r.status, "dsh: %v\n", err)
		return
	}
	var mu sync.Mutex
	var streamed strings.Builder
	ctx = host.WithOutput(ctx, func(text string) {
		mu.Lock()
		defer mu.Unlock()
		streamed.WriteString(text)
		io.WriteString(r.out, text)
	})
	start := time.Now()
	done := make(chan host.Result, 1)
	go func() { done <- r.tools.Call(ctx, r.owner, replTool, args) }()
	var res host.Result
	interrupted := false
	for waiting := true; waiting; {
		select {
		case res = <-done:
			waiting = false
		case <-r.interrupts:
			if interrupted || len(r.interrupters) == 0 {
				cancel()
				continue
			}
			interrupted = true
			for _, i := range r.interrupters {
				if err := i.Interrupt(ctx, r.owner); err != nil {
					cancel() // it could not be interrupted: cancel it
				}
			}
			fmt.Fprintln(r.status, r.faint("\n[SIGINT sent to the command; Ctrl-C again cancels the call]"))
		}
	}
	elapsed := time.Since(start)
	mu.Lock()
	shown := strings.TrimSuffix(streamed.String(), "\n")
	streamed.Reset()
	mu.Unlock()
	// stdout ends up with exactly the result: what was shown, then the
	// rest (the lines streamed are whole, so the rest starts a line).
	text := res.Text
	switch {
	case shown == "":
	case strings.HasPrefix(text, shown):
		text = strings.TrimPrefix(text[len(shown):], "\n")
	default:
		fmt.Fprintln(r.status, r.faint("[what the model got:]"))
	}
	fmt.Fprint(r.out, text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		fmt.Fprintln(r.out)
	}
	note := formatElapsed(elapsed)
	if res.IsError {
		note += ", error"
	}
	fmt.Fprintln(r.status, r.faint("["+note+"]"))
}

func (r *repl) faint(s string) string {
	if !r.dim {
		return s
	}
	return "\x1b[2m" + s + "\x1b[0m"
}

// chanSource reads the lines of a reader that is not a terminal, or a
// terminal without line editing: a goroutine reads, and a Ctrl-C at the
// prompt arrives as a signal.
type chanSource struct {
	status      io.Writer
	interactive bool
	interrupts  <-chan os.Signal
	lines       chan string
	quit        chan struct{}
}

func newChanSource(in io.Reader, status io.Writer, interactive bool, interrupts <-chan os.Signal) *chanSource {
	s := &chanSource{status: status, interactive: interactive, interrupts: interrupts, lines: make(chan string), quit: make(chan struct{})}
	go readLines(in, s.lines, s.quit)
	return s
}

func (s *chanSource) next(ctx context.Context, prompt string) (string, error) {
	if s.interactive {
		fmt.Fprint(s.status, prompt)
	}
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-s.interrupts:
		return "", errPromptInterrupt
	case line, ok := <-s.lines:
		if !ok {
			return "", io.EOF
		}
		return line, nil
	}
}

func (s *chanSource) close() { close(s.quit) }

// readlineSource reads lines from a terminal with line editing and
// history (github.com/chzyer/readline).
type readlineSource struct {
	rl *readline.Instance
}

// newReadlineSource edits lines on the terminal in, drawing on status
// (stdout carries only what the model sees). History is kept in dsh's
// private directory, when there is one.
func newReadlineSource(in io.Reader, status io.Writer) (*readlineSource, error) {
	cfg := &readline.Config{
		Prompt:            promptFirst,
		InterruptPrompt:   "^C",
		EOFPrompt:         "",
		HistorySearchFold: true,
		HistoryLimit:      10000,
		Stdin:             io.NopCloser(in),
		Stdout:            status,
		Stderr:            status,
	}
	if dir, err := private.Dir(); err == nil {
		cfg.HistoryFile = filepath.Join(dir, "repl-history")
	}
	rl, err := readline.NewEx(cfg)
	if err != nil {
		return nil, fmt.Errorf("line editing: %w", err)
	}
	return &readlineSource{rl: rl}, nil
}

func (s *readlineSource) next(ctx context.Context, prompt string) (string, error) {
	stop := context.AfterFunc(ctx, func() { s.rl.Close() })
	defer stop()
	s.rl.SetPrompt(prompt)
	line, err := s.rl.Readline()
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.Is(err, readline.ErrInterrupt):
		return "", errPromptInterrupt
	case err != nil:
		return "", io.EOF
	}
	return line, nil
}

func (s *readlineSource) close() { s.rl.Close() }

// readLines sends each line of in, without its line ending, until end of
// input (then closes lines) or quit. A last line without a newline counts.
func readLines(in io.Reader, lines chan<- string, quit <-chan struct{}) {
	defer close(lines)
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
			select {
			case lines <- line:
			case <-quit:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func formatElapsed(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// isTerminal reports whether v is a terminal (not merely a character
// device: /dev/null is one too).
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
