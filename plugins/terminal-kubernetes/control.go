package terminalkubernetes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/podhelper"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Bounds on the helper's answers: a probe is a read of a few /proc files,
// a sweep waits for processes to end (a second per signal, at most three).
const (
	probeBound  = 5 * time.Second
	signalBound = 10 * time.Second
	sweepBound  = 40 * time.Second
)

// errControl: the control exec is gone or did not answer in time; the
// session goes on without the helper.
var errControl = errors.New("terminal-kubernetes: the pod helper does not answer")

// control is the client of a shell helper's control channel: an exec of
// `dsh-kube-helper control NAME` whose stdin takes requests and whose
// stdout gives the answers, a line each (see podhelper).
type control struct {
	st *stream

	mu     sync.Mutex // one request at a time
	out    *bufio.Reader
	broken error // set once a request failed: the channel's state is unknown
	// end is the helper's word on how the shell ended ("end signal
	// SIGKILL"), once it has come.
	end []string
}

func newControl(st *stream) *control {
	return &control{st: st, out: bufio.NewReader(st)}
}

// request sends one request and returns the answer's words after "ok", or
// an error: a refusal (*helperError) or a broken channel (errControl).
func (c *control) request(ctx context.Context, req string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return nil, c.broken
	}
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		if _, err := c.st.Write([]byte(req + "\n")); err != nil {
			got <- answer{err: err}
			return
		}
		line, err := c.out.ReadString('\n')
		got <- answer{line, err}
	}()
	var a answer
	select {
	case a = <-got:
	case <-ctx.Done():
		// The channel is stuck: close it, so that the goroutine above
		// ends, and never use it again.
		c.broken = fmt.Errorf("%w: %q: %v", errControl, req, context.Cause(ctx))
		c.st.Close()
		<-got
		return nil, c.broken
	}
	if a.err != nil {
		c.broken = fmt.Errorf("%w: %q: %v", errControl, req, a.err)
		return nil, c.broken
	}
	words := strings.Fields(a.line)
	switch {
	case len(words) > 0 && words[0] == podhelper.AnsEnd:
		c.end = words
		c.broken = fmt.Errorf("%w: %q: the shell has ended", errControl, req)
		return nil, c.broken
	case len(words) > 0 && words[0] == podhelper.AnsOK:
		return words[1:], nil
	case len(words) > 1 && words[0] == podhelper.AnsErr:
		return nil, &helperError{code: words[1], msg: strings.Join(words[2:], " ")}
	}
	c.broken = fmt.Errorf("%w: %q: unexpected answer %q", errControl, req, a.line)
	return nil, c.broken
}

// endSignal waits, within ctx, for the helper's word on how the shell
// ended, and returns the signal that killed it, or "" (it exited, or the
// helper did not say).
func (c *control) endSignal(ctx context.Context) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.end == nil && c.broken == nil {
		got := make(chan string, 1)
		go func() {
			line, _ := c.out.ReadString('\n')
			got <- line
		}()
		select {
		case line := <-got:
			c.end = strings.Fields(line)
		case <-ctx.Done():
			c.broken = fmt.Errorf("%w: no word on the shell's end: %v", errControl, context.Cause(ctx))
			c.st.Close()
			<-got
		}
	}
	if len(c.end) == 3 && c.end[0] == podhelper.AnsEnd && c.end[1] == "signal" {
		return c.end[2]
	}
	return ""
}

// helperError is a request the helper refused.
type helperError struct{ code, msg string }

func (e *helperError) Error() string { return "the pod helper: " + e.code + ": " + e.msg }

// probe asks whether the foreground job waits reading the terminal.
func (c *control) probe(ctx context.Context) (bool, error) {
	words, err := c.request(ctx, podhelper.ReqProbe)
	if err != nil {
		return false, err
	}
	return len(words) == 1 && words[0] == "1", nil
}

// learn has the helper note the shell's prompt read.
func (c *control) learn(ctx context.Context) error {
	_, err := c.request(ctx, podhelper.ReqLearn)
	return err
}

// signal delivers sig to the foreground group, and returns the group's id
// in the pod.
func (c *control) signal(ctx context.Context, sig termapi.Signal) (int, error) {
	words, err := c.request(ctx, podhelper.ReqSignal+" "+string(sig))
	var he *helperError
	switch {
	case errors.As(err, &he) && he.code == podhelper.ErrCodeShell:
		return 0, fmt.Errorf("%w (%s)", termapi.ErrRefuseKillShell, he.msg)
	case errors.As(err, &he) && he.code == podhelper.ErrCodeNoForeground:
		return 0, fmt.Errorf("%w: %s", termapi.ErrNoForeground, he.msg)
	case errors.As(err, &he) && he.code == podhelper.ErrCodeUnsupported:
		return 0, fmt.Errorf("%w: %s", termapi.ErrUnsupportedSignal, he.msg)
	case err != nil:
		return 0, err
	}
	pgid := 0
	if len(words) == 1 {
		pgid, _ = strconv.Atoi(words[0])
	}
	return pgid, nil
}

// sweep has the helper end every process of the shell, and the shell.
func (c *control) sweep(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, sweepBound)
	defer cancel()
	_, err := c.request(ctx, podhelper.ReqSweep)
	return err
}

// close ends the control exec.
func (c *control) close() { c.st.Close() }
