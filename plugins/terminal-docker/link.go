package terminaldocker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// execLink is a shell started by an exec with a TTY, attached over the
// daemon's hijacked connection: the inband.Link of this backend. With a TTY
// the stream is the terminal's raw bytes, not docker's multiplexed frames.
type execLink struct {
	api       *client.Client
	conn      client.ExecAttachResult
	container string // the container's id
	owned     bool   // dsh created the container, and removes it
	exec      string // the exec's id
	user      string // who the shell runs as ("": the container's user)
	// files are the session's files in the container, written by execs
	// beside the shell (Session.WriteFile).
	files *inband.FarFiles
	// shell is the exec's process as this machine's /proc names it, when
	// the daemon is local and shares dsh's pid namespace; zero otherwise.
	shell proc.Identity
	// promptRead is the read(2) the shell blocks in at its prompt, learnt
	// once it has started; zero when it could not be.
	promptRead proc.BlockedRead
	log        *slog.Logger

	eof       chan struct{} // closed when the stream has ended or Close began
	eofOnce   sync.Once
	closeOnce sync.Once
	closeErr  error
}

func (l *execLink) Read(p []byte) (int, error) {
	n, err := l.conn.Reader.Read(p)
	if err != nil {
		l.ended()
		// A connection closed under the read (Close) is the stream's end.
		if errors.Is(err, net.ErrClosed) {
			err = io.EOF
		}
	}
	return n, err
}

func (l *execLink) Write(p []byte) (int, error) { return l.conn.Conn.Write(p) }

func (l *execLink) ended() { l.eofOnce.Do(func() { close(l.eof) }) }

// Resize sets the exec's TTY size.
func (l *execLink) Resize(size termapi.Size) error {
	ctx, cancel := context.WithTimeout(context.Background(), inspectBound)
	defer cancel()
	_, err := l.api.ExecResize(ctx, l.exec, client.ExecResizeOptions{Height: uint(size.Rows), Width: uint(size.Cols)})
	return err
}

// inspectBound bounds each call to the daemon that an exit or close makes.
const inspectBound = 30 * time.Second

// Wait returns once the stream has ended, with how the shell ended: the
// exec's exit code, or the container's end (killed, out of memory).
func (l *execLink) Wait() termapi.Status {
	<-l.eof
	ctx, cancel := context.WithTimeout(context.Background(), inspectBound)
	defer cancel()
	// The stream ends as the process does; the daemon records the exit
	// code a moment later.
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		ei, err := l.api.ExecInspect(ctx, l.exec, client.ExecInspectOptions{})
		if err != nil {
			break
		}
		if !ei.Running {
			return l.containerEnd(ctx, termapi.Status{Exited: true, ExitCode: ei.ExitCode})
		}
		select {
		case <-ctx.Done():
			return l.containerEnd(ctx, termapi.Status{Exited: true, ExitCode: -1})
		case <-time.After(delay):
		}
	}
	return l.containerEnd(ctx, termapi.Status{Exited: true, ExitCode: -1})
}

// containerEnd refines st when the whole container has ended: a kill or
// the memory limit took the shell with it.
func (l *execLink) containerEnd(ctx context.Context, st termapi.Status) termapi.Status {
	ci, err := l.api.ContainerInspect(ctx, l.container, client.ContainerInspectOptions{})
	if err != nil || ci.Container.State == nil || ci.Container.State.Running {
		return st
	}
	if ci.Container.State.OOMKilled {
		l.log.Info("the container ran out of memory", "container", l.container)
		return termapi.Status{Exited: true, ExitCode: -1, Signal: "SIGKILL"}
	}
	if st.ExitCode == -1 && st.Signal == "" && ci.Container.State.ExitCode > 128 {
		st.Signal = unix.SignalName(unix.Signal(ci.Container.State.ExitCode - 128))
	}
	return st
}

// Close ends the shell: it closes the stream, and removes a container dsh
// created (which kills what runs in it); in an existing container it kills
// what is left of the shell's session, where this machine can see it.
func (l *execLink) Close() error {
	l.closeOnce.Do(func() {
		l.ended()
		l.conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), inspectBound)
		defer cancel()
		if l.owned {
			// The container's removal takes its files.
			_, err := l.api.ContainerRemove(ctx, l.container, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !isNotFound(err) {
				l.closeErr = err
			}
			return
		}
		if l.files != nil {
			if err := l.files.Purge(ctx); err != nil {
				l.log.Warn("the session's files stay in the container", "container", shortID(l.container), "err", err)
			}
		}
		l.closeErr = l.killSession()
	})
	return l.closeErr
}

// killSession kills the processes of the shell's session in an existing
// container: closing the stream hangs its terminal up, but a job that
// ignores SIGHUP would stay. Only where the shell's host pid is known.
func (l *execLink) killSession() error {
	if l.shell.PID == 0 {
		return nil
	}
	snap, err := proc.Scan()
	if err != nil {
		return err
	}
	var errs []error
	for _, st := range snap.Session(l.shell.PID) {
		id := proc.Identity{PID: st.PID, StartTime: st.StartTime}
		if err := id.Signal(unix.SIGKILL); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// waitingForInput proves that the terminal's foreground job is blocked
// reading it, through /proc: the shell's terminal and its foreground group
// are in its stat line. The shell itself in the foreground counts only when
// it reads elsewhere than at its prompt (a read builtin): its prompt marker
// may still be on its way.
func (l *execLink) waitingForInput() (bool, error) {
	st, err := proc.ReadStat(l.shell.PID)
	if err != nil || st.StartTime != l.shell.StartTime {
		return false, err
	}
	if st.TPGID <= 0 || st.TTYNr == 0 {
		return false, nil
	}
	if st.TPGID == st.PID {
		rd, ok := proc.ReadingTerminal(st.PID, uint64(st.TTYNr))
		return ok && l.promptRead.Count != 0 && rd != l.promptRead, nil
	}
	return proc.WaitingOnTerminal(st.TPGID, uint64(st.TTYNr))
}

// learnPromptRead records the read the shell blocks in at its prompt. The
// shell has just shown its first prompt, so it is there or nearly.
func (l *execLink) learnPromptRead(ctx context.Context) {
	st, err := proc.ReadStat(l.shell.PID)
	if err != nil || st.TTYNr == 0 {
		return
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for delay := time.Millisecond; delay < time.Second; delay *= 2 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if rd, ok := proc.ReadingTerminal(l.shell.PID, uint64(st.TTYNr)); ok {
			l.promptRead = rd
			return
		}
		t.Reset(delay)
	}
	l.log.Debug("the shell's prompt read was not seen; proofs of a read builtin are off")
}
