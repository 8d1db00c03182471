//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshdev/dsh/internal/private"
	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal-bash/internal/sandbox"
	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Backend starts bash sessions on PTYs. It remembers the sessions it
// started until they are closed, so that the plugin's unload can close
// them (Close) and a dying host can kill them at once (KillAll).
type Backend struct {
	typ       string
	shellPath string
	shellArgs []string
	cfg       settings
	log       *slog.Logger
	// environ returns the environment the shell's is derived from, through
	// env.
	environ func() []string
	env     EnvPolicy
	sandbox SandboxConfig
	// cmdTerms: commands get terminals of their own (Config.CommandTerminals).
	cmdTerms bool
	// checked holds the outcome of checking a mode that spawns asked for
	// instead of the configured one.
	checkMu sync.Mutex
	checked map[termapi.SandboxMode]error
	// noCgroup is set once creating a cgroup has failed: it will not work
	// later either, and the tracker alone is used from then on.
	noCgroup atomic.Bool
	// limitHost is how this machine enforces limits, found at load;
	// limits are the configured ones, the default of every spawn.
	limitHost *proc.LimitHost
	limits    termapi.Limits

	sessions backendkit.Sessions[*session]
	// pool keeps shells waiting for new sessions (Config.WarmShells); nil
	// without. renames are the renames of handed-over shells' cgroups
	// still running (renameCgroups).
	pool    *warmPool
	renames sync.WaitGroup
	// abi is the Landlock ABI the sandbox uses; 0 unconfined.
	abi int
}

// Describe says what a shell of this backend is, for dsh check --probe:
// the shell, and the sandbox with the Landlock ABI it will use.
func (b *Backend) Describe() string {
	d := b.shellPath
	if !b.sandbox.confined() {
		return d + ", no sandbox (" + string(termapi.SandboxFullAccess) + ")"
	}
	net := "network on"
	if !b.sandbox.Network {
		net = "network off"
	}
	return fmt.Sprintf("%s, sandbox %s with Landlock ABI %d, %s", d, b.sandbox.Mode, b.abi, net)
}

// NewBackend returns a backend for cfg, which must be valid. log may be nil.
func NewBackend(cfg *Config, log *slog.Logger) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abi, err := checkSandbox(&cfg.Sandbox)
	if err != nil {
		return nil, err
	}
	if cfg.Sandbox.confined() {
		log.Info("shells are confined", "mode", cfg.Sandbox.Mode, "network", cfg.Sandbox.Network, "landlockABI", abi)
	}
	limitHost := proc.FindLimitHost(procLimits(limitsOf(cfg.Limits)))
	if err := checkLimitsAtLoad(limitHost, cfg.Limits); err != nil {
		return nil, err
	}
	if l := limitsOf(cfg.Limits); !l.IsZero() {
		log.Info("shells are limited", "memory", cfg.Limits.Memory.String(), "pids", l.Pids, "cpu", l.CPU,
			"memoryBy", limitHost.Mechanism("memory"), "pidsBy", limitHost.Mechanism("pids"), "cpuBy", limitHost.Mechanism("cpu"))
	}
	keepInheritedFromShells()
	path, args := cfg.shell()
	b := &Backend{
		typ:       cfg.BackendType,
		shellPath: path,
		shellArgs: args,
		cfg:       newSettings(cfg),
		log:       log,
		environ:   os.Environ,
		env:       cfg.Env,
		sandbox:   cfg.Sandbox,
		cmdTerms:  cfg.CommandTerminals,
		checked:   make(map[termapi.SandboxMode]error),
		abi:       abi,
		limitHost: limitHost,
		limits:    limitsOf(cfg.Limits),
	}
	if cfg.WarmShells > 0 {
		if why := b.unpoolable(); why != "" {
			log.Info("no warm shells", "reason", why)
		} else {
			b.pool = startPool(b, cfg.WarmShells)
		}
	}
	return b, nil
}

// Type is the name the backend registers under.
func (b *Backend) Type() string { return b.typ }

// errShutdown is returned by Spawn once the backend has been closed.
var errShutdown = errorf("backend is shut down: %w", termapi.ErrBackendClosed)

// Spawn starts bash and returns once it shows its first prompt. If ctx
// ends first, or startup fails, the session is closed again before Spawn
// returns; if that close fails too, the error is a *termapi.CleanupError.
func (b *Backend) Spawn(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if err := b.checkPolicy(spec.Policy); err != nil {
		return nil, err
	}
	if spec.Cwd != "" {
		fi, err := os.Stat(spec.Cwd)
		if err != nil {
			return nil, errorf("working directory: %w", err)
		}
		if !fi.IsDir() {
			return nil, errorf("working directory %s is not a directory", spec.Cwd)
		}
	}
	if b.pool != nil && b.fits(spec) {
		s, err := b.takeWarm(ctx, spec)
		if s != nil || err != nil {
			return s, err
		}
	}
	s, err := b.spawn(ctx, spec, false)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// spawn starts a shell and waits for its first prompt: a session's, or
// one for the warm pool (pooled), which the backend does not list.
func (b *Backend) spawn(ctx context.Context, spec termapi.SpawnSpec, pooled bool) (*session, error) {
	// A storm of first calls would fork a thousand shells at once, and
	// each would take seconds on a thrashing machine: they start a few at
	// a time instead, in arrival order, and the rest wait their turn.
	select {
	case spawnSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, errorf("waiting to start a shell: %w", context.Cause(ctx))
	}
	defer func() { <-spawnSlots }()
	s, first, err := b.start(spec, pooled)
	if err != nil {
		return nil, err
	}
	if err := s.awaitStartup(ctx, first); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.closeBudget())
		defer cancel()
		if cerr := s.Close(cctx, "PTY startup failed"); cerr != nil {
			return nil, &termapi.CleanupError{StartErr: err, CleanupErr: cerr}
		}
		return nil, err
	}
	return s, nil
}

// checkPolicy refuses, before anything starts, what of a spawn's policy
// the backend cannot give: resource limits this machine cannot enforce
// and a terminal size out of range. The sandbox mode is checked where the
// sandbox is made (sandboxFor).
func (b *Backend) checkPolicy(p termapi.Policy) error {
	if err := b.checkLimits(b.effectiveLimits(p.Limits)); err != nil {
		return errorf("%w", err)
	}
	if !p.Size.IsZero() {
		if err := p.Size.Validate(); err != nil {
			return errorf("%w", err)
		}
	}
	return nil
}

// spawnSlots bounds the shells of this process that start at once: two
// per CPU keep the machine busy without thrashing.
var spawnSlots = make(chan struct{}, max(2, 2*runtime.NumCPU()))

// closeBudget bounds a close nobody else bounds (a failed startup): enough
// for every grace period proc.Terminate may wait through, and some.
func (b *Backend) closeBudget() time.Duration { return 8*b.cfg.grace + 5*time.Second }

// cgroupSeq makes cgroup names unique within this process: two services
// (isolated realms) can mint the same session id.
var cgroupSeq atomic.Uint64

// start allocates the PTY and the control channel, starts the shell (in
// its own cgroup when possible, confined when the sandbox says so), and
// launches the session.
func (b *Backend) start(spec termapi.SpawnSpec, pooled bool) (*session, *send, error) {
	size := spec.Policy.Size.Or(termapi.Size{Rows: b.cfg.rows, Cols: b.cfg.cols})
	ctl, err := newControl(os.Getpid(), b.log)
	if err != nil {
		return nil, nil, errorf("%w", err)
	}
	env := shellEnv(&b.env, b.environ(), spec.OwnerID, spec.SessionID, ctl.hook)
	pol, env, err := b.confine(spec, ctl, env)
	if err != nil {
		ctl.close()
		return nil, nil, errorf("%w", err)
	}
	// A shell confined to a mode that restricts files gets its terminal
	// from the sandbox, in a devpts instance of its own.
	var term *ptyPair
	if !pol.OwnTerminal() {
		if term, err = openTerminal(size.Rows, size.Cols); err != nil {
			ctl.close()
			return nil, nil, errorf("%w", err)
		}
	}
	cmd, term, cg, lv, err := b.startInCgroup(spec, env, term, size, pol, b.effectiveLimits(spec.Policy.Limits))
	if err != nil {
		ctl.close()
		return nil, nil, err
	}
	pid := cmd.Process.Pid
	// fail releases what start made.
	fail := func(err error) (*session, *send, error) {
		cmd.Process.Kill()
		cmd.Wait()
		term.close()
		ctl.close()
		if lv != nil {
			lv.Close()
		}
		if cg != nil {
			cg.Close()
		}
		return nil, nil, err
	}
	// The shell is our unreaped child, so its /proc entry is there.
	shell, err := proc.IdentityOf(pid)
	if err != nil {
		return fail(errorf("identify shell %d: %w", pid, err))
	}
	if err := boundShellTasks(pid); err != nil {
		return fail(errorf("%w", err))
	}
	return b.launch(spec, term, ctl, cmd, shell, cg, lv, pol, size, pooled)
}

// launch makes the session of a started shell, registers it and starts
// its goroutines. The session waits for the shell to install the plumbing
// and reach its prompt as an internal send, which launch returns.
func (b *Backend) launch(spec termapi.SpawnSpec, term *ptyPair, ctl *control, cmd *exec.Cmd, shell proc.Identity, cg *proc.Cgroup, lv *proc.Leaves, pol sandbox.Policy, size termapi.Size, pooled bool) (*session, *send, error) {
	lid := newLogID(spec.SessionID)
	s := newSession(spec.SessionID, b.cfg, b.log.With("session", lid), term, ctl)
	s.logID = lid
	s.shellCmd, s.pid, s.owner, s.name = cmd, shell.PID, spec.OwnerID, spec.Name
	s.size = size
	if b.cmdTerms {
		// Commands' terminals are made where the shell finds them: in its
		// own devpts instance when it has one, reached through its root.
		s.ptmx, s.ptsDir = "/dev/ptmx", "/dev/pts"
		if pol.OwnTerminal() {
			s.ptmx = "/proc/" + strconv.Itoa(shell.PID) + "/root/dev/pts/ptmx"
		}
	}
	s.caps = termapi.Capabilities{
		Exec:       true,
		Raw:        true,
		Resize:     true,
		Attach:     true,
		InputProof: true,
		Files:      true,
		HostFiles:  true,
		Sandbox:    termapi.SandboxMode(pol.Mode),
		EndCommand: true,
	}
	if lv != nil {
		s.leaves = lv
		s.caps.Limits = termapi.Limits(lv.Limits())
	}
	s.files = &hostFiles{owner: spec.OwnerID}
	s.target = proc.Target{Shell: shell, Tracker: proc.NewTracker(shell), Cgroup: cg}
	s.forget = b.sessions.Remove
	now := time.Now()
	sn := newSend(s, false, s.Deadline(now, 0), nil)
	sn.startup = true
	s.Holder, s.Live = sn, sn
	// Kept before its goroutines start, so that a backend closing now
	// closes it; refused after that, it is closed here once they run. A
	// warm shell is the pool's until its hand-over.
	added := pooled || b.sessions.Add(s)
	s.mu.Lock()
	s.boundaryLocked(now)
	s.armLocked()
	s.mu.Unlock()
	go s.readLoop()
	go s.readRecords()
	go s.waitShell()
	if !added {
		return nil, nil, backendkit.Refuse(context.Background(), s, b.closeBudget(), errShutdown)
	}
	return s, sn, nil
}

// confine returns the sandbox policy of the session's shell and its
// environment. A workspace-write shell gets a private temporary directory
// in its control directory (removed with it) as TMPDIR, since it may not
// write the shared one.
func (b *Backend) confine(spec termapi.SpawnSpec, ctl *control, env []string) (sandbox.Policy, []string, error) {
	sc, err := b.sandboxFor(spec.Policy.Sandbox)
	if err != nil {
		return sandbox.Policy{}, nil, err
	}
	if !sc.confined() {
		return sandbox.Policy{Mode: termapi.SandboxFullAccess, Network: true}, env, nil
	}
	workspace := spec.Cwd
	if workspace == "" {
		wd, err := os.Getwd()
		if err != nil {
			return sandbox.Policy{}, nil, fmt.Errorf("sandbox workspace: %w", err)
		}
		workspace = wd
	}
	tmp := ""
	if sc.Mode == termapi.SandboxWorkspaceWrite {
		tmp = filepath.Join(ctl.dir, "tmp")
		if err := os.Mkdir(tmp, 0o700); err != nil {
			return sandbox.Policy{}, nil, fmt.Errorf("sandbox temporary directory: %w", err)
		}
		env = append(env, "TMPDIR="+tmp)
	}
	pol := sc.policy(workspace, tmp)
	pol.WritableFiles = []string{ctl.outPath}
	if pol.OwnTerminal() {
		// dsh's private directory holds the tokens of its HTTP fronts and
		// every other session's files: the shell sees only its own
		// control directory and its owner's directory (saved outputs).
		if dir, err := private.Dir(); err == nil && within(ctl.dir, dir) {
			owner, release, err := private.HoldOwnerDir(spec.OwnerID)
			if err != nil {
				return sandbox.Policy{}, nil, fmt.Errorf("sandbox: the owner's directory: %w", err)
			}
			pol.Private, pol.Keep = dir, []string{ctl.dir, owner}
			ctl.releaseOwner = release
		}
	}
	return pol, env, nil
}

// sandboxFor is the sandbox of a spawn that asks for mode: the configured
// one, or the configured one with the mode replaced (network and writable
// directories as configured). A mode other than the configured one is
// checked on first use, as the configured one was at load, and refused
// with what is missing if the kernel cannot enforce it.
func (b *Backend) sandboxFor(mode termapi.SandboxMode) (*SandboxConfig, error) {
	if mode == "" || mode == b.sandbox.Mode {
		return &b.sandbox, nil
	}
	sc := b.sandbox
	sc.Mode = mode
	if sc.Mode != termapi.SandboxWorkspaceWrite {
		sc.Workspace, sc.Writable = "", nil
	}
	if err := sc.validate("sandbox"); err != nil {
		return nil, fmt.Errorf("%w: %w", termapi.ErrSandboxUnsupported, err)
	}
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	checkErr, done := b.checked[mode]
	if !done {
		_, checkErr = checkSandbox(&sc)
		b.checked[mode] = checkErr
	}
	if checkErr != nil {
		return nil, fmt.Errorf("%w: %w", termapi.ErrSandboxUnsupported, checkErr)
	}
	return &sc, nil
}

// startInCgroup starts the shell, in a cgroup of its own where one can be
// made and in the cgroups of its limits, and returns the cgroup (nil
// without one) and the limits' cgroups (nil without limits or headroom to
// keep). The terminal is term, or the sandbox's when term is nil (see
// startShell); it is returned either way, and closed on an error.
func (b *Backend) startInCgroup(spec termapi.SpawnSpec, env []string, term *ptyPair, size termapi.Size, pol sandbox.Policy, limits termapi.Limits) (*exec.Cmd, *ptyPair, *proc.Cgroup, *proc.Leaves, error) {
	name, nameErr := leafName(spec.SessionID)
	cg := b.cgroupNamed(name, nameErr)
	lv, err := b.newLeaves(name, limits, cg)
	if err != nil {
		if cg != nil {
			cg.Close()
		}
		if term != nil {
			term.close()
		}
		return nil, nil, nil, nil, err
	}
	fd := -1
	if cg != nil {
		fd = cg.FD()
	}
	rows, cols := size.Rows, size.Cols
	var (
		cmd *exec.Cmd
		got *ptyPair
	)
	// start forks the shell, born in the limits' cgroups too.
	start := func(fd int) error {
		fork := func() error {
			cmd, got, err = startShell(b.shellPath, b.shellArgs, env, spec.Cwd, term, rows, cols, fd, pol)
			return err
		}
		if lv == nil {
			return fork()
		}
		return lv.Fork(fork)
	}
	err = start(fd)
	if err != nil && cg != nil && limits.IsZero() {
		// clone3 into a cgroup can be refused where creating one was not
		// (seccomp filters, older kernels): start without it. Only a start
		// that then succeeds shows the cgroup was the problem; a failure of
		// the shell's own (a missing binary or directory, a fork limit)
		// must not turn cgroups off for every later session.
		cgErr := err
		cg.Close()
		cg = nil
		if err = start(-1); err == nil {
			b.log.Info("starting the shell in its cgroup failed; relying on process tracking", "err", cgErr)
			b.noCgroup.Store(true)
		}
	}
	if err != nil {
		if lv != nil {
			lv.Close()
		}
		if cg != nil {
			cg.Close()
		}
		if term != nil {
			term.close()
		}
		// exec's error repeats the path ("fork/exec /bin/bsh: …"): say it once.
		if pe, ok := errors.AsType[*fs.PathError](err); ok && pe.Path == b.shellPath {
			err = pe.Err
		}
		return nil, nil, nil, nil, errorf("cannot start %s: %w", b.shellPath, err)
	}
	// Before the shell has read a command: everything it starts inherits
	// the score.
	if err := raiseOOMScore(cmd.Process.Pid); err != nil {
		b.log.Warn("the shell keeps dsh's OOM score: under memory pressure the kernel may end dsh before it", "err", err)
	}
	return cmd, got, cg, lv, nil
}

// newCgroup creates the cgroup of a session, or returns nil where cgroups
// cannot be used.
func (b *Backend) newCgroup(sessionID string) *proc.Cgroup {
	return b.cgroupNamed(leafName(sessionID))
}

// leafName names the cgroups of a session, unique in this process.
func leafName(sessionID string) (string, error) {
	return proc.LeafName(strconv.FormatUint(cgroupSeq.Add(1), 10) + "-" + backendkit.SafeName(sessionID))
}

// cgroupNamed creates the cgroup name (which failed to be made when err is
// set), or returns nil where cgroups cannot be used.
func (b *Backend) cgroupNamed(name string, err error) *proc.Cgroup {
	if b.noCgroup.Load() {
		return nil
	}
	var cg *proc.Cgroup
	if err == nil {
		cg, err = proc.NewCgroup(name)
	}
	if err != nil {
		if errors.Is(err, proc.ErrCgroupUnavailable) {
			b.noCgroup.Store(true)
		}
		b.log.Info("no cgroup for the shell; relying on process tracking", "err", err)
		return nil
	}
	return cg
}

// awaitStartup waits for the shell's first controlled prompt (the startup
// send sn settling), which becomes the MOTD.
func (s *session) awaitStartup(ctx context.Context, sn *send) error {
	select {
	case <-sn.Done():
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := sn.Result()
	switch res.Reason {
	case termapi.WaitStdinRead:
		s.motd = res.Viewport
		return nil
	case termapi.WaitSessionExit:
		if s.phase != sessionOpen {
			return s.Errorf("%w", termapi.ErrSessionClosing)
		}
		return errorf("shell exited during startup (%s): %q", res.Status, res.Viewport)
	}
	return errorf("shell did not reach its prompt within %v: %q", s.cfg.timeout, res.Viewport)
}

// Close stops new spawns and closes every session the backend still owns,
// concurrently, returning when they are all gone or joining the errors of
// those that are not; what those captured is then killed outright (see
// KillAll) rather than left behind. Sessions already closed by someone
// else are skipped; closing one twice is harmless anyway.
func (b *Backend) Close(ctx context.Context) error {
	var poolErr error
	if b.pool != nil {
		poolErr = b.pool.close(ctx)
	}
	err := errors.Join(poolErr, b.sessions.Close(ctx, "terminal-bash backend unloaded"))
	b.renames.Wait()
	if err != nil {
		// Whatever did not close is killed outright rather than left
		// behind.
		b.KillAll()
	}
	return err
}

// List describes the backend's open sessions.
func (b *Backend) List(context.Context) ([]termapi.Info, error) {
	return backendkit.List(&b.sessions), nil
}

// Attach returns the open session id: in process, the very session its
// spawn returned.
func (b *Backend) Attach(_ context.Context, id string) (termapi.Session, error) {
	return backendkit.Find(&b.sessions, id)
}

// KillAll sends SIGKILL to everything every open session captured, without
// waiting: for a host that is exiting and cannot afford Close. It never
// blocks on a process.
func (b *Backend) KillAll() {
	if b.pool != nil {
		b.pool.killAll()
	}
	for _, s := range b.sessions.List() {
		s.killNow()
	}
}

var _ termapi.Backend = (*Backend)(nil)

// within reports whether path lies below dir.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../")
}
