//go:build linux

package backendplugin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dshdev/dsh/internal/peercred"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin/internal/backendpb"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// KeeperOptions say which keeper OpenKeeper finds, or starts.
type KeeperOptions struct {
	// Dir is where the keeper's files are: a directory private to this
	// user (dsh's private directory, or one below it). Its socket, its
	// address file, its log and its sessions' journals live there.
	Dir string
	// Name names the keeper in Dir: one keeper per backend entry.
	Name string
	// Path is the executable to start: a backend plugin (Serve), or a
	// binary that serves Builtin (dsh's own, KeeperMain).
	Path string
	// Builtin is the builtin backend Path serves (RegisterBuiltin); empty
	// for a backend plugin.
	Builtin string
	// Config is the backend's config, a JSON object; nil means "{}".
	Config json.RawMessage
	// Keep is how long the keeper keeps a session no host holds; zero
	// means DefaultKeep.
	Keep time.Duration
	// Env is the keeper's environment, as Options.Env is a plugin's: a
	// backend executable gets the filtered environment it would get
	// started as a plugin, and passes it on to its shells. nil means
	// dsh's own (dsh's binary keeping its builtin backend).
	Env []string
	// Logger receives the client's records; nil discards them. The
	// keeper logs to its own file (Name.log in Dir).
	Logger *slog.Logger
}

// OpenKeeper connects to the keeper of opts.Dir and opts.Name, starting it
// if no live one is there, and configures it: the backend a dsh serves
// its durable shells from. A keeper is a backend served in a process of
// its own session, which outlives dsh: its sessions stay when dsh dies,
// and a later dsh that opens the same keeper lists them and attaches
// (Backend.List, Attach). It listens on a unix socket in Dir, which
// admits only this user's processes in this user namespace, and writes an
// address file beside it; a keeper with no host keeps each session for
// opts.Keep, then ends it, and exits when it has none left.
//
// A keeper that had died leaves the records of its sessions: OpenKeeper
// lists those as lost (termapi.Kept.Lost), once, so that their owners
// learn that their shells are gone.
func OpenKeeper(ctx context.Context, opts KeeperOptions) (*Client, error) {
	if len(opts.Config) == 0 {
		opts.Config = json.RawMessage("{}")
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kc := &keeperClient{opts: opts, paths: keeperPaths{filepath.Join(opts.Dir, opts.Name)}, log: log, lost: make(map[string]termapi.Info)}
	c := &Client{path: opts.Path, config: opts.Config, log: log, keeper: kc, opts: Options{Logger: log}}
	c.opts.fill()
	c.start = func(ctx context.Context) (*process, string, error) {
		p, typ, err := kc.start(ctx, c.config)
		if p != nil {
			p.opts, p.log, p.quit, p.wg = &c.opts, log, make(chan struct{}), &c.watches
		}
		return p, typ, err
	}
	kc.first = true
	p, typ, err := c.start(ctx)
	if err != nil {
		return nil, err
	}
	c.proc, c.typ = p, typ
	return c, nil
}

// keeperClient is what a Client of a keeper adds.
type keeperClient struct {
	opts  KeeperOptions
	paths keeperPaths
	log   *slog.Logger

	mu    sync.Mutex
	first bool                    // the next start is the Client's first
	lost  map[string]termapi.Info // sessions of a keeper that died, not yet attached
}

// KeeperPID is the pid of the keeper c is connected to; 0 when c is not a
// keeper's client.
func (c *Client) KeeperPID() int {
	if c.keeper == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc.pid
}

// start finds the live keeper or starts one, connects and configures it.
// Two dsh processes that start the same keeper at once take turns on its
// lock file.
func (kc *keeperClient) start(ctx context.Context, config json.RawMessage) (*process, string, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := os.MkdirAll(kc.opts.Dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("keeper directory: %w", err)
	}
	unlock, err := lockFile(ctx, kc.paths.lock())
	if err != nil {
		return nil, "", fmt.Errorf("keeper %s: %w", kc.paths.base, err)
	}
	defer unlock()
	kc.mu.Lock()
	first := kc.first
	kc.first = false
	kc.mu.Unlock()

	if first {
		kc.collectExpired()
	}
	addr, err := readAddress(kc.paths.address())
	live := err == nil && addr.identity().Alive()
	if !live {
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			kc.log.Warn("the keeper had ended; its shells are gone", "keeper", kc.paths.base)
		}
		kc.buryDead(first)
		if addr, err = kc.launch(ctx); err != nil {
			return nil, "", err
		}
	}
	p, typ, err := kc.connect(ctx, addr, config)
	if err != nil && live {
		// A keeper that is there but does not answer is of no use, and
		// holds what nobody can reach: end it, and start another.
		kc.log.Warn("the keeper does not answer; ending it", "pid", addr.PID, "err", err)
		_ = addr.identity().Signal(unix.SIGKILL)
		kc.buryDead(first)
		if addr, err = kc.launch(ctx); err != nil {
			return nil, "", err
		}
		p, typ, err = kc.connect(ctx, addr, config)
	}
	if err != nil {
		return nil, "", err
	}
	return p, typ, nil
}

// buryDead removes what a keeper that died left: its socket, address file
// and journals. On a Client's first start it reads first whose sessions
// they were, to list them as lost.
func (kc *keeperClient) buryDead(collect bool) {
	if collect {
		entries, _ := os.ReadDir(kc.paths.sessions())
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(kc.paths.sessions(), e.Name()))
			var m meta
			if err != nil || json.Unmarshal(data, &m) != nil || m.ID == "" {
				continue
			}
			kc.mu.Lock()
			kc.lost[m.ID] = termapi.Info{
				ID: m.ID, OwnerID: m.Owner, Name: m.Name,
				Status:       termapi.Status{Exited: true, ExitCode: -1},
				Capabilities: termapi.Capabilities{Keep: true, Attach: true},
				Kept:         &termapi.Kept{Lost: true},
			}
			kc.mu.Unlock()
		}
	}
	_ = os.RemoveAll(kc.paths.sessions())
	_ = os.Remove(kc.paths.socket())
	_ = os.Remove(kc.paths.address())
}

// collectExpired reads, and removes, the records of the sessions the
// keeper ended because no dsh took them back in time, to list them as
// lost (termapi.Kept.Expired says why).
func (kc *keeperClient) collectExpired() {
	entries, _ := os.ReadDir(kc.paths.expired())
	for _, e := range entries {
		path := filepath.Join(kc.paths.expired(), e.Name())
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(path)
		var m meta
		if err == nil && json.Unmarshal(data, &m) == nil && m.ID != "" {
			kc.mu.Lock()
			kc.lost[m.ID] = termapi.Info{
				ID: m.ID, OwnerID: m.Owner, Name: m.Name,
				Status:       termapi.Status{Exited: true, ExitCode: -1},
				Capabilities: termapi.Capabilities{Keep: true, Attach: true},
				Kept:         &termapi.Kept{Lost: true, Expired: time.Duration(m.KeptNs)},
			}
			kc.mu.Unlock()
		}
		_ = os.Remove(path)
	}
	_ = os.Remove(kc.paths.expired()) // empty now, unless the keeper ended another meanwhile
}

// launch starts a keeper and waits until it listens. The executable runs
// twice: once as a launcher, which dsh waits for, and which starts the
// keeper proper in a session of its own and exits, so that the keeper is
// nobody's child and dies with nobody.
func (kc *keeperClient) launch(ctx context.Context) (keeperAddress, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return keeperAddress{}, err
	}
	defer r.Close()
	logf, err := os.OpenFile(kc.paths.log(), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		w.Close()
		return keeperAddress{}, fmt.Errorf("keeper log: %w", err)
	}
	cmd := &exec.Cmd{
		Path:        kc.opts.Path,
		Args:        []string{keeperArg0, kc.opts.Builtin, keeperLaunch, kc.paths.base, kc.opts.Keep.String()},
		Stdout:      logf,
		Stderr:      logf,
		Env:         kc.opts.Env,
		ExtraFiles:  []*os.File{w},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	w.Close()
	logf.Close()
	if err != nil {
		return keeperAddress{}, fmt.Errorf("start keeper %s: %w", kc.opts.Path, err)
	}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	if err := cmd.Wait(); err != nil {
		// A launcher that failed wrote why on the pipe, and nothing else
		// holds it: its line is there, or the pipe is at its end. An
		// executable that says nothing there does not know it was asked
		// to keep: one built before keepers, which go-plugin's Serve
		// turned away as started by hand.
		select {
		case line := <-lines:
			if line == "" {
				// No keeper ran: its log is only what the executable
				// said, which the error carries.
				err := fmt.Errorf("start keeper %s: %w: %v%s", kc.opts.Path, ErrKeeperUnsupported, err, kc.logTail())
				_ = os.Remove(kc.paths.log())
				return keeperAddress{}, err
			}
			return keeperAddress{}, fmt.Errorf("start keeper %s: %s", kc.opts.Path, line)
		case <-ctx.Done():
			r.Close()
			return keeperAddress{}, fmt.Errorf("start keeper %s: %w%s", kc.opts.Path, err, kc.logTail())
		}
	}
	select {
	case line := <-lines:
		if line != "ok" {
			if line == "" {
				line = "it exited before it was ready" + kc.logTail()
			}
			return keeperAddress{}, fmt.Errorf("start keeper %s: %s", kc.opts.Path, line)
		}
	case <-ctx.Done():
		r.Close() // ends the reader
		return keeperAddress{}, fmt.Errorf("start keeper %s: %w", kc.opts.Path, context.Cause(ctx))
	}
	return readAddress(kc.paths.address())
}

// logTail is the end of the keeper's log, for an error.
func (kc *keeperClient) logTail() string {
	data, err := os.ReadFile(kc.paths.log())
	if err != nil || len(data) == 0 {
		return ""
	}
	if len(data) > stderrTail {
		data = data[len(data)-stderrTail:]
	}
	return "; it wrote: " + strings.TrimSpace(string(data))
}

// connect dials the keeper's socket, checks that this user serves it,
// and configures the backend.
func (kc *keeperClient) connect(ctx context.Context, addr keeperAddress, config json.RawMessage) (*process, string, error) {
	if addr.Protocol != ProtocolVersion {
		return nil, "", fmt.Errorf("keeper pid %d speaks protocol version %d, this dsh %d", addr.PID, addr.Protocol, ProtocolVersion)
	}
	socket := addr.Socket
	conn, err := grpc.NewClient("passthrough:///keeper",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", socket)
			if err != nil {
				return nil, err
			}
			if err := peercred.Check(c, os.Getuid()); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)),
	)
	if err != nil {
		return nil, "", fmt.Errorf("keeper %s: %w", socket, err)
	}
	rpc := backendpb.NewBackendClient(conn)
	resp, err := rpc.Configure(ctx, &backendpb.ConfigureRequest{ConfigJson: config, KeepNs: int64(kc.opts.Keep)}, grpc.WaitForReady(true))
	if err != nil {
		conn.Close()
		return nil, "", fmt.Errorf("configure keeper %s: %w", socket, fromStatus("configure", err))
	}
	if resp.GetType() == "" {
		conn.Close()
		return nil, "", fmt.Errorf("configure keeper %s: it declared no backend type", socket)
	}
	p := &process{
		rpc:  rpc,
		pid:  addr.PID,
		gone: func() bool { return conn.GetState() == connectivity.Shutdown },
		end:  func() { conn.Close() },
	}
	return p, resp.GetType(), nil
}

// lostInfos are the sessions of a keeper that died, not yet attached.
func (c *Client) lostInfos() []termapi.Info {
	if c.keeper == nil {
		return nil
	}
	c.keeper.mu.Lock()
	defer c.keeper.mu.Unlock()
	out := make([]termapi.Info, 0, len(c.keeper.lost))
	for _, in := range c.keeper.lost {
		out = append(out, in)
	}
	return out
}

// attachLost hands over a session of a keeper that died, once: a session
// whose shell has exited, and which Close forgets.
func (c *Client) attachLost(id string) termapi.Session {
	if c.keeper == nil {
		return nil
	}
	c.keeper.mu.Lock()
	in, ok := c.keeper.lost[id]
	delete(c.keeper.lost, id)
	c.keeper.mu.Unlock()
	if !ok {
		return nil
	}
	p := &process{gone: func() bool { return true }, end: func() {}, opts: &c.opts, log: c.log, quit: make(chan struct{}), wg: &c.watches}
	return &session{proc: p, id: id, caps: in.Capabilities, dead: true}
}

// readAddress reads a keeper's address file.
func readAddress(path string) (keeperAddress, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return keeperAddress{}, err
	}
	var a keeperAddress
	if err := json.Unmarshal(data, &a); err != nil || a.PID <= 0 || a.Socket == "" {
		return keeperAddress{}, fmt.Errorf("keeper address file %s: not one", path)
	}
	return a, nil
}

// lockFile takes an exclusive lock on path (made 0600 if missing), waiting
// for ctx at most; the returned func releases it.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	unlock := func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
		return unlock, nil
	}
	// Another dsh holds it, for a keeper's start at most: wait for it in
	// a goroutine, which lets go at once if this one gave up meanwhile.
	type taken struct{ err error }
	got := make(chan taken)
	var gaveUp sync.Once
	abandoned := make(chan struct{})
	go func() {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		select {
		case <-abandoned:
			if err == nil {
				unlock()
			} else {
				f.Close()
			}
		case got <- taken{err}:
		}
	}()
	select {
	case t := <-got:
		if t.err != nil {
			f.Close()
			return nil, t.err
		}
		return unlock, nil
	case <-ctx.Done():
		gaveUp.Do(func() { close(abandoned) })
		return nil, fmt.Errorf("another dsh is starting this keeper: %w", context.Cause(ctx))
	}
}

// StopKeeper ends the keeper of dir and name, if one runs, and every
// session it keeps, and waits until it is gone: for an operator, and for
// tests.
func StopKeeper(ctx context.Context, dir, name string) error {
	addr, err := readAddress(keeperPaths{filepath.Join(dir, name)}.address())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	id := addr.identity()
	if err := id.Signal(unix.SIGTERM); err != nil {
		return err
	}
	if err := id.Wait(ctx); err != nil {
		return fmt.Errorf("keeper pid %d did not end: %w", addr.PID, err)
	}
	return nil
}
