package inband

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// probeScript is the stdin proof that runs beside the shell, at the far
// end: see its own comments.
//
//go:embed probe.sh
var probeScript string

// ProbeCommand is the command line that runs the stdin proof for the shell
// whose pid (as the far end numbers it: its $$) is pid, through a shell, as
// an SSH exec request is run. The far end needs bash and Linux's /proc.
func ProbeCommand(pid int) string {
	return "exec bash --noprofile --norc -c " + Quote(probeScript) + " dsh-probe " + strconv.Itoa(pid)
}

// ProbeArgv is ProbeCommand as an argument vector, for a far end that runs
// programs without a shell (a container exec).
func ProbeArgv(pid int) []string {
	return []string{"bash", "--noprofile", "--norc", "-c", probeScript, "dsh-probe", strconv.Itoa(pid)}
}

// Prober is a stdin proof that runs beside the shell (Options.StartProof):
// WaitingForInput as in Options, and Close, which the session calls once
// it has closed.
type Prober interface {
	WaitingForInput() (bool, error)
	Close() error
}

// Errors of a RemoteProof.
var (
	// ErrNoProof: the far end cannot prove waits (no Linux /proc, no bash,
	// no pty the probe can see), or the probe did not start.
	ErrNoProof = errors.New("inband: the far end offers no stdin proof")
	// ErrProbeLost: the probe stopped answering, or the shell it watches
	// is gone. It is final: the proof answers no more.
	ErrProbeLost = errors.New("inband: the stdin probe is gone")
)

// Bounds of a RemoteProof: its start (the first answer, then learning the
// shell's prompt read), and each answer. A probe that takes longer is
// lost: the clock that asks it must never wait long.
const (
	probeStartBound  = 5 * time.Second
	probeLearnBound  = time.Second
	probeAnswerBound = 2 * time.Second
)

// RemoteProof drives probe.sh (ProbeCommand) over its standard input and
// output: one question, one line back. It proves what the local /proc
// proof does for the jobs of the shell's terminal (a read or readv on the
// terminal, from the syscall files; where those are closed to it, the
// kernel's terminal-read sleep with nothing else that could cause it), and
// the shell's own read builtin, told apart from the read of its prompt,
// which it learns at the start.
type RemoteProof struct {
	w     io.Writer
	c     io.Closer
	lines chan string
	done  chan struct{} // the reader has ended

	mu     sync.Mutex
	lost   error     // final, once set
	prompt shellRead // the shell's read at its prompt; zero when unknown
}

// shellRead is a read(2) the shell is blocked in: descriptor, buffer,
// count.
type shellRead struct{ fd, buf, count uint64 }

// StartRemoteProof starts the proof on a probe that runs ProbeCommand with
// r its output, w its input and c what ends it. It returns once the probe
// has said it can serve and has seen the shell, which has just shown its
// first prompt, read at it; ErrNoProof when the far end cannot serve. On
// error, c has been closed.
func StartRemoteProof(ctx context.Context, r io.Reader, w io.Writer, c io.Closer) (*RemoteProof, error) {
	p := &RemoteProof{w: w, c: c, lines: make(chan string, 1), done: make(chan struct{})}
	go p.read(r)
	t := time.NewTimer(probeStartBound)
	defer t.Stop()
	// The far end's startup files may print first (a login shell's rc);
	// the probe's first word is "r" or "x REASON".
	for ready := false; !ready; {
		select {
		case l, ok := <-p.lines:
			switch {
			case !ok:
				p.Close()
				return nil, fmt.Errorf("%w: the probe ended before it answered", ErrNoProof)
			case l == "r":
				ready = true
			case strings.HasPrefix(l, "x "):
				p.Close()
				return nil, fmt.Errorf("%w: %s", ErrNoProof, strings.TrimPrefix(l, "x "))
			}
		case <-t.C:
			p.Close()
			return nil, fmt.Errorf("%w: the probe did not answer within %v", ErrNoProof, probeStartBound)
		case <-ctx.Done():
			p.Close()
			return nil, context.Cause(ctx)
		}
	}
	p.learnPrompt(ctx)
	return p, nil
}

// read passes the probe's lines on, until its output ends.
func (p *RemoteProof) read(r io.Reader) {
	defer close(p.done)
	defer close(p.lines)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		p.lines <- sc.Text()
	}
}

// learnPrompt records the read the shell blocks in at its prompt, asking
// until it is seen (the shell is there, or nearly). Without it the shell's
// own reads are never proven (the syscall file is closed to the probe).
func (p *RemoteProof) learnPrompt(ctx context.Context) {
	deadline := time.Now().Add(probeLearnBound)
	for delay := time.Millisecond; time.Now().Before(deadline); delay = min(2*delay, 100*time.Millisecond) {
		answer, err := p.ask()
		if err != nil {
			return
		}
		if rd, ok := parseShellRead(answer); ok {
			p.mu.Lock()
			p.prompt = rd
			p.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// keepPrompt takes the shell's prompt read from old, a lost proof of the
// same shell: a new probe learns it at its start only when the shell is at
// its prompt, which it may not be when the old one was lost.
func (p *RemoteProof) keepPrompt(old *RemoteProof) {
	old.mu.Lock()
	rd := old.prompt
	old.mu.Unlock()
	if rd == (shellRead{}) {
		return
	}
	p.mu.Lock()
	p.prompt = rd
	p.mu.Unlock()
}

// WaitingForInput asks the probe whether the terminal's foreground waits
// for input: a job blocked reading the terminal, or the shell in another
// read of it than its prompt's.
func (p *RemoteProof) WaitingForInput() (bool, error) {
	answer, err := p.ask()
	if err != nil {
		return false, err
	}
	switch {
	case answer == "y", answer == "w":
		// w: the shell's own read, seen twice (see probe.sh).
		return true, nil
	case answer == "n", answer == "v":
		return false, nil
	case answer == "x":
		p.lose(fmt.Errorf("%w: the shell it watched has gone", ErrProbeLost))
		return false, p.lostErr()
	}
	rd, ok := parseShellRead(answer)
	if !ok {
		p.lose(fmt.Errorf("%w: it answered %q", ErrProbeLost, answer))
		return false, p.lostErr()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prompt != (shellRead{}) && rd != p.prompt, nil
}

// ask sends one question and returns the answer.
func (p *RemoteProof) ask() (string, error) {
	if err := p.lostErr(); err != nil {
		return "", err
	}
	if _, err := io.WriteString(p.w, "?\n"); err != nil {
		p.lose(fmt.Errorf("%w: %v", ErrProbeLost, err))
		return "", p.lostErr()
	}
	t := time.NewTimer(probeAnswerBound)
	defer t.Stop()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.lose(fmt.Errorf("%w: it ended", ErrProbeLost))
			return "", p.lostErr()
		}
		return l, nil
	case <-t.C:
		// A late answer would be taken for the next question's.
		p.lose(fmt.Errorf("%w: no answer within %v", ErrProbeLost, probeAnswerBound))
		p.c.Close()
		return "", p.lostErr()
	}
}

func (p *RemoteProof) lose(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost == nil {
		p.lost = err
	}
}

func (p *RemoteProof) lostErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// Close ends the probe and waits until its output has been read to the
// end.
func (p *RemoteProof) Close() error {
	p.lose(fmt.Errorf("%w: closed", ErrProbeLost))
	err := p.c.Close()
	// The reader may be blocked handing on a line nobody asks for.
	for range p.lines {
	}
	<-p.done
	return err
}

// parseShellRead parses "s FD BUF COUNT".
func parseShellRead(answer string) (shellRead, bool) {
	f := strings.Fields(answer)
	if len(f) != 4 || f[0] != "s" {
		return shellRead{}, false
	}
	var v [3]uint64
	for i, s := range f[1:] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return shellRead{}, false
		}
		v[i] = n
	}
	return shellRead{fd: v[0], buf: v[1], count: v[2]}, true
}

var _ Prober = (*RemoteProof)(nil)
