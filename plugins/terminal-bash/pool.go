//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// warmPool keeps shells started and idle at their prompt
// (Config.WarmShells): a spawn with the backend's own policy takes one
// instead of starting bash, and the pool starts another in the
// background, through the same spawn slots as every spawn.
//
// A waiting shell belongs to no owner. It was started as every shell is,
// in "/", with the environment a fresh shell of the backend gets but for
// the two per-session variables, and with cgroups named after a pool id;
// it has run one command (warmUp). The hand-over (handOver) makes it the
// session's: the cgroups get the session's names where the shell can see
// them (renameCgroups), and one line typed through the shell protocol
// exports DSH_SESSION_ID and DSH_PTY_SESSION_ID, changes to the session's
// directory with PWD and OLDPWD as a shell started there has them,
// restarts SECONDS, and leaves the history, $_ and $? as a new shell has
// them (handOverTail). What a hand-over cannot change is the shell's own
// /proc/PID/environ (its environment at exec; exported variables are what
// commands get) and its start time.
type warmPool struct {
	b    *Backend
	size int

	mu       sync.Mutex
	ready    []*session // at their prompt, unclaimed, oldest first
	starting int
	closed   bool
	wg       sync.WaitGroup
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	// changed is closed, and replaced, whenever ready grows (waitReady).
	changed chan struct{}
	// started counts shells started for the pool, for the tests.
	started atomic.Int64
}

// poolDir is where waiting shells wait: a directory every machine has
// and no owner's, so that the cd of the hand-over always changes it.
const poolDir = "/"

// poolRetry is how long the pool waits after a shell failed to start:
// what failed would fail again at once.
const poolRetry = 5 * time.Second

var poolSeq atomic.Uint64

// poolStarts bounds the shells a pool starts at once, below the spawn
// slots: a refill is background work, and a storm of new sessions, which
// empties the pool, needs the CPU for their own calls and spawns more.
var poolStarts = max(1, runtime.NumCPU()/2)

func startPool(b *Backend, size int) *warmPool {
	p := &warmPool{b: b, size: size, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{})}
	go p.run()
	p.refill()
	return p
}

// refill asks the pool to top itself up.
func (p *warmPool) refill() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *warmPool) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case <-p.kick:
		}
		p.mu.Lock()
		for !p.closed && len(p.ready)+p.starting < p.size && p.starting < poolStarts {
			p.starting++
			p.wg.Add(1)
			go p.start()
		}
		p.mu.Unlock()
	}
}

// start starts one waiting shell.
func (p *warmPool) start() {
	defer p.wg.Done()
	p.started.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), p.b.cfg.timeout)
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	id := "pty-warm-" + strconv.FormatUint(poolSeq.Add(1), 10)
	s, err := p.b.spawn(ctx, termapi.SpawnSpec{SessionID: id, Cwd: poolDir}, true)
	if err == nil {
		if err = warmUp(ctx, s); err != nil {
			p.b.closeUnpublished(s, "warm-up failed")
			s = nil
		}
	}
	p.mu.Lock()
	p.starting--
	if err == nil {
		p.refill() // the next one, if the pool is not full
	}
	keep := err == nil && !p.closed
	if keep {
		p.ready = append(p.ready, s)
		close(p.changed)
		p.changed = make(chan struct{})
	}
	p.mu.Unlock()
	switch {
	case err != nil:
		select {
		case <-p.stop:
			return
		default:
		}
		p.b.log.Warn("starting a warm shell", "err", err)
		select {
		case <-p.stop:
		case <-time.After(poolRetry):
			p.refill()
		}
	case !keep:
		p.b.closeUnpublished(s, "warm pool closed")
	}
}

// warmUp runs a first command in a waiting shell, captured as the bash
// tool's are, so that the terminal commands write to is made before an
// owner comes: the session's first command takes it as later ones do.
// The hand-over removes the trace it leaves in the history.
func warmUp(ctx context.Context, s *session) error {
	sn, err := s.Exec(ctx, termapi.ExecRequest{Command: ":", Captured: true})
	if err != nil {
		return err
	}
	res, err := sn.Wait(ctx)
	if err != nil {
		return err
	}
	if res.Exec == nil || res.Exec.State != termapi.ExecCompleted || res.Exec.ExitCode != 0 {
		return fmt.Errorf("warm-up settled %s: %q", res.Reason, res.Viewport)
	}
	return nil
}

// take returns a waiting shell, or nil when none is ready, and asks for
// another.
func (p *warmPool) take() *session {
	p.mu.Lock()
	defer p.refill()
	defer p.mu.Unlock()
	for len(p.ready) > 0 {
		s := p.ready[0]
		p.ready[0] = nil
		p.ready = p.ready[1:]
		if s.Status() == termapi.Running {
			return s
		}
		// Its shell ended while it waited (killed from outside).
		go p.b.closeUnpublished(s, "warm shell ended while waiting")
	}
	return nil
}

// waitReady returns once n shells wait in the pool, or when ctx ends: for
// a deployment that wants its pool full before it serves, and for tests.
func (p *warmPool) waitReady(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		got, changed := len(p.ready), p.changed
		p.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d warm shells ready: %w", got, n, context.Cause(ctx))
		}
	}
}

// close stops the pool and closes its waiting shells.
func (p *warmPool) close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	p.wg.Wait()
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	errs := make([]error, len(ready))
	var wg sync.WaitGroup
	for i, s := range ready {
		// A waiting shell ran nothing of anyone's: it is killed at once,
		// not given the grace periods of a session's close, which a host
		// closing a thousand of them cannot wait through.
		s.killNow()
		wg.Go(func() { errs[i] = s.Close(ctx, "terminal-bash backend unloaded") })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// killAll kills the waiting shells at once (Backend.KillAll).
func (p *warmPool) killAll() {
	p.mu.Lock()
	ready := p.ready
	p.mu.Unlock()
	for _, s := range ready {
		s.killNow()
	}
}

// AwaitWarm returns once n shells wait in the warm pool (at most its
// size), or when ctx ends; at once without a pool. For a deployment that
// wants its pool full before it serves, and for benchmarks.
func (b *Backend) AwaitWarm(ctx context.Context, n int) error {
	if b.pool == nil {
		return nil
	}
	return b.pool.waitReady(ctx, min(n, b.pool.size))
}

// WarmShells is how many shells wait in the warm pool now (the
// terminals service's dsh_warm_shells).
func (b *Backend) WarmShells() int {
	if b.pool == nil {
		return 0
	}
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	return len(b.pool.ready)
}

// fits reports whether a spawn may take a waiting shell: one that asks
// for what the backend gives by default (its sandbox mode, limits and
// terminal size), which is what the waiting shells run under.
func (b *Backend) fits(spec termapi.SpawnSpec) bool {
	pol := spec.Policy
	return (pol.Sandbox == "" || pol.Sandbox == b.sandbox.Mode) &&
		b.effectiveLimits(pol.Limits) == b.limits &&
		(pol.Size.IsZero() || pol.Size == termapi.Size{Rows: b.cfg.rows, Cols: b.cfg.cols})
}

// unpoolable says why the backend's shells cannot wait in a pool, or ""
// when they can.
func (b *Backend) unpoolable() string {
	if b.sandbox.confined() {
		return "sandboxed shells are not pooled: a sandbox's view of files is made for one owner's workspace"
	}
	for c, on := range map[string]bool{"memory": b.limits.Memory > 0, "pids": b.limits.Pids > 0, "cpu": b.limits.CPU > 0} {
		if on && b.limitHost.Mechanism(c) == "cgroup v2" {
			return "a cgroup v2 controller enforces the " + c + " limit, in a cgroup that cannot be renamed"
		}
	}
	return ""
}

// takeWarm gives spec's session a waiting shell, or returns nil (the
// pool is empty, or the hand-over failed and the shell was closed).
func (b *Backend) takeWarm(ctx context.Context, spec termapi.SpawnSpec) (*session, error) {
	s := b.pool.take()
	if s == nil {
		return nil, nil
	}
	if err := b.handOver(ctx, s, spec); err != nil {
		b.closeUnpublished(s, "hand-over failed")
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		b.log.Warn("a warm shell could not be handed over; starting one", "err", err)
		return nil, nil
	}
	if !b.sessions.Add(s) {
		return nil, backendkit.Refuse(context.Background(), s, b.closeBudget(), errShutdown)
	}
	return s, nil
}

// handOver makes the waiting shell s the session of spec (see warmPool).
func (b *Backend) handOver(ctx context.Context, s *session, spec termapi.SpawnSpec) error {
	// What the shell was started with, as a fresh one would be.
	env := shellEnv(&b.env, b.environ(), spec.OwnerID, spec.SessionID, "")
	dir, err := shellDir(spec.Cwd, env)
	if err != nil {
		return err
	}
	if err := b.renameCgroups(s, spec.SessionID); err != nil {
		return err
	}
	sn, err := s.exec(ctx, termapi.ExecRequest{Command: handOverLine(spec.OwnerID, spec.SessionID, dir, oldPWD(env)), Captured: true}, handOverTail(env, b.shellPath))
	if err != nil {
		return err
	}
	res, err := sn.Wait(ctx)
	if err != nil {
		return err
	}
	if res.Exec == nil || res.Exec.State != termapi.ExecCompleted || res.Exec.ExitCode != 0 {
		return fmt.Errorf("hand-over line settled %s: %q", res.Reason, res.Viewport)
	}
	s.mu.Lock()
	s.id, s.owner, s.name = spec.SessionID, spec.OwnerID, spec.Name
	s.Who = "terminal-bash: session " + spec.SessionID
	s.files = &hostFiles{owner: spec.OwnerID}
	s.logID.set(spec.SessionID)
	s.mu.Unlock()
	return nil
}

// renameCgroups gives the waiting shell's cgroups the names a shell
// started for session would have. cgroup v1 renames in place. cgroup v2
// renames nothing: a shell in a cgroup namespace of its own (the usual
// case) sees its leaf as "/" whatever its name, and moving it would put it
// outside its namespace's root, so its leaf keeps the pool's name; a
// shell without one is moved to a leaf of the session's name.
//
// A shell in a cgroup namespace of its own sees none of the names, which
// are for whoever looks from outside: its v1 leaves are renamed in the
// background, off the session's first call, since a rename waits for
// the kernel's one cgroup lock, which a storm of new sessions and the
// shells they start contend for.
func (b *Backend) renameCgroups(s *session, session string) error {
	if s.target.Cgroup == nil && s.leaves == nil {
		return nil
	}
	name, err := leafName(session)
	if err != nil {
		return err
	}
	if ownCgroupNamespace(s.pid) {
		if s.leaves != nil {
			b.renames.Go(func() {
				if err := s.leaves.Rename(name); err != nil {
					b.log.Debug("the shell's cgroups keep the warm pool's name", "session", session, "err", err)
				}
			})
		}
		return nil
	}
	if s.target.Cgroup != nil {
		if err := s.target.Cgroup.Move(name); err != nil {
			return err
		}
	}
	if s.leaves != nil {
		return s.leaves.Rename(name)
	}
	return nil
}

// ownCgroupNamespace reports whether pid is in another cgroup namespace
// than dsh.
func ownCgroupNamespace(pid int) bool {
	mine, err1 := os.Readlink("/proc/self/ns/cgroup")
	its, err2 := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/cgroup")
	return err1 == nil && err2 == nil && mine != its
}

// handOverLine is the command that makes a waiting shell the session's.
// OLDPWD is left as bash leaves it at its start: the inherited value
// when it names a directory, else exported with no value.
func handOverLine(owner, session, dir string, oldpwd string) string {
	var b strings.Builder
	b.WriteString(`builtin export DSH_SESSION_ID=` + shellQuote(owner) + ` DSH_PTY_SESSION_ID=` + shellQuote(session))
	b.WriteString(`;builtin cd -- ` + shellQuote(dir) + ` || builtin return 1`)
	if oldpwd != "" {
		b.WriteString(`;OLDPWD=` + shellQuote(oldpwd))
	} else {
		b.WriteString(`;builtin unset OLDPWD;builtin export OLDPWD`)
	}
	b.WriteString(`;SECONDS=0`)
	return b.String()
}

// handOverTail runs last on the hand-over's line, after its end is
// reported: it leaves $_ (the last word of the last command) as a new
// shell has it at its first command, the inherited _ or else the shell's
// argv[0], and $? 0.
func handOverTail(env []string, argv0 string) string {
	if v, ok := lookupEnvOK(env, "_"); ok {
		argv0 = v
	}
	// A new shell saves the first line it reads in its history, though
	// the option reads off: the plumbing's "set +o history" runs in
	// PROMPT_COMMAND, and bash then restores what it saves lines by.
	// Bash does the same around a trap, so the hand-over's line goes
	// from the history and the same state is made again: the option on
	// (first: with no line of the session left, turning it on would read
	// the history file again), then off in a DEBUG trap that removes
	// itself.
	return `\builtin set -o history;\builtin history -d -1;\builtin trap '\builtin set +o history;\builtin trap - DEBUG' DEBUG;\builtin : ` + shellQuote(argv0)
}

// shellDir is the directory a shell started in cwd calls PWD: the
// inherited PWD when it names cwd (bash keeps that logical name), else
// cwd with its symbolic links resolved (what getcwd says).
func shellDir(cwd string, env []string) (string, error) {
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	if pwd, _ := lookupEnvOK(env, "PWD"); filepath.IsAbs(pwd) && sameFile(pwd, real) {
		return pwd, nil
	}
	return real, nil
}

// oldPWD is what bash keeps of an inherited OLDPWD: the value when it
// names a directory, else nothing.
func oldPWD(env []string) string {
	v, _ := lookupEnvOK(env, "OLDPWD")
	if fi, err := os.Stat(v); v != "" && err == nil && fi.IsDir() {
		return v
	}
	return ""
}

// lookupEnvOK is the last value of name in env, as exec gives it.
func lookupEnvOK(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// closeUnpublished closes a session no caller has: a waiting shell.
func (b *Backend) closeUnpublished(s *session, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.closeBudget())
	defer cancel()
	if err := s.Close(ctx, reason); err != nil {
		b.log.Warn("closing a warm shell", "err", err)
	}
}

// logID is a session's id in its log lines: a waiting shell's changes at
// its hand-over, while its goroutines may be logging.
type logID struct{ v atomic.Pointer[string] }

func newLogID(id string) *logID {
	l := &logID{}
	l.set(id)
	return l
}

func (l *logID) set(id string) { l.v.Store(&id) }

// LogValue implements slog.LogValuer.
func (l *logID) LogValue() slog.Value { return slog.StringValue(*l.v.Load()) }
