package backendplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dshdev/dsh/internal/envpolicy"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin/internal/backendpb"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// ErrPluginExited reports that the plugin process is gone: it crashed, was
// killed, or the host stopped it. Its sessions count as exited.
var ErrPluginExited = errors.New("backendplugin: the plugin process exited")

// ErrClosed reports a call on a Client after Close.
var ErrClosed = errors.New("backendplugin: the backend is closed")

// startTimeout bounds the start of a plugin process: the handshake and the
// Configure call.
const startTimeout = 30 * time.Second

// Defaults of Options.
const (
	// DefaultCallTimeout bounds every call of a plugin but Spawn and the
	// output of a send (a quiet command may run for hours).
	DefaultCallTimeout = 30 * time.Second
	// DefaultSpawnTimeout bounds a Spawn: a backend may connect to another
	// machine or start a container first.
	DefaultSpawnTimeout = 2 * time.Minute
	// DefaultHealthInterval is how often the host checks that a plugin
	// answers, and DefaultHealthTimeout how long it waits for the answer.
	DefaultHealthInterval = 5 * time.Second
	DefaultHealthTimeout  = 5 * time.Second
)

// slowCall is how long a call may go unanswered before the host checks, on
// the side, that the plugin still answers at all: a live plugin answers a
// health check in milliseconds, whatever its calls wait for.
const slowCall = time.Second

// closeCheck bounds the health check Close makes before it asks the plugin
// to shut down.
const closeCheck = 2 * time.Second

// killWait bounds the wait for a plugin process to go once it was sent
// SIGKILL.
const killWait = 5 * time.Second

// Options tune Open.
type Options struct {
	// Logger receives the plugin's log records and stderr; nil discards
	// them.
	Logger *slog.Logger
	// Env is the plugin process's environment; nil means dsh's own
	// without the names that look like credentials, and without the SSH
	// agent's (envpolicy.ForPlugin). The plugin runs as dsh's user and
	// passes its environment on to its shells.
	Env []string
	// CallTimeout, SpawnTimeout, HealthInterval and HealthTimeout: zero
	// selects the default; a negative HealthInterval turns the periodic
	// check off (a call that times out still checks).
	CallTimeout, SpawnTimeout, HealthInterval, HealthTimeout time.Duration
}

func (o *Options) fill() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Env == nil {
		o.Env = envpolicy.ForPlugin(os.Environ(), nil)
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&o.CallTimeout, DefaultCallTimeout}, {&o.SpawnTimeout, DefaultSpawnTimeout}, {&o.HealthInterval, DefaultHealthInterval}, {&o.HealthTimeout, DefaultHealthTimeout}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
}

// Client is an external backend: a plugin executable, started and
// configured, seen as a termapi.Backend. If the process dies, or stops
// answering (a health check every HealthInterval, and after any call that
// timed out), it is killed, its sessions exit, and the next Spawn starts a
// fresh process with the same config. Every call is bounded. Close stops
// it, within its context's deadline whatever the plugin does. A Client of
// a keeper (OpenKeeper) is the same over the keeper's socket, except that
// Close only leaves: the keeper lives on.
type Client struct {
	path   string
	config json.RawMessage
	log    *slog.Logger
	opts   Options
	typ    string
	// start runs the plugin (or finds or starts the keeper) and
	// configures it.
	start func(ctx context.Context) (*process, string, error)
	// keeper is set for a keeper's client.
	keeper *keeperClient

	mu     sync.Mutex
	proc   *process
	closed bool
	// watches are the health checks of the processes, awaited by Close.
	watches sync.WaitGroup
}

// process is one run of the plugin executable, or one connection to a
// keeper.
type process struct {
	rpc backendpb.BackendClient
	// gone reports that the process has exited (for a keeper: that the
	// connection has ended).
	gone func() bool
	// end kills the plugin; for a keeper it closes the connection, and
	// the keeper lives on.
	end     func()
	health  grpc_health_v1.HealthClient // nil for a keeper: nothing to kill
	pid     int
	proc    *os.Process // with its pidfd
	opts    *Options
	log     *slog.Logger
	lost    atomic.Bool            // a call found it unreachable, or it was killed
	why     atomic.Pointer[string] // why the host gave up on it, if it did
	probing atomic.Bool            // a health check after a slow call runs
	quit    chan struct{}          // closed when the host is done with it
	once    sync.Once
	wg      *sync.WaitGroup // the client's: its health checks
}

// exited reports whether the process is gone or out of reach.
func (p *process) exited() bool { return p.lost.Load() || p.gone() }

// lose marks the process as out of reach and kills it, so that it is
// surely gone; the next spawn starts another.
func (p *process) lose() {
	if !p.lost.Swap(true) {
		p.done()
		p.killHard()
		go p.end()
	}
}

// abandon kills a process that stopped answering, saying why: its
// sessions end with that reason.
func (p *process) abandon(why string) {
	p.why.CompareAndSwap(nil, &why)
	p.lose()
}

// lostReason is why the host gave up on the process; "" when it exited by
// itself.
func (p *process) lostReason() string {
	if w := p.why.Load(); w != nil {
		return *w
	}
	return ""
}

// done ends the process's health checks.
func (p *process) done() { p.once.Do(func() { close(p.quit) }) }

// killHard sends SIGKILL, which a stopped process cannot ignore either.
// go-plugin's own Kill first asks the plugin to shut down and waits for the
// answer as long as the process lives, which for a stopped one is forever.
// The signal goes through the process's pidfd (os.Process holds one), so a
// process already reaped is left alone, and never another one that took
// its pid.
func (p *process) killHard() {
	if p.proc != nil {
		_ = p.proc.Signal(syscall.SIGKILL)
	}
}

// check asks the plugin's health service whether it is serving, within
// timeout.
func (p *process) check(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := p.health.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: plugin.GRPCServiceName})
	if err != nil {
		return err
	}
	if resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		return fmt.Errorf("the plugin reports %s", resp.GetStatus())
	}
	return nil
}

// unresponsive is the reason a process that failed its health check was
// killed, as its sessions report it.
const unresponsive = "the backend plugin stopped answering and was killed"

// probe checks the process, and abandons it when it does not answer. It
// returns whether it did.
func (p *process) probe() bool {
	if p.health == nil || p.exited() {
		return false
	}
	err := p.check(p.opts.HealthTimeout)
	if err == nil || p.exited() {
		return false
	}
	p.log.Error("backend plugin stopped answering; killing it: its sessions end, and the next spawn starts it again", "pid", p.pid, "err", err)
	p.abandon(unresponsive)
	return true
}

// suspect runs a probe in the background after a call timed out, unless
// one runs already.
func (p *process) suspect() {
	if p.probing.Swap(true) {
		return
	}
	p.wg.Go(func() {
		defer p.probing.Store(false)
		p.probe()
	})
}

// watch checks the process every HealthInterval until the host is done
// with it.
func (p *process) watch() {
	if p.opts.HealthInterval < 0 || p.health == nil {
		<-p.quit
		return
	}
	t := time.NewTicker(p.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		if p.probe() {
			return
		}
	}
}

// bound derives the context of one call: ctx, and at most d. A call still
// unanswered after slowCall makes the process a suspect (see timedOut for
// one that runs out of its bound).
func (p *process) bound(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithTimeoutCause(ctx, d, errCallTimedOut)
	slow := time.AfterFunc(slowCall, p.suspect)
	return cctx, func() {
		slow.Stop()
		cancel()
	}
}

// errCallTimedOut is the cause of a call that ran past its bound.
var errCallTimedOut = errors.New("backendplugin: the plugin did not answer in time")

// timedOut reports whether a call under ctx (from bound) ran past its
// bound, and makes the process a suspect if so.
func (p *process) timedOut(ctx context.Context) bool {
	if errors.Is(context.Cause(ctx), errCallTimedOut) {
		p.suspect()
		return true
	}
	return false
}

// Open starts the plugin executable at path, checks the handshake and the
// protocol version, and configures the backend with config (a JSON object;
// nil means "{}"). On any error the process is killed before Open returns.
func Open(ctx context.Context, path string, config json.RawMessage, opts Options) (*Client, error) {
	if len(config) == 0 {
		config = json.RawMessage("{}")
	}
	opts.fill()
	c := &Client{path: path, config: config, log: opts.Logger, opts: opts}
	c.start = c.startPlugin
	p, typ, err := c.start(ctx)
	if err != nil {
		return nil, err
	}
	c.proc, c.typ = p, typ
	return c, nil
}

// startPlugin runs the executable and configures it.
func (c *Client) startPlugin(ctx context.Context) (*process, string, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	stderr := &tailBuffer{max: stderrTail}
	cmd := exec.Command(c.path)
	cmd.Env = slices.Clone(c.opts.Env)
	pc := plugin.NewClient(&plugin.ClientConfig{
		SkipHostEnv:      true, // cmd.Env is all it gets
		Stderr:           stderr,
		HandshakeConfig:  handshake,
		Plugins:          plugin.PluginSet{pluginName: &grpcPlugin{}},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Managed:          true,
		StartTimeout:     startTimeout,
		Logger:           newHCLogger(c.log),
		GRPCDialOptions: []grpc.DialOption{
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)),
		},
	})
	fail := func(err error) (*process, string, error) {
		pc.Kill()
		return nil, "", err
	}
	conn, err := pc.Client()
	if err != nil {
		// Kill waits for go-plugin's copy of the plugin's stderr to end:
		// the reason a plugin gives as it dies is read only then.
		pc.Kill()
		return nil, "", startError(c.path, err, stderr.String())
	}
	raw, err := conn.Dispense(pluginName)
	if err != nil {
		return fail(fmt.Errorf("start %s: %w", c.path, err))
	}
	rpc, ok := raw.(backendpb.BackendClient)
	if !ok {
		return fail(fmt.Errorf("start %s: the plugin serves %T, not a backend", c.path, raw))
	}
	grpcConn, ok := conn.(*plugin.GRPCClient)
	if !ok {
		return fail(fmt.Errorf("start %s: the plugin speaks %T, not gRPC", c.path, conn))
	}
	resp, err := rpc.Configure(ctx, &backendpb.ConfigureRequest{ConfigJson: c.config})
	if err != nil {
		return fail(fmt.Errorf("configure %s: %w", c.path, fromStatus("configure", err)))
	}
	if resp.GetType() == "" {
		return fail(fmt.Errorf("configure %s: the plugin declared no backend type", c.path))
	}
	p := &process{
		rpc:    rpc,
		gone:   pc.Exited,
		end:    pc.Kill,
		health: grpc_health_v1.NewHealthClient(grpcConn.Conn),
		pid:    cmd.Process.Pid,
		proc:   cmd.Process,
		opts:   &c.opts,
		log:    c.log.With("path", c.path),
		quit:   make(chan struct{}),
		wg:     &c.watches,
	}
	c.watches.Go(p.watch)
	return p, resp.GetType(), nil
}

// stderrTail is how much of a plugin's stderr a failed start quotes.
const stderrTail = 2048

// startError explains why a plugin did not start, with the end of what it
// wrote on stderr, which is where a plugin says why.
func startError(path string, err error, stderr string) error {
	msg := err.Error()
	if strings.Contains(msg, "Unrecognized remote plugin message") {
		// go-plugin's own guesses run to a dozen lines; the cause is this.
		msg = "no handshake: it is not a dsh backend plugin, or it failed before its handshake"
	}
	if m := pluginVersion.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("incompatible API version: it speaks backend protocol version %s, this dsh speaks version %d: build it against the backendplugin package of this dsh", m[1], ProtocolVersion)
	}
	if stderr = strings.TrimSpace(stderr); stderr != "" {
		return fmt.Errorf("start %s: %s; it wrote: %s", path, msg, stderr)
	}
	return fmt.Errorf("start %s: %s", path, msg)
}

// pluginVersion finds the version in go-plugin's error about a plugin of
// another protocol version.
var pluginVersion = regexp.MustCompile(`(?i)incompatible API version.*Plugin version: (\d+)`)

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Type is the backend type the plugin declared.
func (c *Client) Type() string { return c.typ }

// live returns the running process, starting a fresh one if the last one
// died.
func (c *Client) live(ctx context.Context) (*process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if !c.proc.exited() {
		return c.proc, nil
	}
	c.log.Warn("backend plugin exited; starting it again", "path", c.path)
	c.proc.lose()
	c.proc.end()
	p, typ, err := c.start(ctx)
	if err != nil {
		return nil, err
	}
	if typ != c.typ {
		p.done()
		p.end()
		return nil, fmt.Errorf("backendplugin: %s now declares type %q, not %q", c.path, typ, c.typ)
	}
	c.proc = p
	return p, nil
}

// Spawn starts a session in the plugin. If the process turns out to be
// gone, Spawn starts a fresh one and tries once more.
func (c *Client) Spawn(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
	req := &backendpb.SpawnRequest{
		SessionId: spec.SessionID,
		OwnerId:   spec.OwnerID,
		Cwd:       spec.Cwd,
		Name:      spec.Name,
		Policy:    policyToPB(spec.Policy),
	}
	var (
		p    *process
		resp *backendpb.SpawnResponse
		err  error
	)
	for try := 0; try < 2; try++ {
		if p, err = c.live(ctx); err != nil {
			return nil, err
		}
		cctx, cancel := p.bound(ctx, c.opts.SpawnTimeout)
		resp, err = p.rpc.Spawn(cctx, req)
		timedOut := err != nil && p.timedOut(cctx)
		cancel()
		if err == nil {
			break
		}
		err = fromStatus("spawn", err)
		if timedOut {
			return nil, fmt.Errorf("backendplugin: spawn: no answer within %s: %w", c.opts.SpawnTimeout, err)
		}
		if !errors.Is(err, ErrPluginExited) || ctx.Err() != nil {
			return nil, err
		}
		p.lose()
	}
	if err != nil {
		return nil, err
	}
	return newSession(p, spec.SessionID, resp), nil
}

func newSession(p *process, id string, resp *backendpb.SpawnResponse) *session {
	return &session{proc: p, id: id, motd: string(resp.GetMotd()), pid: int(resp.GetPid()), caps: capsFromPB(resp.GetCapabilities())}
}

// List describes the sessions the plugin holds.
func (c *Client) List(ctx context.Context) ([]termapi.Info, error) {
	p, err := c.live(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := p.bound(ctx, c.opts.CallTimeout)
	defer cancel()
	resp, err := p.rpc.List(cctx, &backendpb.ListRequest{})
	if err != nil {
		p.timedOut(cctx)
		return nil, fromStatus("list", err)
	}
	infos := make([]termapi.Info, len(resp.GetSessions()))
	for i, in := range resp.GetSessions() {
		infos[i] = infoFromPB(in)
	}
	return append(infos, c.lostInfos()...), nil
}

// Attach takes over a session the plugin holds.
func (c *Client) Attach(ctx context.Context, id string) (termapi.Session, error) {
	if s := c.attachLost(id); s != nil {
		return s, nil
	}
	p, err := c.live(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := p.bound(ctx, c.opts.CallTimeout)
	defer cancel()
	resp, err := p.rpc.Attach(cctx, &backendpb.SessionRef{SessionId: id})
	if err != nil {
		p.timedOut(cctx)
		return nil, fromStatus("attach", err)
	}
	return newSession(p, id, resp), nil
}

// Close stops the plugin process: it closes what sessions it still has
// and exits. A plugin that does not answer, or has not exited by the time
// ctx is done, is killed: none outlives the host's grace.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	p := c.proc
	c.mu.Unlock()
	defer c.watches.Wait()
	p.done()
	if !p.exited() && p.health != nil {
		if err := p.check(min(p.opts.HealthTimeout, closeCheck, time.Until(deadline(ctx)))); err != nil && !p.exited() {
			// Asking it to shut down would wait for it as long as it
			// lives.
			c.log.Warn("backend plugin does not answer; killing it", "path", c.path, "pid", p.pid, "err", err)
			p.killHard()
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.end()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	p.killHard()
	select {
	case <-done:
	case <-time.After(killWait):
	}
	return fmt.Errorf("backendplugin: stop %s: it had not exited when the grace ended, and was killed: %w", c.path, context.Cause(ctx))
}

// deadline is ctx's deadline, or a far one.
func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Hour)
}

var _ termapi.Backend = (*Client)(nil)
