package backendplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

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

// callTimeout bounds the calls whose termapi.Session method takes no
// context (Status, Read).
const callTimeout = 30 * time.Second

// Options tune Open.
type Options struct {
	// Logger receives the plugin's log records and stderr; nil discards
	// them.
	Logger *slog.Logger
}

// Client is an external backend: a plugin executable, started and
// configured, seen as a termapi.Backend. If the process dies, its
// sessions exit and the next Spawn starts a fresh process with the same
// config. Close stops it.
type Client struct {
	path   string
	config json.RawMessage
	log    *slog.Logger
	typ    string

	mu     sync.Mutex
	proc   *process
	closed bool
}

// process is one run of the plugin executable.
type process struct {
	client *plugin.Client
	rpc    backendpb.BackendClient
	lost   atomic.Bool // a call found it unreachable
}

// exited reports whether the process is gone or out of reach.
func (p *process) exited() bool { return p.lost.Load() || p.client.Exited() }

// lose marks the process as out of reach and kills it, so that it is
// surely gone; the next spawn starts another.
func (p *process) lose() {
	if !p.lost.Swap(true) {
		go p.client.Kill()
	}
}

// Open starts the plugin executable at path, checks the handshake and the
// protocol version, and configures the backend with config (a JSON object;
// nil means "{}"). On any error the process is killed before Open returns.
func Open(ctx context.Context, path string, config json.RawMessage, opts Options) (*Client, error) {
	if len(config) == 0 {
		config = json.RawMessage("{}")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{path: path, config: config, log: log}
	p, typ, err := c.start(ctx)
	if err != nil {
		return nil, err
	}
	c.proc, c.typ = p, typ
	return c, nil
}

// start runs the executable and configures it.
func (c *Client) start(ctx context.Context) (*process, string, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	stderr := &tailBuffer{max: stderrTail}
	pc := plugin.NewClient(&plugin.ClientConfig{
		Stderr:           stderr,
		HandshakeConfig:  handshake,
		Plugins:          plugin.PluginSet{pluginName: &grpcPlugin{}},
		Cmd:              exec.Command(c.path),
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
	resp, err := rpc.Configure(ctx, &backendpb.ConfigureRequest{ConfigJson: c.config})
	if err != nil {
		return fail(fmt.Errorf("configure %s: %w", c.path, fromStatus("configure", err)))
	}
	if resp.GetType() == "" {
		return fail(fmt.Errorf("configure %s: the plugin declared no backend type", c.path))
	}
	return &process{client: pc, rpc: rpc}, resp.GetType(), nil
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
	c.proc.lost.Store(true)
	c.proc.client.Kill()
	p, typ, err := c.start(ctx)
	if err != nil {
		return nil, err
	}
	if typ != c.typ {
		p.client.Kill()
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
		resp, err = p.rpc.Spawn(ctx, req)
		if err == nil {
			break
		}
		err = fromStatus("spawn", err)
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
	resp, err := p.rpc.List(ctx, &backendpb.ListRequest{})
	if err != nil {
		return nil, fromStatus("list", err)
	}
	infos := make([]termapi.Info, len(resp.GetSessions()))
	for i, in := range resp.GetSessions() {
		infos[i] = termapi.Info{
			ID:           in.GetSessionId(),
			OwnerID:      in.GetOwnerId(),
			Name:         in.GetName(),
			PID:          int(in.GetPid()),
			Status:       statusFromPB(in.GetStatus()),
			Capabilities: capsFromPB(in.GetCapabilities()),
		}
	}
	return infos, nil
}

// Attach takes over a session the plugin holds.
func (c *Client) Attach(ctx context.Context, id string) (termapi.Session, error) {
	p, err := c.live(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := p.rpc.Attach(ctx, &backendpb.SessionRef{SessionId: id})
	if err != nil {
		return nil, fromStatus("attach", err)
	}
	return newSession(p, id, resp), nil
}

// Close stops the plugin process: it closes what sessions it still has
// and exits, or is killed.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	p := c.proc
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.client.Kill()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("backendplugin: stop %s: %w", c.path, context.Cause(ctx))
	}
}

var _ termapi.Backend = (*Client)(nil)
