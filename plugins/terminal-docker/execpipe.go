package terminaldocker

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/dshdev/dsh/plugins/terminal/inband"
)

// execPipe is a program run beside the shell, in its container and as its
// user, without a TTY: its stdin is written, its stdout read (the daemon
// frames a TTY-less stream; the frames are taken apart here) and the start
// of its stderr kept. The stdin proof's probe and the files written for
// the shell are such programs.
type execPipe struct {
	api  *client.Client
	id   string
	conn client.ExecAttachResult
	out  *io.PipeReader
	// errOut is the start of the program's stderr, once copied is closed.
	errOut capped
	// copied is closed once the stream's frames have all been taken apart.
	copied chan struct{}
}

// capped keeps the first 4 KiB written to it.
type capped struct{ b []byte }

func (c *capped) Write(p []byte) (int, error) {
	c.b = append(c.b, p[:min(len(p), 4<<10-len(c.b))]...)
	return len(p), nil
}

// startExec runs argv in the container as user.
func startExec(ctx context.Context, api *client.Client, containerID, user string, argv []string) (*execPipe, error) {
	ex, err := api.ExecCreate(ctx, containerID, client.ExecCreateOptions{
		User:         user,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          argv,
	})
	if err != nil {
		return nil, fmt.Errorf("container %s: create an exec: %w", shortID(containerID), err)
	}
	conn, err := api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("container %s: start an exec: %w", shortID(containerID), err)
	}
	pr, pw := io.Pipe()
	p := &execPipe{api: api, id: ex.ID, conn: conn, out: pr, copied: make(chan struct{})}
	go func() {
		defer close(p.copied)
		_, err := stdcopy.StdCopy(pw, &p.errOut, conn.Reader)
		pw.CloseWithError(err)
	}()
	return p, nil
}

func (p *execPipe) Read(b []byte) (int, error)  { return p.out.Read(b) }
func (p *execPipe) Write(b []byte) (int, error) { return p.conn.Conn.Write(b) }

// CloseWrite ends the program's stdin.
func (p *execPipe) CloseWrite() error { return p.conn.CloseWrite() }

// Close drops the stream (the program's stdin ends, its output goes
// nowhere) and returns once nothing reads it any more.
func (p *execPipe) Close() error {
	p.conn.Close()
	p.out.Close()
	<-p.copied
	return nil
}

// wait returns the program's exit code once it has ended (its stream
// ends first; the daemon records the code a moment later).
func (p *execPipe) wait(ctx context.Context) (int, error) {
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		ei, err := p.api.ExecInspect(ctx, p.id, client.ExecInspectOptions{})
		if err != nil {
			return -1, err
		}
		if !ei.Running {
			return ei.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, context.Cause(ctx)
		case <-time.After(delay):
		}
	}
}

// run runs argv beside the shell with stdin as its input, and returns what
// it printed and its status (inband.FarRun).
func (l *execLink) run(ctx context.Context, argv []string, stdin []byte) (inband.FarResult, error) {
	p, err := startExec(ctx, l.api, l.container, l.user, argv)
	if err != nil {
		return inband.FarResult{}, err
	}
	defer p.Close()
	stop := context.AfterFunc(ctx, func() { p.conn.Close() })
	defer stop()
	// The program reads its input while its output is read here: write
	// from a goroutine of its own, or a program that prints much before it
	// reads would block both.
	wrote := make(chan error, 1)
	go func() {
		_, err := p.Write(stdin)
		if cerr := p.CloseWrite(); err == nil {
			err = cerr
		}
		wrote <- err
	}()
	out, readErr := io.ReadAll(p.out)
	werr := <-wrote
	<-p.copied
	if ctx.Err() != nil {
		return inband.FarResult{}, context.Cause(ctx)
	}
	if readErr != nil {
		return inband.FarResult{}, readErr
	}
	code, err := p.wait(ctx)
	if err != nil {
		return inband.FarResult{}, err
	}
	if werr != nil && code == 0 {
		return inband.FarResult{}, werr
	}
	return inband.FarResult{Stdout: out, Stderr: p.errOut.b, Code: code}, nil
}

// localProof is the stdin proof through this machine's /proc, for a
// container on a local daemon whose processes dsh may read.
type localProof struct{ l *execLink }

func (p localProof) WaitingForInput() (bool, error) { return p.l.waitingForInput() }
func (localProof) Close() error                     { return nil }

// startProof returns what starts the stdin proof of the shell on link:
// through this machine's /proc where the daemon is local and the
// container's processes readable (the shell's prompt read was seen),
// else with inband's probe in an exec beside the shell, which reads the
// container's /proc as the shell's own user.
func (b *Backend) startProof(link *execLink) func(context.Context, int) (inband.Prober, error) {
	return func(ctx context.Context, pid int) (inband.Prober, error) {
		if link.shell.PID != 0 && !b.noLocalProof {
			link.learnPromptRead(ctx)
			if link.promptRead.Count != 0 {
				return localProof{link}, nil
			}
			b.log.Debug("the container's processes cannot be read from here; the stdin probe runs in the container")
		}
		ex, err := startExec(ctx, b.api, link.container, link.user, inband.ProbeArgv(pid))
		if err != nil {
			return nil, fmt.Errorf("the stdin probe: %w", err)
		}
		proof, err := inband.StartRemoteProof(ctx, ex, ex, ex)
		if err != nil {
			return nil, err
		}
		return proof, nil
	}
}
