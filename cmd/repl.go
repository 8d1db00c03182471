//go:build linux

package dshcmd

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/host"
)

// replTool is the tool every line of the REPL calls.
const replTool = "bash"

func replCommand(g *globals) *cobra.Command {
	var workdir string
	cmd := &cobra.Command{
		Use:   "repl",
		Short: "Type commands into the bash tool and see exactly what the model sees",
		Long: `repl gives you the shell a model gets: one owner, one persistent shell
started in --workdir. Each line you type is one call of the bash tool,
{"command": LINE}. The result text is printed to stdout exactly as the model
receives it; then a bracketed line on stderr gives the elapsed time and says
whether the result was an error.

Ctrl-C cancels the running command (and resets the shell, as it would for
the model). At the prompt, Ctrl-C twice or Ctrl-D (end of input) exits.`,
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

			h, err := g.loadHost(ctx, wd)
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
			owner, err := h.NewOwner("repl-"+rand.Text()[:8], wd)
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
			r.run(ctx)
			return closeHost()
		},
	}
	cmd.Flags().StringVarP(&workdir, "workdir", "w", "", "the shell's workspace (default: the current directory)")
	return cmd
}

// repl reads lines and runs each as one call of the bash tool.
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
}

// run reads and runs lines until end of input, two Ctrl-C in a row at the
// prompt, or ctx is done.
func (r *repl) run(ctx context.Context) {
	lines := make(chan string)
	quit := make(chan struct{})
	defer close(quit)
	go readLines(r.in, lines, quit)
	armed := false // one Ctrl-C at the prompt; a second one exits
	for {
		if r.interactive {
			fmt.Fprint(r.status, "dsh$ ")
		}
		select {
		case <-ctx.Done():
			return
		case <-r.interrupts:
			if armed {
				fmt.Fprintln(r.status)
				return
			}
			armed = true
			fmt.Fprintln(r.status, r.faint("\n[Ctrl-C again or Ctrl-D to exit]"))
		case line, ok := <-lines:
			if !ok {
				if r.interactive {
					fmt.Fprintln(r.status)
				}
				return
			}
			armed = false
			if strings.TrimSpace(line) != "" {
				r.call(ctx, line)
			}
		}
	}
}

// call runs one line; a Ctrl-C meanwhile cancels it.
func (r *repl) call(ctx context.Context, line string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	args, err := json.Marshal(map[string]string{"command": line})
	if err != nil {
		fmt.Fprintf(r.status, "dsh: %v\n", err)
		return
	}
	start := time.Now()
	done := make(chan host.Result, 1)
	go func() { done <- r.tools.Call(ctx, r.owner, replTool, args) }()
	var res host.Result
	for waiting := true; waiting; {
		select {
		case res = <-done:
			waiting = false
		case <-r.interrupts:
			cancel()
		}
	}
	elapsed := time.Since(start)
	fmt.Fprint(r.out, res.Text)
	if res.Text != "" && !strings.HasSuffix(res.Text, "\n") {
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
