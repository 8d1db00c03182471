package terminaldocker

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/go-units"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Errors that callers branch on.
var (
	// ErrUnreachable: the Docker daemon does not answer.
	ErrUnreachable = errors.New("terminal-docker: the Docker daemon is unreachable")
	// ErrNoImage: the configured image is not on the daemon.
	ErrNoImage = errors.New("terminal-docker: image not found")
	// ErrNoContainer: the configured container does not exist or is not
	// running.
	ErrNoContainer = errors.New("terminal-docker: container not running")
	// ErrShell: the container or its shell could not be started, or the
	// shell did not reach its prompt.
	ErrShell = errors.New("terminal-docker: the shell did not start")
)

// Backend starts a bash per session in a container of its own (Image) or
// in an existing one (Container), through the Docker Engine API.
type Backend struct {
	cfg Config
	api *client.Client
	log *slog.Logger
	// local: the daemon runs on this machine, so the exec's pid may name
	// the shell here too (hostShell checks that it does).
	local bool
	// securityOpts are a created container's (no-new-privileges, the
	// seccomp profile), made once.
	securityOpts []string
	// noLocalProof runs the stdin probe in the container even where this
	// machine could read its processes, as with a remote daemon (tests).
	noLocalProof bool
	// keeper and keeperProcess label the containers of a backend a keeper
	// serves (NewKept); empty otherwise.
	keeper, keeperProcess string

	sessions backendkit.Sessions[*inband.Session]
}

// New connects to the daemon and checks the image or container, so that a
// daemon that is down or an image that is missing fails the load, not the
// first call. log may be nil.
func New(ctx context.Context, cfg *Config, log *slog.Logger) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []client.Opt{client.FromEnv}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	api, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	b := &Backend{cfg: *cfg, api: api, log: log}
	if cfg.Image != "" {
		if b.securityOpts, err = securityOpts(cfg); err != nil {
			api.Close()
			return nil, err
		}
	}
	if err := b.check(ctx); err != nil {
		api.Close()
		return nil, err
	}
	return b, nil
}

// check asks the daemon for what the config names.
func (b *Backend) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, inspectBound)
	defer cancel()
	host := b.api.DaemonHost()
	if _, err := b.api.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, host, err)
	}
	b.local = strings.HasPrefix(host, "unix://")
	if b.cfg.Image != "" {
		if _, err := b.api.ImageInspect(ctx, b.cfg.Image); err != nil {
			if isNotFound(err) {
				return fmt.Errorf("%w: %q is not on the daemon at %s (nothing is pulled: build, load or pull it first)", ErrNoImage, b.cfg.Image, host)
			}
			return fmt.Errorf("%w at %s: inspect image %q: %v", ErrUnreachable, host, b.cfg.Image, err)
		}
		return nil
	}
	ci, err := b.api.ContainerInspect(ctx, b.cfg.Container, client.ContainerInspectOptions{})
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("%w: no container %q on the daemon at %s", ErrNoContainer, b.cfg.Container, host)
		}
		return fmt.Errorf("%w at %s: inspect container %q: %v", ErrUnreachable, host, b.cfg.Container, err)
	}
	if ci.Container.State == nil || !ci.Container.State.Running {
		return fmt.Errorf("%w: container %q is not running", ErrNoContainer, b.cfg.Container)
	}
	return nil
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// Type is the name the backend registers under.
func (b *Backend) Type() string { return b.cfg.BackendType }

// errShutdown is returned by Spawn once the backend has been closed.
var errShutdown = fmt.Errorf("terminal-docker: backend is shut down: %w", termapi.ErrBackendClosed)

// Spawn creates and starts the session's container (or picks the existing
// one), starts bash in it with a TTY, and returns once the shell shows its
// first prompt. If ctx ends first, or anything fails, what was started is
// removed again before Spawn returns.
func (b *Backend) Spawn(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	// The container is the agent's boundary; a sandbox mode inside it is
	// not enforced, so it is refused. A container dsh creates gets the
	// policy's limits; an existing one has none that dsh set, so limits
	// are refused there.
	if err := spec.Policy.Check(termapi.Capabilities{Limits: b.limitsFor(spec.Policy.Limits)}); err != nil {
		return nil, fmt.Errorf("terminal-docker: %w", err)
	}
	if b.sessions.Closed() {
		return nil, errShutdown
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(b.cfg.TimeoutMs)*time.Millisecond)
	defer cancel()
	link, err := b.open(ctx, spec)
	if err != nil {
		return nil, err
	}
	o := inband.Options{
		ID:         spec.SessionID,
		OwnerID:    spec.OwnerID,
		Name:       spec.Name,
		Attachable: true,
		Limits:     b.limitsFor(spec.Policy.Limits),
		Prefix:     "terminal-docker",
		Where:      "container " + shortID(link.container),
		StartErr:   ErrShell,
		Echoes:     true,
		Idle:       time.Duration(b.cfg.IdleSilenceMs) * time.Millisecond,
		Timeout:    time.Duration(b.cfg.TimeoutMs) * time.Millisecond,
		PID:        link.shell.PID,
		StartProof: b.startProof(link),
		WriteFile:  link.files.Write,
		Log:        b.log.With("session", spec.SessionID, "container", shortID(link.container)),
		Forget:     b.sessions.Remove,
	}
	s, err := inband.Start(ctx, link, "", o)
	if err != nil {
		return nil, err
	}
	if !b.sessions.Add(s) {
		return nil, backendkit.Refuse(ctx, s, inspectBound, errShutdown)
	}
	return s, nil
}

// open starts the shell: in a new container, or in the configured one.
func (b *Backend) open(ctx context.Context, spec termapi.SpawnSpec) (*execLink, error) {
	l := &execLink{api: b.api, log: b.log, eof: make(chan struct{}), container: b.cfg.Container}
	l.files = inband.NewFarFiles(l.run)
	workdir := ""
	if b.cfg.Image != "" {
		id, mounted, err := b.create(ctx, spec)
		if err != nil {
			return nil, err
		}
		l.container, l.owned = id, true
		if mounted {
			workdir = b.cfg.MountPath
		}
	}
	fail := func(err error) (*execLink, error) {
		if cerr := l.Close(); cerr != nil {
			b.log.Warn("removing the container of a failed start", "container", l.container, "err", cerr)
		}
		return nil, err
	}
	sz := spec.Policy.Size.Or(termapi.DefaultSize)
	size := client.ConsoleSize{Height: uint(sz.Rows), Width: uint(sz.Cols)}
	user := b.cfg.User
	if l.owned {
		user = b.user()
	}
	l.user = user
	ex, err := b.api.ExecCreate(ctx, l.container, client.ExecCreateOptions{
		User:         user,
		TTY:          true,
		ConsoleSize:  size,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		// NUL: a byte no send can type, so no typed text detaches.
		DetachKeys: "ctrl-@",
		Env:        b.env(spec),
		WorkingDir: workdir,
		Cmd:        []string{b.cfg.Shell, "--noediting", "--noprofile", "--norc", "-i"},
	})
	if err != nil {
		return fail(fmt.Errorf("%w: container %s: create the shell's exec: %v", ErrShell, shortID(l.container), err))
	}
	l.exec = ex.ID
	l.conn, err = b.api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: true, ConsoleSize: size})
	if err != nil {
		return fail(fmt.Errorf("%w: container %s: start the shell: %v", ErrShell, shortID(l.container), err))
	}
	// Daemons older than API 1.42 ignore the size given at creation.
	_, _ = b.api.ExecResize(ctx, ex.ID, client.ExecResizeOptions(size))
	if b.local {
		l.shell = b.hostShell(ctx, ex.ID, l.container)
	}
	return l, nil
}

// hostShell names the exec's process on this machine, or returns the zero
// identity when it cannot: the stdin proof and the session sweep then do
// without it. The daemon reports the pid in its own pid namespace, which
// is this process's only if the process of that pid here is in the
// container's cgroup (its path names the container's id, with the
// cgroupfs and the systemd drivers alike).
func (b *Backend) hostShell(ctx context.Context, execID, containerID string) proc.Identity {
	t := time.NewTimer(0)
	defer t.Stop()
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		select {
		case <-ctx.Done():
			return proc.Identity{}
		case <-t.C:
		}
		// The attach has started the exec: one that is not running has
		// ended already, and there is nothing to watch.
		ei, err := b.api.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil || !ei.Running {
			return proc.Identity{}
		}
		if ei.PID > 0 {
			id, err := proc.IdentityOf(ei.PID)
			cg, cgErr := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", ei.PID))
			if err != nil || cgErr != nil || !bytes.Contains(cg, []byte(containerID)) {
				b.log.Debug("the exec's pid does not name its process here; no stdin proof", "pid", ei.PID)
				return proc.Identity{}
			}
			return id
		}
		t.Reset(delay)
	}
}

// create creates and starts the session's container, and reports whether
// a workspace is mounted.
func (b *Backend) create(ctx context.Context, spec termapi.SpawnSpec) (string, bool, error) {
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(b.cfg.Network),
		Init:        ptr(true), // reaps the orphans of background jobs
	}
	ws := b.cfg.Workspace
	if ws == "" {
		ws = spec.Cwd
	}
	if ws != "" {
		hc.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: ws, Target: b.cfg.MountPath}}
	}
	for _, spec := range b.cfg.Mounts {
		m, _ := parseMount(spec) // valid: checked at load
		hc.Mounts = append(hc.Mounts, m)
	}
	lim := b.limitsFor(spec.Policy.Limits)
	if lim.Memory > 0 {
		hc.Memory = lim.Memory
		hc.MemorySwap = lim.Memory // no swap beyond the limit
	}
	if lim.CPU > 0 {
		hc.NanoCPUs = int64(lim.CPU * 1e9)
	}
	if lim.Pids > 0 {
		hc.PidsLimit = ptr(int64(lim.Pids))
	}
	// Nothing the image's root could do to the host's project: no
	// capability but those configured, no gain through setuid programs,
	// no setuid file made (see securityOpts).
	hc.CapDrop = []string{"ALL"}
	hc.CapAdd = b.cfg.CapAdd
	hc.SecurityOpt = b.securityOpts
	cc := &container.Config{
		Image: b.cfg.Image,
		User:  b.user(),
		// The container's own process waits on a stdin nobody writes:
		// the shells are execs, and the container lives until removed.
		Cmd:       []string{b.cfg.Shell, "--noprofile", "--norc"},
		OpenStdin: true,
		Labels:    b.labels(spec.SessionID, spec.OwnerID),
	}
	name := "dsh-" + backendkit.SafeName(spec.SessionID) + "-" + randomSuffix()
	created, err := b.api.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cc, HostConfig: hc, Name: name})
	if err != nil {
		return "", false, fmt.Errorf("%w: create a container from %q: %v", ErrShell, b.cfg.Image, err)
	}
	if _, err := b.api.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inspectBound)
		defer cancel()
		_, _ = b.api.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true})
		return "", false, fmt.Errorf("%w: start container %s: %v", ErrShell, shortID(created.ID), err)
	}
	return created.ID, ws != "", nil
}

// env is the shell's environment: the protocol's needs, then the config's.
func (b *Backend) env(spec termapi.SpawnSpec) []string {
	env := []string{"TERM=dumb", "PAGER=cat", "GIT_PAGER=cat", "DSH_SHELL=1", "DSH_SESSION_ID=" + spec.OwnerID, "DSH_PTY_SESSION_ID=" + spec.SessionID}
	for _, k := range slices.Sorted(maps.Keys(b.cfg.Env)) {
		env = append(env, k+"="+b.cfg.Env[k])
	}
	return env
}

// Close closes every live session (removing their containers) and the
// client, and makes later spawns fail.
func (b *Backend) Close(ctx context.Context) error {
	return errors.Join(b.sessions.Close(ctx, "backend closed"), b.api.Close())
}

// user is who a created container's shell runs as: the configured user,
// else dsh's own uid and gid, never the image's (often root) by default.
func (b *Backend) user() string {
	if b.cfg.User != "" {
		return b.cfg.User
	}
	return strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
}

func ptr[T any](v T) *T { return &v }

func shortID(id string) string { return id[:min(12, len(id))] }

func randomSuffix() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// limits are the limits a session's container runs under: those the
// config gives the containers dsh creates, with the defaults where it
// gives none; none in an existing container.
func (b *Backend) limitsFor(policy termapi.Limits) termapi.Limits {
	l := b.limits()
	if b.cfg.Image == "" {
		return l
	}
	if policy.Memory > 0 {
		l.Memory = policy.Memory
	}
	if policy.Pids > 0 {
		l.Pids = policy.Pids
	}
	if policy.CPU > 0 {
		l.CPU = policy.CPU
	}
	return l
}

// limits are the configured limits of the containers dsh creates (see
// limitsFor for a spawn's).
func (b *Backend) limits() termapi.Limits {
	if b.cfg.Image == "" {
		return termapi.Limits{}
	}
	l := termapi.Limits{CPU: b.cfg.CPUs}
	if pids := cmp.Or(b.cfg.PidsLimit, defaultPidsLimit); pids > 0 {
		l.Pids = int(pids)
	}
	if mem := cmp.Or(b.cfg.Memory, defaultMemory); mem != memoryUnlimited {
		l.Memory, _ = units.RAMInBytes(mem) // checked at load
	}
	return l
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
