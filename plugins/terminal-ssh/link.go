package terminalssh

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// sshLink is a remote shell on the PTY of an SSH session, with the
// connection to itself: the inband.Link of this backend.
type sshLink struct {
	client *ssh.Client
	remote *ssh.Session
	stdin  io.Writer
	stdout io.Reader
	log    *slog.Logger

	// files are the session's files on the remote host, written through
	// other sessions of the connection (Session.WriteFile).
	files *inband.FarFiles

	quit      chan struct{} // closed by Close: the keepalive stops
	aliveDone chan struct{}
	closeOnce sync.Once
}

// newLink wraps a started remote shell, and keeps its connection alive
// every keepalive (none when zero).
func newLink(client *ssh.Client, remote *ssh.Session, stdin io.Writer, stdout io.Reader, keepalive time.Duration, log *slog.Logger) *sshLink {
	l := &sshLink{client: client, remote: remote, stdin: stdin, stdout: stdout, log: log,
		quit: make(chan struct{}), aliveDone: make(chan struct{})}
	l.files = inband.NewFarFiles(l.run)
	if keepalive > 0 {
		go l.keepalive(keepalive)
	} else {
		close(l.aliveDone)
	}
	return l
}

func (l *sshLink) Read(p []byte) (int, error)  { return l.stdout.Read(p) }
func (l *sshLink) Write(p []byte) (int, error) { return l.stdin.Write(p) }

// Wait returns the remote shell's exit status, or -1 for a connection that
// ended without saying.
func (l *sshLink) Wait() termapi.Status { return exitStatus(l.remote.Wait()) }

// Resize asks the server to change the PTY's size (an SSH window-change).
func (l *sshLink) Resize(size termapi.Size) error {
	return l.remote.WindowChange(size.Rows, size.Cols)
}

// Close removes the session's files from the remote host, closes the
// session and the connection, and returns once no goroutine of the
// library, nor the keepalive, is left.
func (l *sshLink) Close() error {
	l.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), purgeBound)
		if err := l.files.Purge(ctx); err != nil {
			l.log.Warn("the session's files stay on the remote host", "err", err)
		}
		cancel()
		close(l.quit)
		l.remote.Close()
		l.client.Close()
	})
	<-l.aliveDone
	_ = l.client.Wait()
	return nil
}

// exitStatus turns how the remote session ended into a status: the exit
// code, the signal that killed the shell, or unknown (-1) for a connection
// that ended without saying.
func exitStatus(err error) termapi.Status {
	if err == nil {
		return termapi.Status{Exited: true, ExitCode: 0}
	}
	if ee, ok := errors.AsType[*ssh.ExitError](err); ok {
		if sig := ee.Signal(); sig != "" {
			return termapi.Status{Exited: true, ExitCode: -1, Signal: "SIG" + sig}
		}
		return termapi.Status{Exited: true, ExitCode: ee.ExitStatus()}
	}
	return termapi.Status{Exited: true, ExitCode: -1}
}

// keepalive probes the connection every interval. A probe that fails, or
// has no reply within three intervals (OpenSSH's ServerAliveCountMax),
// closes the connection: the session has exited.
func (l *sshLink) keepalive(every time.Duration) {
	defer close(l.aliveDone)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-l.quit:
			return
		case <-tick.C:
		}
		dead := time.AfterFunc(3*every, func() {
			l.log.Warn("the SSH server did not answer keepalives; closing the connection", "after", 3*every)
			l.client.Close()
		})
		// OpenSSH answers with a failure: any answer proves the peer alive.
		_, _, err := l.client.SendRequest("keepalive@openssh.com", true, nil)
		dead.Stop()
		if err != nil {
			select {
			case <-l.quit:
			default:
				l.log.Info("the SSH connection is gone", "err", err)
				l.client.Close()
			}
			return
		}
	}
}

// purgeBound bounds removing the session's files at close: a connection
// that no longer answers gives up on them.
const purgeBound = 5 * time.Second

// run runs argv on the remote host in a session of its own on the
// connection (inband.FarRun).
func (l *sshLink) run(ctx context.Context, argv []string, stdin []byte) (inband.FarResult, error) {
	type result struct {
		res inband.FarResult
		err error
	}
	done := make(chan result, 1)
	var (
		mu   sync.Mutex
		sess *ssh.Session
	)
	go func() {
		s, err := l.client.NewSession()
		if err != nil {
			done <- result{err: err}
			return
		}
		mu.Lock()
		sess = s
		mu.Unlock()
		defer s.Close()
		var out, errOut bytes.Buffer
		s.Stdin, s.Stdout, s.Stderr = bytes.NewReader(stdin), &out, &errOut
		err = s.Run(inband.ShellCommand(argv))
		r := result{res: inband.FarResult{Stdout: out.Bytes(), Stderr: errOut.Bytes()}}
		if ee, ok := errors.AsType[*ssh.ExitError](err); ok {
			r.res.Code = ee.ExitStatus()
		} else if err != nil {
			r.err = err
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r.res, r.err
	case <-ctx.Done():
		mu.Lock()
		if sess != nil {
			sess.Close()
		}
		mu.Unlock()
		// The connection's close ends a session that has not opened yet.
		return inband.FarResult{}, context.Cause(ctx)
	}
}
