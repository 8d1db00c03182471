package terminalkubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// podLink is a shell in a pod, reached through an exec with a TTY: the
// inband.Link of this backend. With the helper, a second exec without a
// TTY (ctrl) asks it for the stdin proof, the signals and the sweep.
type podLink struct {
	b     *Backend
	pod   string
	shell *stream
	ctrl  *control // nil without the helper
	// files are the session's files in the pod (a clipped command's whole
	// output), written by execs beside the shell.
	files *inband.FarFiles
	log   *slog.Logger
	// release gives the pod back once the shell has ended: a created pod
	// is deleted when its owner's last session is gone.
	release func(ctx context.Context) error

	closeOnce sync.Once
	closeErr  error
}

func (l *podLink) Read(p []byte) (int, error)  { return l.shell.Read(p) }
func (l *podLink) Write(p []byte) (int, error) { return l.shell.Write(p) }

// Resize sets the exec's terminal size.
func (l *podLink) Resize(size termapi.Size) error { return l.shell.sizes.set(size) }

// statusBound bounds each call to the API server that an exit or close
// makes.
const statusBound = 15 * time.Second

// endBound bounds the wait for the helper's word on how the shell ended,
// which it sends before it exits, so before the shell's exec ends.
const endBound = 5 * time.Second

// Wait returns once the shell's exec has ended, with how: the exit code
// the exec reports, or, when the exec ended without one, why the shell
// was lost: its pod was deleted, evicted or killed, or the connection to
// the API server broke.
func (l *podLink) Wait() termapi.Status {
	<-l.shell.done
	err := l.shell.err
	code, ok := exitCode(err)
	ctx, cancel := context.WithTimeout(context.Background(), statusBound)
	defer cancel()
	if gone := l.b.podGone(ctx, l.pod); gone != "" {
		return termapi.Status{Exited: true, ExitCode: -1, Lost: gone}
	}
	if ok && code > 128 && l.ctrl != nil {
		// 128+N is how the helper reports a shell killed by signal N, and
		// also what `exit 137` gives: the helper says which.
		ectx, ecancel := context.WithTimeout(ctx, endBound)
		defer ecancel()
		if sig := l.ctrl.endSignal(ectx); sig != "" {
			return termapi.Status{Exited: true, ExitCode: -1, Signal: sig}
		}
	}
	if ok {
		return termapi.Status{Exited: true, ExitCode: code}
	}
	if errors.Is(err, context.Canceled) {
		// Closed from this side: the session says so itself.
		return termapi.Status{Exited: true, ExitCode: -1}
	}
	return termapi.Status{Exited: true, ExitCode: -1, Lost: fmt.Sprintf("the exec into pod %s ended without an exit status (the connection to the Kubernetes API server was lost?): %v", l.pod, err)}
}

// Close ends the shell and gives the pod back. With the helper, it first
// has it end every process the shell started (and the shell): a job that
// ignores the hang-up, or left the shell's session, does not outlive the
// session.
func (l *podLink) Close() error {
	l.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), statusBound+sweepBound)
		defer cancel()
		var errs []error
		if l.ctrl != nil {
			select {
			case <-l.shell.done:
				// The shell has ended, and its helper swept what it left.
			default:
				if err := l.ctrl.sweep(ctx); err != nil {
					l.log.Warn("the helper's sweep", "pod", l.pod, "err", err)
					errs = append(errs, err)
				}
			}
		}
		l.shell.Close()
		if l.ctrl != nil {
			l.ctrl.close()
		}
		// In a pod that stays (an existing one, or the owner's other
		// sessions), the session's files go with it.
		if err := l.files.Purge(ctx); err != nil {
			l.log.Warn("the session's files stay in the pod", "pod", l.pod, "err", err)
		}
		if l.release != nil {
			if err := l.release(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// waitingForInput is the stdin proof: the helper's answer.
func (l *podLink) waitingForInput() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), probeBound)
	defer cancel()
	return l.ctrl.probe(ctx)
}

var _ io.ReadWriter = (*podLink)(nil)
