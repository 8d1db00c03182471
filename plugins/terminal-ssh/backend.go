package terminalssh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Type is the backend type sessions are spawned under.
const Type = "ssh"

// remoteCommand starts the shell through the remote user's login shell
// (which is how SSH runs a command): an interactive bash without startup
// files or line editor, which replaces the login shell so that its exit
// status is the session's.
const remoteCommand = "exec bash --noediting --noprofile --norc -i"

// Backend starts remote bash sessions over SSH, one connection each. It
// remembers its live sessions so that Close can end them.
type Backend struct {
	cfg Config
	log *slog.Logger
	// afterDial, when set, runs once a spawn's connection is up (tests).
	afterDial func()
	// noProof leaves sessions without the stdin proof, as on a far end
	// without /proc (tests).
	noProof bool

	sessions backendkit.Sessions[*inband.Session]
}

// New returns a backend for cfg, which must be valid. It reads the
// identity and known_hosts files once, so that a bad one is reported now;
// every connection reads them again.
func New(cfg *Config) (*Backend, error) {
	if cfg == nil {
		return nil, errors.New("terminal-ssh: nil config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := loadCredentials(cfg); err != nil {
		return nil, err
	}
	return &Backend{
		cfg: *cfg,
		log: slog.Default().With("backend", Type, "host", cfg.addr()),
	}, nil
}

// Type is "ssh".
func (b *Backend) Type() string { return Type }

// errShutdown is returned by Spawn once the backend has been closed.
var errShutdown = fmt.Errorf("terminal-ssh: backend is shut down: %w", termapi.ErrBackendClosed)

// Spawn connects, starts the remote shell in the configured workdir (or in
// spec.Cwd, with spawnCwd), and returns once the shell shows its first
// prompt. If ctx ends first, or anything fails, the connection is closed
// again before Spawn returns; if that close fails too, the error is a
// *termapi.CleanupError.
func (b *Backend) Spawn(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	// The remote account is the boundary: nothing in it is confined or
	// limited from here.
	if err := spec.Policy.Check(termapi.Capabilities{}); err != nil {
		return nil, fmt.Errorf("terminal-ssh: %w", err)
	}
	if strings.IndexByte(spec.Cwd, 0) >= 0 {
		return nil, errors.New("terminal-ssh: the working directory contains a NUL byte")
	}
	if b.sessions.Closed() {
		return nil, errShutdown
	}
	cred, err := loadCredentials(&b.cfg)
	if err != nil {
		return nil, err
	}
	client, err := dial(ctx, &b.cfg, cred)
	if err != nil {
		return nil, err
	}
	if b.afterDial != nil {
		b.afterDial()
	}
	link, err := b.open(client, spec.Policy.Size.Or(termapi.DefaultSize))
	if err != nil {
		client.Close()
		_ = client.Wait()
		return nil, err
	}
	dir := b.cfg.Workdir
	if b.cfg.SpawnCwd && spec.Cwd != "" {
		dir = spec.Cwd
	}
	s, err := inband.Start(ctx, link, dir, inband.Options{
		ID:         spec.SessionID,
		OwnerID:    spec.OwnerID,
		Name:       spec.Name,
		Attachable: true,
		Prefix:     "terminal-ssh",
		Where:      b.cfg.addr(),
		StartErr:   ErrRemoteShell,
		Idle:       ms(b.cfg.IdleSilenceMs),
		Timeout:    ms(b.cfg.TimeoutMs),
		StartProof: b.startProof(link),
		WriteFile:  link.files.Write,
		Log:        b.log.With("session", spec.SessionID),
		Forget:     b.sessions.Remove,
	})
	if err != nil {
		return nil, err
	}
	if !b.sessions.Add(s) {
		return nil, backendkit.Refuse(ctx, s, closeBudget, errShutdown)
	}
	return s, nil
}

// closeBudget bounds a close nobody else bounds (a failed startup). Close
// only waits for local goroutines once the connection is closed.
const closeBudget = 10 * time.Second

// open starts the remote shell on a PTY of the new connection.
func (b *Backend) open(client *ssh.Client, size termapi.Size) (*sshLink, error) {
	addr := b.cfg.addr()
	remote, err := client.NewSession()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: open a session: %v", ErrRemoteShell, addr, err)
	}
	// No agent or X11 forwarding is requested and no environment variable
	// is sent: nothing of this host reaches the remote side. The terminal
	// does not echo (typed lines are the protocol's, not output) and turns
	// ^C and ^Z into signals.
	modes := ssh.TerminalModes{
		ssh.ECHO:          0,
		ssh.ICANON:        1,
		ssh.ISIG:          1,
		ssh.IUTF8:         1,
		ssh.TTY_OP_ISPEED: 38400,
		ssh.TTY_OP_OSPEED: 38400,
	}
	if err := remote.RequestPty("dumb", size.Rows, size.Cols, modes); err != nil {
		remote.Close()
		return nil, fmt.Errorf("%w: %s: request a terminal: %v", ErrRemoteShell, addr, err)
	}
	stdin, err := remote.StdinPipe()
	if err != nil {
		remote.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrRemoteShell, addr, err)
	}
	stdout, err := remote.StdoutPipe()
	if err != nil {
		remote.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrRemoteShell, addr, err)
	}
	if err := remote.Start(remoteCommand); err != nil {
		remote.Close()
		return nil, fmt.Errorf("%w: %s: start bash: %v", ErrRemoteShell, addr, err)
	}
	return newLink(client, remote, stdin, stdout, time.Duration(b.cfg.KeepaliveSeconds)*time.Second, b.log), nil
}

// startProof returns what starts the stdin proof of the shell on link: a
// probe in a second session of the same connection (inband.RemoteProof),
// which reads the remote /proc. Nil when the config turns it off.
func (b *Backend) startProof(link *sshLink) func(context.Context, int) (inband.Prober, error) {
	if b.noProof {
		return nil
	}
	return func(ctx context.Context, pid int) (inband.Prober, error) {
		probe, err := link.client.NewSession()
		if err != nil {
			return nil, fmt.Errorf("open a session for the stdin probe: %w", err)
		}
		stdin, err := probe.StdinPipe()
		if err != nil {
			probe.Close()
			return nil, err
		}
		stdout, err := probe.StdoutPipe()
		if err != nil {
			probe.Close()
			return nil, err
		}
		if err := probe.Start(inband.ProbeCommand(pid)); err != nil {
			probe.Close()
			return nil, fmt.Errorf("start the stdin probe: %w", err)
		}
		proof, err := inband.StartRemoteProof(ctx, stdout, stdin, probe)
		if err != nil {
			return nil, err
		}
		return proof, nil
	}
}

// Close closes every live session of the backend, and makes later spawns
// fail. It reports the sessions that did not close within ctx.
func (b *Backend) Close(ctx context.Context) error {
	return b.sessions.Close(ctx, "backend closed")
}

// List describes the backend's open sessions.
func (b *Backend) List(context.Context) ([]termapi.Info, error) {
	return backendkit.List(&b.sessions), nil
}

// Attach returns the open session id, as its spawn returned it.
func (b *Backend) Attach(_ context.Context, id string) (termapi.Session, error) {
	return backendkit.Find(&b.sessions, id)
}

var _ termapi.Backend = (*Backend)(nil)
