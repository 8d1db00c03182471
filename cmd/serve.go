//go:build linux

package dshcmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/audit"
	"github.com/dshdev/dsh/internal/mcpfront"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
)

// shutdownTimeout bounds closing every owner, shell and plugin once serve or
// repl has been told to stop.
const shutdownTimeout = 10 * time.Second

// serveFlags are serve's flags.
type serveFlags struct {
	workdir     string
	addr        string
	idleTimeout time.Duration
	orphanGrace time.Duration
	tokenFile   string
	noAuth      bool
	allowed     []string
	maxSessions int
	metricsAddr string
	pprofAddr   string
	rotateToken bool
	tlsCert     string
	tlsKey      string
	allowRoots  []string
	auditLog    string
	auditRedact []string
	fastPath    bool
	session     string
	keepShells  time.Duration
}

// fastPathEnv set to false turns the MCP fast path off (--mcp-fast-path),
// for every dsh a test suite starts.
const fastPathEnv = "DSH_MCP_FAST_PATH"

func serveCommand(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve every tool over MCP (stdio, or streamable HTTP with --http)",
		Long: `serve puts every tool of the deployment in front of MCP clients, with its
name, description and input schema. By default it speaks MCP over
stdin/stdout, for a client that starts dsh itself; with --http it serves
streamable HTTP at /mcp on ADDR.

Over HTTP every request must carry a bearer token: one is made the first
time an address is served and kept, readable by you only, in a file in
your runtime directory ($XDG_RUNTIME_DIR/dsh), whose path dsh prints
together with client settings to paste; a restart uses it again, until
--rotate-token. --token-file names your own (one token per line, each its
own identity). --tls-cert and --tls-key serve HTTPS. --no-auth turns that off, on a loopback
address only. Requests must name this server in their Host header: a
loopback name, the listen host, or an --allowed-host. --http unix:PATH
serves on a unix socket instead, in a directory private to you; only your
own processes may connect (checked with SO_PEERCRED), and no token is
needed.

One MCP session is one owner: its own shell, started in --workdir (or, with
--allow-root, in the client's first MCP root), closed when the session ends
(stdin EOF; over HTTP a DELETE or --idle-timeout). At stdin EOF the
requests read before are answered, then every shell is closed and dsh
exits 0; SIGINT or SIGTERM closes every shell and exits 0. With --session
NAME (stdio) the shell is kept instead, by a keeper process that outlives
dsh (a crash, kill -9, stdin EOF, SIGTERM): a dsh started again with the
same NAME takes it back with its directory, environment and jobs, and its
first result says so; a keeper no dsh returns to within --keep-shells
ends the shell. Logs go to
stderr, never to stdout. --audit-log records every tool call; dsh
sessions lists the running servers' sessions.`,
		Example: `  dsh serve
  dsh serve --workdir ~/project
  dsh serve --session build --keep-shells 8h
  dsh serve --http 127.0.0.1:8080
  dsh serve --http 0.0.0.0:8080 --token-file ~/.config/dsh/tokens --allowed-host devbox.lan
  dsh serve --http unix:$XDG_RUNTIME_DIR/dsh/mcp.sock`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd, g) },
	}
	cmd.Flags().StringVarP(&f.workdir, "workdir", "w", "", "every session's workspace, where its shell starts (default: the current directory)")
	cmd.Flags().StringVar(&f.addr, "http", "", "serve streamable HTTP at /mcp on this host:port, or on the unix socket unix:PATH, instead of stdio")
	cmd.Flags().DurationVar(&f.idleTimeout, "idle-timeout", time.Hour, "with --http: close a session and its shell after this long without a request (0: never)")
	cmd.Flags().DurationVar(&f.orphanGrace, "orphan-grace", mcpfront.DefaultOrphanGrace, "with --http: close a session this long after its client closed its event stream, if no call runs and no request came (negative: never)")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "with --http: accept the bearer tokens in this file (one per line, private to you) instead of a fresh one")
	cmd.Flags().BoolVar(&f.noAuth, "no-auth", false, "with --http on a loopback address: accept requests without a token (any local user or process can then run commands as you)")
	cmd.Flags().StringArrayVar(&f.allowed, "allowed-host", nil, "with --http: a further name requests may carry in their Host header (repeatable)")
	cmd.Flags().IntVar(&f.maxSessions, "max-sessions", defaultMaxSessions(), "with --http: the most sessions (each with its shell) open at once; 0: no bound")
	cmd.Flags().StringVar(&f.metricsAddr, "metrics", "", "serve Prometheus metrics at /metrics on this loopback host:port (bearer token required), or on the unix socket unix:PATH")
	cmd.Flags().BoolVar(&f.fastPath, "mcp-fast-path", os.Getenv(fastPathEnv) != "false", "over stdio and HTTP, answer tools/call without the MCP SDK's dispatch, byte for byte as the SDK would (see internal/mcpfast); false has the SDK answer everything (also: "+fastPathEnv+"=false)")
	cmd.Flags().StringVar(&f.pprofAddr, "pprof", "", "serve Go profiles at /debug/pprof/ on this loopback host:port (bearer token required), or on the unix socket unix:PATH")
	cmd.Flags().BoolVar(&f.rotateToken, "rotate-token", false, "with --http, --metrics or --pprof: replace the token kept from an earlier start with a new one (clients need the new one)")
	cmd.Flags().StringVar(&f.tlsCert, "tls-cert", "", "with --http: serve HTTPS with this certificate (PEM; with --tls-key)")
	cmd.Flags().StringVar(&f.tlsKey, "tls-key", "", "with --http: the private key of --tls-cert (PEM)")
	cmd.Flags().StringVar(&f.auditLog, "audit-log", "", "append a JSON line per tool call to this file (time, session, owner, client, tool, command, outcome, exit code, duration, output size)")
	cmd.Flags().StringArrayVar(&f.auditRedact, "audit-redact", nil, "with --audit-log: replace what this regular expression matches in commands with [REDACTED] (repeatable; '(?s).+' leaves commands out)")
	cmd.Flags().StringVar(&f.session, "session", "", "over stdio: name this session's shell and keep it past dsh (a crash, a kill -9, stdin's end); a dsh started again with the same name, by the same user, takes it back with its directory, environment and jobs")
	cmd.Flags().DurationVar(&f.keepShells, "keep-shells", backendplugin.DefaultKeep, "with --session (default 1h), or with --http (then shells are kept only with this flag): how long a kept shell waits for a dsh to take it back before it is ended with what it started; over HTTP a client that comes back with its Mcp-Session-Id and token gets its session and shell back")
	cmd.Flags().StringArrayVar(&f.allowRoots, "allow-root", nil, "a directory a client's workspace may be in: a client that declares MCP roots works in its first root if that is in one of these (repeatable; otherwise --workdir)")
	return cmd
}

// check refuses flags that contradict each other or need --http, before
// anything starts, and reads the token file.
func (f *serveFlags) check(cmd *cobra.Command) (tokens *mcpfront.Tokens, tlsConfig *tls.Config, err error) {
	if f.addr == "" && cmd.Flags().Changed("idle-timeout") {
		return nil, nil, usageError{errors.New("--idle-timeout needs --http (a stdio session ends with its client)")}
	}
	if f.idleTimeout < 0 {
		return nil, nil, usageError{fmt.Errorf("--idle-timeout %s: must not be negative", f.idleTimeout)}
	}
	for _, name := range []string{"no-auth", "allowed-host", "max-sessions", "tls-cert", "tls-key"} {
		if f.addr == "" && cmd.Flags().Changed(name) {
			return nil, nil, usageError{fmt.Errorf("--%s needs --http", name)}
		}
	}
	// The side servers take a token too.
	for _, name := range []string{"token-file", "rotate-token"} {
		if f.addr == "" && f.metricsAddr == "" && f.pprofAddr == "" && cmd.Flags().Changed(name) {
			return nil, nil, usageError{fmt.Errorf("--%s needs --http, --metrics or --pprof", name)}
		}
	}
	if f.noAuth && f.tokenFile != "" {
		return nil, nil, usageError{errors.New("--no-auth and --token-file contradict each other")}
	}
	for _, dir := range f.allowRoots {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, nil, usageError{fmt.Errorf("--allow-root %q is not a directory", dir)}
		}
	}
	if f.maxSessions < 0 {
		return nil, nil, usageError{fmt.Errorf("--max-sessions %d: must not be negative", f.maxSessions)}
	}
	if err := checkSessionFlags(cmd, f.addr, f.session, f.keepShells); err != nil {
		return nil, nil, err
	}
	if f.tokenFile != "" {
		if tokens, err = readTokenFile(f.tokenFile); err != nil {
			return nil, nil, usageError{err}
		}
	}
	if f.rotateToken && (f.tokenFile != "" || f.noAuth) {
		return nil, nil, usageError{errors.New("--rotate-token replaces the token dsh makes; it does not apply with --token-file or --no-auth")}
	}
	if tlsConfig, err = f.loadTLS(); err != nil {
		return nil, nil, usageError{err}
	}
	return tokens, tlsConfig, nil
}

// listen opens the MCP listener: nil for stdio, a unix socket whose peers
// are checked (peers), or a TCP port. It runs before the deployment
// loads, so a taken port fails fast, with no plugin started. auth says
// whether requests need a token.
func (f *serveFlags) listen(tokens *mcpfront.Tokens) (ln net.Listener, peers *peerListener, auth bool, err error) {
	auth = !f.noAuth
	if path, ok := isUnixAddr(f.addr); ok {
		// Only this user's processes can connect: the socket's directory
		// is private and every peer's uid is checked.
		if ln, err = listenUnix(path); err != nil {
			return nil, nil, false, fmt.Errorf("--http %s: %w", f.addr, err)
		}
		peers = &peerListener{Listener: ln, uid: os.Getuid(), logger: slog.New(slog.DiscardHandler)}
		return peers, peers, tokens != nil, nil
	}
	if f.addr == "" {
		return nil, nil, auth, nil
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return nil, nil, false, usageError{fmt.Errorf("--http %q: want host:port: %w", f.addr, err)}
	}
	if f.noAuth && !loopbackListen(host) {
		return nil, nil, false, usageError{fmt.Errorf("--no-auth on %q: anyone who can reach that address could run commands as you; serve a loopback address, or keep authentication", f.addr)}
	}
	if ln, err = net.Listen("tcp", f.addr); err != nil {
		return nil, nil, false, fmt.Errorf("--http: %w", err)
	}
	return ln, nil, auth, nil
}

// run serves until the client or a signal ends it, then closes every
// shell.
func (f *serveFlags) run(cmd *cobra.Command, g *globals) error {
	wd, err := resolveWorkdir(f.workdir)
	if err != nil {
		return err
	}
	tokens, tlsConfig, err := f.check(cmd)
	if err != nil {
		return err
	}
	auditLog, err := f.openAudit()
	if err != nil {
		return err
	}
	if auditLog != nil {
		defer auditLog.Close()
	}
	ln, peers, auth, err := f.listen(tokens)
	if err != nil {
		return err
	}
	if ln != nil {
		defer ln.Close()
	}
	// The side servers listen before loading too, on loopback or a unix
	// socket only.
	var front *mcpfront.Front
	var m *metrics
	var h *host.Host
	var metricsLn, pprofLn net.Listener
	if f.metricsAddr != "" {
		if metricsLn, err = listenSide("metrics", f.metricsAddr); err != nil {
			return err
		}
		defer metricsLn.Close()
		m = newMetrics(func() *mcpfront.Front { return front }, func() []host.Instance {
			if h == nil {
				return nil
			}
			return h.Instances()
		})
	}
	if f.pprofAddr != "" {
		if pprofLn, err = listenSide("pprof", f.pprofAddr); err != nil {
			return err
		}
		defer pprofLn.Close()
	}
	creds, err := f.credentials(tokens, ln, auth, metricsLn, pprofLn)
	if err != nil {
		return err
	}
	side := sideLines(metricsLn, pprofLn, creds)
	ctx, cancelServe := context.WithCancel(cmd.Context())
	defer cancelServe()
	hurry := onSignals(cancelServe)
	defer hurry.stop()
	// A client that dies closes dsh's stdout and stderr with it. A later
	// write there (a response, a log line) must fail with EPIPE, not kill
	// dsh with SIGPIPE before its shells are closed. Notify, not Ignore: an
	// ignored signal would stay ignored in every shell dsh starts.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	scope := keepingScope(cmd, f.addr, f.session)
	h, err = g.loadHost(ctx, wd, keepingOptions(scope, f.keepShells)...)
	if err != nil {
		return err
	}
	if peers != nil {
		peers.logger = h.Logger()
	}
	opts := mcpfront.Options{Workdir: wd, Logger: h.Logger(), Version: versionString(), AllowedRoots: f.allowRoots, Audit: auditLog, NoFastPath: !f.fastPath}
	if f.session != "" {
		opts.OwnerID, opts.DetachOwners = sessionOwnerID(f.session), true
	}
	if m != nil {
		opts.Calls = m
	}
	front = mcpfront.New(h, opts)
	serving := "stdio"
	if ln != nil {
		serving = ln.Addr().String()
	}
	stopAdmin := startAdmin(h, front, serving, h.Logger())
	defer stopAdmin()
	var sides []*sideServer
	if metricsLn != nil {
		sides = append(sides, startSideServer(metricsLn, creds.guard(metricsLn, m.handler()), h.Logger()))
	}
	if pprofLn != nil {
		sides = append(sides, startSideServer(pprofLn, creds.guard(pprofLn, pprofHandler()), h.Logger()))
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		for _, s := range sides {
			s.stop(sctx)
		}
	}()
	if ln == nil {
		for _, line := range side {
			fmt.Fprintf(g.stderr, "dsh: %s\n", line)
		}
		err = serveStdio(ctx, g, front, h.Logger())
	} else {
		opts := mcpfront.HTTPOptions{
			IdleTimeout:  f.idleTimeout,
			OrphanGrace:  f.orphanGrace,
			Tokens:       creds.front,
			ListenHost:   listenHost(ln.Addr()),
			AllowedHosts: f.allowed,
			MaxSessions:  f.maxSessions,
		}
		if scope != "" {
			if opts.Sessions, err = openSessionStore(scope); err != nil {
				return errors.Join(err, front.Close(ctx), h.Close(ctx))
			}
		}
		err = serveHTTP(ctx, g, front, ln, httpServe{opts: opts, auth: auth, addr: f.addr, tokenPath: creds.frontPath, tls: tlsConfig}, side, h.Logger())
	}
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	hurry.then(cancel)
	return errors.Join(err, front.Close(closeCtx), h.Close(closeCtx))
}

// shutdownSignals turns SIGINT and SIGTERM into a shutdown that always
// kills what the shells started. The first signal ends serving, and the
// clean shutdown begins. A later one (an agent client that shares dsh's
// process group passes on a person's Ctrl-C and then signals dsh itself)
// cuts the host's close short: what it still waits for gives up, and each
// backend kills what it still has, outright. A session already closing
// finishes its TERM-then-KILL sweep, which disposeGraceMs bounds. The
// default action, which would end dsh with its shells' processes alive,
// never comes back.
type shutdownSignals struct {
	sigs  chan os.Signal
	done  chan struct{}
	mu    sync.Mutex
	again bool   // a second signal came
	hurry func() // what to do on it
}

func onSignals(first func()) *shutdownSignals {
	s := &shutdownSignals{sigs: make(chan os.Signal, 4), done: make(chan struct{})}
	signal.Notify(s.sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-s.sigs:
			first()
		case <-s.done:
			return
		}
		for {
			select {
			case <-s.sigs:
				s.mu.Lock()
				s.again = true
				hurry := s.hurry
				s.mu.Unlock()
				if hurry != nil {
					hurry()
				}
			case <-s.done:
				return
			}
		}
	}()
	return s
}

// then sets what a second signal does, at once if one came already.
func (s *shutdownSignals) then(hurry func()) {
	s.mu.Lock()
	s.hurry = hurry
	again := s.again
	s.mu.Unlock()
	if again {
		hurry()
	}
}

func (s *shutdownSignals) stop() {
	signal.Stop(s.sigs)
	close(s.done)
}

// serveStdio serves one session on the command's stdin and stdout, until
// stdin ends or ctx is done.
func serveStdio(ctx context.Context, g *globals, front *mcpfront.Front, logger *slog.Logger) error {
	in, ok := g.stdin.(io.ReadCloser)
	if !ok {
		in = io.NopCloser(g.stdin)
	}
	if f, ok := in.(*os.File); ok {
		in = pollable(f)
	}
	return front.Serve(ctx, &mcpfront.StdioTransport{Reader: in, Writer: g.stdout, Logger: logger})
}

// pollable returns stdin as a file the runtime's poller waits on, when it
// is a pipe or a socket (what an MCP client connects). os.Stdin reads block
// a thread in read(2); the runtime then hands that thread's work to
// another at every message, and its monitor thread, kept busy by these
// hand-offs, wakes every 20 µs: that cost more than a tenth of the
// server's CPU per call. A terminal or a file is left as it is.
func pollable(f *os.File) io.ReadCloser {
	var st unix.Stat_t
	fd := int(f.Fd()) // Fd leaves the descriptor in blocking mode
	if err := unix.Fstat(fd, &st); err != nil {
		return f
	}
	if mode := st.Mode & unix.S_IFMT; mode != unix.S_IFIFO && mode != unix.S_IFSOCK {
		return f
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return f
	}
	return &nonblockingFile{File: os.NewFile(uintptr(fd), f.Name()), fd: fd}
}

// nonblockingFile is a descriptor pollable set non-blocking. Close puts it
// back in blocking mode first: the mode belongs to the open pipe, which
// other processes may share.
type nonblockingFile struct {
	*os.File
	fd int
}

func (f *nonblockingFile) Close() error {
	_ = unix.SetNonblock(f.fd, false)
	return f.File.Close()
}

// httpServe is how serveHTTP serves: the handler's options, whether
// requests need a token, the --http address as given, the file of the
// token dsh keeps for it ("" when it uses none of its own), and TLS (nil:
// plain HTTP).
type httpServe struct {
	opts      mcpfront.HTTPOptions
	auth      bool
	addr      string
	tokenPath string
	tls       *tls.Config
}

// serveHTTP serves streamable HTTP on ln until ctx is done.
func serveHTTP(ctx context.Context, g *globals, front *mcpfront.Front, ln net.Listener, hs httpServe, side []string, logger *slog.Logger) error {
	opts, auth := hs.opts, hs.auth
	scheme := "http"
	if hs.tls != nil {
		scheme = "https"
	}
	url := fmt.Sprintf("%s://%s/mcp", scheme, ln.Addr())
	var notes []string
	_, isUnix := ln.Addr().(*net.UnixAddr)
	switch {
	case isUnix && opts.Tokens == nil:
		url = fmt.Sprintf("%s%s (HTTP path /mcp)", unixPrefix, ln.Addr())
		notes = append(notes, fmt.Sprintf("only processes of uid %d may connect; no token is needed", os.Getuid()))
	case isUnix:
		url = fmt.Sprintf("%s%s (HTTP path /mcp)", unixPrefix, ln.Addr())
		notes = append(notes, `clients must send "Authorization: Bearer <token>" with a token of --token-file`)
	case !auth:
		notes = append(notes, "WARNING: --no-auth: any local user, container or sandboxed process that reaches "+url+" can run commands as you")
	case hs.tokenPath != "":
		path := hs.tokenPath
		notes = append(notes, fmt.Sprintf(`clients must send "Authorization: Bearer <token>"; the token is in %s (kept for the next start: --rotate-token makes a new one, --token-file %s serves it on another address)`, path, path))
		for _, s := range clientSnippets(url, path) {
			notes = append(notes, "  "+s)
		}
	default:
		notes = append(notes, `clients must send "Authorization: Bearer <token>" with a token of --token-file`)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && hs.tls == nil && !tcp.IP.IsLoopback() {
		notes = append(notes, fmt.Sprintf("WARNING: plain HTTP on %s, which is not a loopback address: the token and every command and its output cross the network unencrypted; serve HTTPS with --tls-cert and --tls-key, or put a TLS proxy or an SSH tunnel in front of a loopback address", hs.addr))
	}
	if hs.tls != nil {
		ln = tls.NewListener(ln, hs.tls)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", front.Handler(opts))
	srv := &http.Server{
		Handler: mux,
		// A client that connects and sends nothing, or stays idle between
		// requests, gives its connection back; a trickled body is bounded
		// by the handler.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	// Not log records: the lines a person needs, at any --log-level.
	fmt.Fprintf(g.stderr, "dsh: serving MCP (streamable HTTP) at %s\n", url)
	for _, n := range append(notes, side...) {
		fmt.Fprintf(g.stderr, "dsh: %s\n", n)
	}
	select {
	case err := <-served:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	// Shutdown stops accepting and waits for the running requests, but
	// the sessions' SSE streams and calls end only when the front closes
	// them; so both run together.
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	var shutdownErr, closeErr error
	var wg sync.WaitGroup
	wg.Go(func() { shutdownErr = srv.Shutdown(closeCtx) })
	wg.Go(func() { closeErr = front.Close(closeCtx) })
	wg.Wait()
	if shutdownErr != nil {
		srv.Close()
	}
	<-served // http.ErrServerClosed
	return errors.Join(closeErr, shutdownErr)
}

// loopbackListen reports whether a listen host is a loopback address or
// name (and not a wildcard, which listens everywhere).
func loopbackListen(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// listenHost is the host requests may name besides loopback ones: the
// listen address's IP, or "" for a wildcard.
func listenHost(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.IsUnspecified() {
		return ""
	}
	return tcp.IP.String()
}

// defaultMaxSessions sizes --max-sessions for this machine: each session
// has a shell (a few MiB) and a handful of descriptors.
func defaultMaxSessions() int {
	n := 4096
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil {
		n = min(n, int(min(rl.Cur/16, uint64(n))))
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil {
		n = min(n, int(uint64(si.Totalram)*uint64(si.Unit)/(8<<20)))
	}
	return max(n, 16)
}

// resolveWorkdir checks a --workdir flag; empty means the current directory.
func resolveWorkdir(dir string) (string, error) {
	if dir == "" {
		return os.Getwd()
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", usageError{fmt.Errorf("--workdir %q is not a directory", dir)}
	}
	return dir, nil
}

// loadTLS loads --tls-cert and --tls-key; nil when neither is given.
func (f *serveFlags) loadTLS() (*tls.Config, error) {
	switch {
	case f.tlsCert == "" && f.tlsKey == "":
		return nil, nil
	case f.tlsCert == "" || f.tlsKey == "":
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if _, ok := isUnixAddr(f.addr); ok {
		return nil, errors.New("--tls-cert: a unix socket needs no TLS (only your own processes reach it)")
	}
	cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// openAudit opens --audit-log; nil without it.
func (f *serveFlags) openAudit() (*audit.Log, error) {
	if f.auditLog == "" {
		if len(f.auditRedact) > 0 {
			return nil, usageError{errors.New("--audit-redact needs --audit-log")}
		}
		return nil, nil
	}
	l, err := audit.Open(f.auditLog, f.auditRedact)
	if err != nil {
		return nil, usageError{fmt.Errorf("--audit-log: %w", err)}
	}
	return l, nil
}
