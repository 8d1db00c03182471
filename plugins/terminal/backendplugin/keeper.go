//go:build linux

package backendplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/dshdev/dsh/internal/harden"
	"github.com/dshdev/dsh/internal/peercred"
	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin/internal/backendpb"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// keeperArg0 is the argv[0] a keeper process runs under: what it is in a
// process listing, and how the binary learns that it must serve as one
// (IsKeeper).
const keeperArg0 = "dsh-keeper"

// Keeper modes (argv[2]): launch starts the keeper and returns once it is
// ready, so that the keeper is nobody's child; run is the keeper.
const (
	keeperLaunch = "launch"
	keeperRun    = "run"
)

// DefaultKeep is how long a keeper keeps a session no host holds.
const DefaultKeep = time.Hour

// DefaultKeptOutput bounds, per session, what a keeper keeps on disk of
// each of its journals (the output of the unit of work a host lost, and
// the background output no host read): the first and the newest half of
// it.
const DefaultKeptOutput = 8 << 20

// keeperIdleExit is how long a keeper with no session waits for a host
// to connect, at its start, before it exits.
const keeperIdleExit = 30 * time.Second

// IsKeeper reports whether this process was started as a keeper (see
// OpenKeeper).
func IsKeeper() bool { return len(os.Args) >= 5 && os.Args[0] == keeperArg0 }

var builtins = struct {
	sync.Mutex
	m map[string]NewBackend
}{m: make(map[string]NewBackend)}

// RegisterBuiltin makes a backend that is linked into this binary
// servable as a keeper under name (OpenKeeper's Builtin): dsh keeps the
// shells of its in-process plugins in a keeper that is dsh's own binary.
// Call it from init.
func RegisterBuiltin(name string, nb NewBackend) {
	builtins.Lock()
	defer builtins.Unlock()
	builtins.m[name] = nb
}

// KeeperMain serves the builtin backend this process was started to keep,
// and exits, when it was started as a keeper; otherwise it returns at
// once. A binary with builtin backends (dsh) calls it first in main.
func KeeperMain() {
	if !IsKeeper() {
		return
	}
	builtins.Lock()
	nb := builtins.m[os.Args[1]]
	builtins.Unlock()
	if nb == nil {
		fmt.Fprintf(os.Stderr, "%s: no builtin backend %q in this binary\n", keeperArg0, os.Args[1])
		os.Exit(2)
	}
	os.Exit(serveKeeper(nb))
}

// serveKeeper is a keeper process: argv is keeperArg0, the builtin's name
// (empty for a backend executable), the mode, the keeper's base path and
// how long it keeps a session no host holds. Descriptor 3 is the pipe
// its starter reads "ok" or the failure from.
func serveKeeper(nb NewBackend) int {
	if err := harden.NotDumpable(); err != nil {
		fmt.Fprintln(os.Stderr, keeperArg0+":", err)
		return 1
	}
	mode, base := os.Args[2], os.Args[3]
	keep, err := time.ParseDuration(os.Args[4])
	ready := os.NewFile(3, "keeper-ready")
	fail := func(err error) int {
		if ready != nil {
			fmt.Fprintf(ready, "%v\n", err)
			ready.Close()
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", keeperArg0, err)
		return 1
	}
	if err != nil {
		return fail(fmt.Errorf("keep duration: %w", err))
	}
	if mode == keeperLaunch {
		return launchKeeper(ready, fail)
	}
	logger := slog.New(slog.NewTextHandler(&cappedWriter{w: os.Stderr, left: keeperLogBytes}, nil)).With("keeper", filepath.Base(base))
	k, err := startKeeping(nb, base, keep, logger)
	if err != nil {
		return fail(err)
	}
	if ready != nil {
		fmt.Fprintln(ready, "ok")
		ready.Close()
	}
	return k.run()
}

// launchKeeper starts the keeper proper in a session of its own and
// returns: the keeper is then nobody's child, and dsh, which waits for
// this launcher, never has to reap it.
func launchKeeper(ready *os.File, fail func(error) int) int {
	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	args := append([]string{keeperArg0, os.Args[1], keeperRun}, os.Args[3:]...)
	cmd := &exec.Cmd{
		Path:        self,
		Args:        args,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		ExtraFiles:  []*os.File{ready},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	_ = cmd.Process.Release()
	return 0
}

// keeperLogBytes bounds a keeper's log file.
const keeperLogBytes = 1 << 20

// cappedWriter writes until left runs out, then drops the rest.
type cappedWriter struct {
	mu   sync.Mutex
	w    io.Writer
	left int
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left <= 0 {
		return len(p), nil
	}
	n := min(len(p), c.left)
	c.left -= n
	_, err := c.w.Write(p[:n])
	return len(p), err
}

// keeperAddress is what a keeper's address file says: where it listens,
// and which process it is.
type keeperAddress struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	Socket    string `json:"socket"`
	Protocol  uint   `json:"protocol"`
}

func (a keeperAddress) identity() proc.Identity {
	return proc.Identity{PID: a.PID, StartTime: a.StartTime}
}

// keeperPaths are the files of the keeper at base.
type keeperPaths struct{ base string }

func (p keeperPaths) socket() string   { return p.base + ".sock" }
func (p keeperPaths) address() string  { return p.base + ".json" }
func (p keeperPaths) lock() string     { return p.base + ".lock" }
func (p keeperPaths) log() string      { return p.base + ".log" }
func (p keeperPaths) sessions() string { return p.base + ".d" }

// expired holds a record of each session the keeper ended because no
// host took it back in time; it outlives the keeper, so that the next
// dsh tells the session's owner (see keeperClient.collectExpired).
func (p keeperPaths) expired() string { return p.base + ".expired" }

// keeping is a server's state as a keeper: the hosts connected, which
// of them holds each session, and what each session kept while none did.
type keeping struct {
	srv      *server
	paths    keeperPaths
	log      *slog.Logger
	lifetime context.Context
	stopLife context.CancelFunc

	// Guarded by srv.mu.
	keep     time.Duration
	conns    map[uint64]struct{}
	nextConn uint64
	hadHost  bool
	kept     map[string]*kept
	changed  chan struct{} // capacity 1: conns or sessions changed
	config   string        // the config the current backend was made from
	retired  []termapi.Backend

	// keptOutput bounds each journal of a session.
	keptOutput int64
	stopServe  func()
}

// startKeeping listens on the keeper's socket and writes its address
// file.
func startKeeping(nb NewBackend, base string, keep time.Duration, logger *slog.Logger) (*keeping, error) {
	raiseFileLimit()
	paths := keeperPaths{base}
	if err := os.MkdirAll(paths.sessions(), 0o700); err != nil {
		return nil, err
	}
	_ = os.Remove(paths.socket()) // its keeper is gone: the starter checked, under the lock
	ln, err := net.Listen("unix", paths.socket())
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	me, err := proc.IdentityOf(os.Getpid())
	if err != nil {
		ln.Close()
		return nil, err
	}
	addr, _ := json.Marshal(keeperAddress{PID: me.PID, StartTime: me.StartTime, Socket: paths.socket(), Protocol: ProtocolVersion})
	if err := writeFileAtomic(paths.address(), addr); err != nil {
		ln.Close()
		return nil, err
	}
	lifetime, stop := context.WithCancel(context.Background())
	srv := newServer(nb)
	k := &keeping{
		srv:      srv,
		paths:    paths,
		log:      logger,
		lifetime: lifetime,
		stopLife: stop,
		keep:     keep,
		conns:    make(map[uint64]struct{}),
		kept:     make(map[string]*kept),
		changed:  make(chan struct{}, 1),

		keptOutput: DefaultKeptOutput,
	}
	srv.keep = k
	gs := grpc.NewServer(
		grpc.Creds(keeperCreds{k: k}),
		grpc.MaxRecvMsgSize(maxMessageBytes),
		grpc.MaxSendMsgSize(maxMessageBytes),
	)
	backendpb.RegisterBackendServer(gs, srv)
	go func() { _ = gs.Serve(ln) }()
	k.stopServe = func() {
		gs.Stop()
		ln.Close()
	}
	return k, nil
}

// raiseFileLimit lifts the soft limit on descriptors to the hard one: a
// keeper holds every shell of a dsh, each with a few.
func raiseFileLimit() {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &rl)
	}
}

// run serves until the keeper has nothing left to keep: no host and no
// session (or no host came at all), or until SIGTERM, which ends every
// session. It removes the keeper's files and returns the exit status.
func (k *keeping) run() int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(term)
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	first := time.NewTimer(keeperIdleExit)
	defer first.Stop()
loop:
	for {
		select {
		case <-term:
			k.log.Info("keeper told to stop: ending its sessions")
			break loop
		case <-first.C:
			if k.idle(true) {
				break loop
			}
		case <-k.changed:
			if k.idle(false) {
				break loop
			}
		}
	}
	k.stopServe()
	k.stopLife()
	k.srv.stop()
	k.srv.mu.Lock()
	retired := k.retired
	k.srv.mu.Unlock()
	for _, b := range retired {
		if c, ok := b.(closer); ok {
			ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
			_ = c.Close(ctx)
			cancel()
		}
	}
	_ = os.RemoveAll(k.paths.sessions())
	_ = os.Remove(k.paths.address())
	_ = os.Remove(k.paths.socket())
	_ = os.Remove(k.paths.log())
	return 0
}

// idle reports whether the keeper has nothing to keep: no session, and no
// host connected (or, at its start, none came).
func (k *keeping) idle(startOver bool) bool {
	k.srv.mu.Lock()
	defer k.srv.mu.Unlock()
	if len(k.kept) > 0 || len(k.conns) > 0 {
		return false
	}
	return k.hadHost || startOver
}

func (k *keeping) signal() {
	select {
	case k.changed <- struct{}{}:
	default:
	}
}

// connect and disconnect track the hosts: a host that goes away lets go
// of every session it held.
func (k *keeping) connect() uint64 {
	k.srv.mu.Lock()
	defer k.srv.mu.Unlock()
	k.nextConn++
	k.conns[k.nextConn] = struct{}{}
	k.hadHost = true
	return k.nextConn
}

func (k *keeping) disconnect(conn uint64) {
	k.srv.mu.Lock()
	delete(k.conns, conn)
	var held []*kept
	for _, s := range k.kept {
		if s.holder == conn {
			held = append(held, s)
		}
	}
	k.srv.mu.Unlock()
	for _, s := range held {
		k.release(s, conn)
	}
	k.signal()
}

// keeperCreds admit only this user's processes, in this user namespace,
// and name each connection, so that the keeper knows which host holds
// what and when a host has gone.
type keeperCreds struct{ k *keeping }

type connAuth struct {
	credentials.CommonAuthInfo
	conn uint64
}

func (connAuth) AuthType() string { return "dsh-peercred" }

func (c keeperCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if err := peercred.Check(raw, os.Getuid()); err != nil {
		c.k.log.Warn("refused a connection", "err", err)
		return nil, nil, err
	}
	id := c.k.connect()
	conn := &trackedConn{Conn: raw, closed: func() { c.k.disconnect(id) }}
	return conn, connAuth{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}, conn: id}, nil
}

func (keeperCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("backendplugin: keeper credentials serve only")
}

func (keeperCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "dsh-peercred"}
}
func (c keeperCreds) Clone() credentials.TransportCredentials { return c }
func (keeperCreds) OverrideServerName(string) error           { return nil }

// trackedConn reports its close once.
type trackedConn struct {
	net.Conn
	once   sync.Once
	closed func()
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.closed)
	return err
}

// connOf is the host connection a call came on; 0 outside a keeper.
func connOf(ctx context.Context) uint64 {
	if p, ok := peer.FromContext(ctx); ok {
		if a, ok := p.AuthInfo.(connAuth); ok {
			return a.conn
		}
	}
	return 0
}

// kept is a session as its keeper holds it.
type kept struct {
	id, owner, name string
	sess            termapi.Session

	// Guarded by srv.mu.
	holder uint64        // the host that holds it; 0: none
	since  time.Time     // when the last holder let go
	free   chan struct{} // closed while no host holds it
	expiry *time.Timer
	// stopWatch ends the journaling of background output; watched is
	// closed once it has ended.
	stopWatch context.CancelFunc
	watched   chan struct{}
	// awayUnit and awayBg are the journals' lengths when the last holder
	// let go (bytes and lines): what came after arrived while no host
	// held it.
	awayUnit, awayBg           int64
	awayUnitLines, awayBgLines int64

	// mu guards what the pumps touch: the unit and the background
	// journal.
	mu        sync.Mutex
	unit      *unit
	units     int // units so far: each journals to a file of its own
	bg        *journal
	bgDropped bool // the session dropped background lines before the keeper took them
}

// meta is what a keeper writes down of each session it holds, beside its
// journals: if the keeper itself dies, the next dsh reads there whose
// shell was lost.
type meta struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	Name  string `json:"name,omitempty"`
	// KeptNs, in an expired record, is how long the keeper kept the
	// session without a host before it ended it.
	KeptNs int64 `json:"kept_ns,omitempty"`
}

func (k *keeping) metaPath(id string) string {
	return filepath.Join(k.paths.sessions(), safeFileName(id)+".json")
}

// safeFileName is id as a file name: the service's ids are plain; any
// other character becomes '_'.
func safeFileName(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, id)
}

// add starts keeping a session a host has just spawned.
func (k *keeping) add(conn uint64, spec termapi.SpawnSpec, sess termapi.Session) {
	s := &kept{id: spec.SessionID, owner: spec.OwnerID, name: spec.Name, sess: sess, holder: conn, free: make(chan struct{})}
	s.bg = newJournal(filepath.Join(k.paths.sessions(), safeFileName(s.id)+".bg"), k.keptOutput)
	data, _ := json.Marshal(meta{ID: s.id, Owner: s.owner, Name: s.name})
	if err := writeFileAtomic(k.metaPath(s.id), data); err != nil {
		k.log.Warn("writing a session's record failed", "session", s.id, "err", err)
	}
	k.srv.mu.Lock()
	k.kept[s.id] = s
	k.srv.mu.Unlock()
	k.signal()
}

// forget stops keeping a session that has closed, and removes its files.
func (k *keeping) forget(id string) {
	k.srv.mu.Lock()
	s := k.kept[id]
	delete(k.kept, id)
	k.srv.mu.Unlock()
	if s == nil {
		return
	}
	k.srv.mu.Lock()
	if s.expiry != nil {
		s.expiry.Stop()
	}
	stop, watched := s.stopWatch, s.watched
	s.stopWatch, s.watched = nil, nil
	k.srv.mu.Unlock()
	if stop != nil {
		stop()
		<-watched
	}
	s.mu.Lock()
	if s.unit != nil {
		s.unit.log.Remove()
	}
	s.bg.Remove()
	s.mu.Unlock()
	_ = os.Remove(k.metaPath(id))
	k.signal()
}

// held returns the session id if conn holds it (ErrNoSession otherwise:
// a session another host holds is none of this one's).
func (k *keeping) held(conn uint64, id string) (*kept, error) {
	k.srv.mu.Lock()
	defer k.srv.mu.Unlock()
	s := k.kept[id]
	if s == nil || s.holder != conn {
		return nil, fmt.Errorf("%w %s", termapi.ErrNoSession, id)
	}
	return s, nil
}

// attach hands session id to conn, once the host that holds it, if any,
// lets go.
func (k *keeping) attach(ctx context.Context, conn uint64, id string) (*kept, error) {
	for {
		k.srv.mu.Lock()
		s := k.kept[id]
		if s == nil {
			k.srv.mu.Unlock()
			return nil, fmt.Errorf("%w %s", termapi.ErrNoSession, id)
		}
		if s.holder == conn {
			k.srv.mu.Unlock()
			return s, nil
		}
		if s.holder == 0 {
			s.holder = conn
			s.free = make(chan struct{})
			if s.expiry != nil {
				s.expiry.Stop()
				s.expiry = nil
			}
			stop, watched := s.stopWatch, s.watched
			s.stopWatch, s.watched = nil, nil
			k.srv.mu.Unlock()
			if stop != nil {
				// Nothing reaches the journal once the host has it: what
				// comes later is the session's own background output.
				stop()
				<-watched
			}
			return s, nil
		}
		free := s.free
		k.srv.mu.Unlock()
		select {
		case <-free:
		case <-ctx.Done():
			return nil, fmt.Errorf("session %s is held by another host: %w", id, context.Cause(ctx))
		}
	}
}

// release lets go of a session conn held: the keeper keeps it for
// k.keep, journals what it prints, and goes on reading the unit conn
// started, whose end conn will not see.
func (k *keeping) release(s *kept, conn uint64) {
	k.srv.mu.Lock()
	if s.holder != conn {
		k.srv.mu.Unlock()
		return
	}
	s.holder = 0
	s.since = time.Now()
	close(s.free)
	keep := k.keep
	s.expiry = time.AfterFunc(keep, func() { k.expire(s) })
	ctx, stop := context.WithCancel(k.lifetime)
	watched := make(chan struct{})
	s.stopWatch, s.watched = stop, watched
	k.srv.mu.Unlock()

	taker, raw := s.sess.(backgroundTaker)
	raw = raw && s.sess.Capabilities().Raw
	s.mu.Lock()
	s.awayBg, s.awayBgLines = s.bg.Len(), s.bg.Lines()
	if raw {
		// What jobs printed that no host read (a host killed outright
		// is noticed a little later) counts as arrived while away.
		if text, dropped := taker.TakeBackground(); text != "" || dropped {
			s.bg.Write([]byte(text))
			s.bgDropped = s.bgDropped || dropped
		}
	}
	if u := s.unit; u != nil {
		s.awayUnit, s.awayUnitLines = u.log.Len(), u.log.Lines()
		u.orphan(k, s, conn)
	}
	s.mu.Unlock()
	if raw {
		go func() {
			defer close(watched)
			k.watchBackground(ctx, s, taker)
		}()
	} else {
		close(watched)
	}
	k.log.Info("session let go; kept", "session", s.id, "owner", s.owner, "for", keep)
}

// expire ends a session no host took back in time.
func (k *keeping) expire(s *kept) {
	k.srv.mu.Lock()
	if s.holder != 0 || k.kept[s.id] != s {
		k.srv.mu.Unlock()
		return
	}
	k.srv.mu.Unlock()
	k.log.Info("session kept too long without a host: ending it", "session", s.id, "owner", s.owner)
	k.recordExpired(s)
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	if err := s.sess.Close(ctx, "kept too long without dsh"); err != nil {
		k.log.Warn("ending an expired session failed", "session", s.id, "err", err)
	}
	k.srv.mu.Lock()
	if k.srv.sessions[s.id] == s.sess {
		delete(k.srv.sessions, s.id)
	}
	k.srv.mu.Unlock()
	k.forget(s.id)
}

// recordExpired writes down that s was ended for want of a host, for its
// owner's next dsh: a shell is never replaced in silence.
func (k *keeping) recordExpired(s *kept) {
	k.srv.mu.Lock()
	keep := k.keep
	k.srv.mu.Unlock()
	data, _ := json.Marshal(meta{ID: s.id, Owner: s.owner, Name: s.name, KeptNs: int64(keep)})
	err := os.MkdirAll(k.paths.expired(), 0o700)
	if err == nil {
		err = writeFileAtomic(filepath.Join(k.paths.expired(), safeFileName(s.id)+".json"), data)
	}
	if err != nil {
		k.log.Warn("writing an expired session's record failed", "session", s.id, "err", err)
	}
}

// backgroundTaker is a session whose lines no send claimed can be taken
// (backendkit.Core.TakeBackground).
type backgroundTaker interface {
	TakeBackground() (string, bool)
}

// watchBackground moves what the session prints between sends into its
// background journal while no host holds it: a wake for each raw chunk,
// then the lines it made.
func (k *keeping) watchBackground(ctx context.Context, s *kept, taker backgroundTaker) {
	var pos int64
	for {
		c, err := s.sess.Output(ctx, pos)
		if err != nil {
			return
		}
		pos = c.End()
		text, dropped := taker.TakeBackground()
		if text == "" && !dropped {
			continue
		}
		s.mu.Lock()
		s.bg.Write([]byte(text))
		s.bgDropped = s.bgDropped || dropped
		s.mu.Unlock()
	}
}

// info describes s for a host's List: held by another host, or kept.
func (k *keeping) info(conn uint64, s *kept) termapi.Info {
	caps := s.sess.Capabilities()
	caps.Keep = true
	in := termapi.Info{ID: s.id, OwnerID: s.owner, Name: s.name, PID: s.sess.PID(), Status: s.sess.Status(), Capabilities: caps}
	k.srv.mu.Lock()
	holder, since := s.holder, s.since
	k.srv.mu.Unlock()
	switch holder {
	case conn:
		return in
	case 0:
		in.Kept = &termapi.Kept{Since: since}
	default:
		in.Kept = &termapi.Kept{Held: true}
		return in
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in.Kept.Output = s.bg.Len() - s.awayBg
	in.Kept.Lines = s.bg.Lines() - s.awayBgLines
	in.Kept.Dropped = s.bg.Dropped()
	if u := s.unit; u != nil && !u.delivered {
		in.Kept.Unit = &termapi.Unit{Command: u.command, Ended: u.final}
		if u.final && u.res != nil {
			in.Kept.Unit.Result = *u.res
		}
		if u.log.Len() > s.awayUnit {
			in.Kept.Output += u.log.Len() - s.awayUnit
			in.Kept.Lines += u.log.Lines() - s.awayUnitLines
		}
		in.Kept.Dropped += u.log.Dropped()
	}
	return in
}

// list describes every session the keeper holds.
func (k *keeping) list(conn uint64) []termapi.Info {
	k.srv.mu.Lock()
	all := make([]*kept, 0, len(k.kept))
	for _, s := range k.kept {
		all = append(all, s)
	}
	k.srv.mu.Unlock()
	infos := make([]termapi.Info, len(all))
	for i, s := range all {
		infos[i] = k.info(conn, s)
	}
	return infos
}

// writeFileAtomic writes data to path through a private temporary file
// renamed over it, so that a reader never sees half of it.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// configureLocked builds the backend from a host's config, or keeps the
// one it has when the config is the same: every host configures its
// keeper, and a dsh started again with a changed deployment gets new
// sessions made the new way, while the sessions already kept stay as they
// were made. The caller holds srv.mu.
func (k *keeping) configureLocked(ctx context.Context, raw json.RawMessage, req *backendpb.ConfigureRequest) (*backendpb.ConfigureResponse, error) {
	if ns := req.GetKeepNs(); ns > 0 {
		k.keep = time.Duration(ns)
	}
	old := k.srv.backend
	if old != nil && k.config == string(raw) {
		return &backendpb.ConfigureResponse{Type: old.Type()}, nil
	}
	b, err := k.srv.newBackend(withKeeperOf(ctx, k.paths.base), raw)
	if err != nil {
		return nil, toStatus(err)
	}
	if b == nil || b.Type() == "" {
		return nil, toStatus(errors.New("backendplugin: the plugin made no backend, or one without a type"))
	}
	if old != nil {
		if old.Type() != b.Type() {
			if c, ok := b.(closer); ok {
				_ = c.Close(ctx)
			}
			return nil, toStatus(fmt.Errorf("backendplugin: the keeper serves type %q; this config makes %q", old.Type(), b.Type()))
		}
		k.retired = append(k.retired, old)
		k.log.Info("configured anew: sessions from now on are made the new way")
	}
	k.srv.backend, k.config = b, string(raw)
	return &backendpb.ConfigureResponse{Type: b.Type()}, nil
}
