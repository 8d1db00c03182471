package terminalkubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// The transports of an exec (Config.ExecTransport).
const (
	transportAuto      = ""          // WebSocket, SPDY where the server does not upgrade to it
	transportWebSocket = "websocket" // WebSocket only
	transportSPDY      = "spdy"      // SPDY only
)

// stream is one exec into a pod's container: a process whose stdin is
// written through Write and whose output is read through Read, until it
// ends. Its output is read by the caller (the session's read loop, or the
// control client) for as long as the exec runs: a stream whose output is
// not read blocks the exec on the server, so Close unblocks the writer
// side and cancels the exec.
type stream struct {
	stdinR  *io.PipeReader
	stdinW  *io.PipeWriter
	stdoutR *io.PipeReader
	stdoutW *io.PipeWriter
	sizes   *sizeQueue // nil without a TTY
	cancel  context.CancelFunc

	done chan struct{} // closed when the exec has ended
	err  error         // how it ended; set before done is closed

	closeOnce sync.Once
}

// execSpec is what startExec runs.
type execSpec struct {
	pod, container string
	command        []string
	tty            bool
	size           termapi.Size // with tty
}

// startExec starts an exec. It returns at once; the exec's end is in
// s.done and s.err. The exec runs until it ends or the stream is closed,
// independent of ctx, which bounds only the setting up.
func (b *Backend) startExec(ctx context.Context, spec execSpec) (*stream, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	req := b.api.CoreV1().RESTClient().Post().
		Namespace(b.ns).Resource("pods").Name(spec.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: spec.container,
			Command:   spec.command,
			Stdin:     true,
			Stdout:    true,
			Stderr:    !spec.tty,
			TTY:       spec.tty,
		}, scheme.ParameterCodec)
	ex, err := b.executor(req.URL())
	if err != nil {
		return nil, err
	}
	s := &stream{done: make(chan struct{})}
	s.stdinR, s.stdinW = io.Pipe()
	s.stdoutR, s.stdoutW = io.Pipe()
	opts := remotecommand.StreamOptions{Stdin: s.stdinR, Stdout: s.stdoutW, Tty: spec.tty}
	if spec.tty {
		s.sizes = newSizeQueue(spec.size)
		opts.TerminalSizeQueue = s.sizes
	} else {
		// The helper's own errors, where the control exec has no
		// terminal to merge them into.
		opts.Stderr = s.stdoutW
	}
	execCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() {
		err := ex.StreamWithContext(execCtx, opts)
		s.err = err
		// The output has ended: the reader gets EOF (or the error of a
		// close) once it has read everything.
		s.stdoutW.CloseWithError(io.EOF)
		if s.sizes != nil {
			s.sizes.stop()
		}
		close(s.done)
	}()
	return s, nil
}

// executor returns the exec transport the config asks for.
func (b *Backend) executor(u *url.URL) (remotecommand.Executor, error) {
	var ws, spdy remotecommand.Executor
	var err error
	if b.cfg.ExecTransport != transportSPDY {
		if ws, err = remotecommand.NewWebSocketExecutor(b.rest, "GET", u.String()); err != nil {
			return nil, fmt.Errorf("terminal-kubernetes: the WebSocket executor: %w", err)
		}
	}
	if b.cfg.ExecTransport != transportWebSocket {
		if spdy, err = remotecommand.NewSPDYExecutor(b.rest, "POST", u); err != nil {
			return nil, fmt.Errorf("terminal-kubernetes: the SPDY executor: %w", err)
		}
	}
	switch {
	case ws == nil:
		return spdy, nil
	case spdy == nil:
		return ws, nil
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

func (s *stream) Read(p []byte) (int, error) { return s.stdoutR.Read(p) }

func (s *stream) Write(p []byte) (int, error) { return s.stdinW.Write(p) }

// Close ends the exec: the process's stdin is closed, the output pipe
// unblocks its writer, and the exec's connection is cancelled. It returns
// once the exec has ended.
func (s *stream) Close() {
	s.closeOnce.Do(func() {
		s.stdinW.Close()
		s.stdoutR.CloseWithError(io.EOF)
		s.cancel()
	})
	<-s.done
	// The stdin copier of the exec reads until its pipe ends: it has.
	s.stdinR.CloseWithError(io.EOF)
}

// exitCode reads an exec's end: the process's exit code, or ok false when
// the exec did not end with one (the connection was lost, or closed).
func exitCode(err error) (code int, ok bool) {
	if err == nil {
		return 0, true
	}
	var ce utilexec.CodeExitError
	if errors.As(err, &ce) {
		return ce.Code, true
	}
	var pce *utilexec.CodeExitError
	if errors.As(err, &pce) {
		return pce.Code, true
	}
	return 0, false
}

// sizeQueue hands the terminal's sizes to the exec, the first one at
// once.
type sizeQueue struct {
	ch       chan remotecommand.TerminalSize
	quit     chan struct{}
	stopOnce sync.Once
}

func newSizeQueue(first termapi.Size) *sizeQueue {
	q := &sizeQueue{ch: make(chan remotecommand.TerminalSize, 1), quit: make(chan struct{})}
	q.ch <- remotecommand.TerminalSize{Width: uint16(first.Cols), Height: uint16(first.Rows)}
	return q
}

// Next returns the next size, or nil once the stream has ended.
func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case sz := <-q.ch:
		return &sz
	case <-q.quit:
		return nil
	}
}

// set replaces a size not yet taken with size.
func (q *sizeQueue) set(size termapi.Size) error {
	sz := remotecommand.TerminalSize{Width: uint16(size.Cols), Height: uint16(size.Rows)}
	for {
		select {
		case <-q.quit:
			return errors.New("the exec has ended")
		case q.ch <- sz:
			return nil
		default:
		}
		select {
		case <-q.ch:
		default:
		}
	}
}

func (q *sizeQueue) stop() { q.stopOnce.Do(func() { close(q.quit) }) }
