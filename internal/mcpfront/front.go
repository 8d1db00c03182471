package mcpfront

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/audit"
	"github.com/dshdev/dsh/internal/mcpfast"
)

// Errors a call's context can be cancelled with (see context.Cause).
// ErrSessionClosed and ErrClosed are also the protocol errors of a call that
// arrives once its session, or the front, is closing.
var (
	ErrSessionClosed = errors.New("mcpfront: session closed")
	ErrClientGone    = errors.New("mcpfront: client disconnected")
	ErrClosed        = errors.New("mcpfront: closed")
)

// Options configures a Front.
type Options struct {
	// Workdir is every owner's workspace, where its shell starts. Default:
	// the current directory.
	Workdir string
	// Logger receives the front's and the SDK's logs. Default: discard.
	Logger *slog.Logger
	// Version is the server version reported to clients. Default: "devel".
	Version string
	// ProgressInterval is how often a call whose request has a progress
	// token reports that it is still running (the first report goes at
	// once). Default: 15 s.
	ProgressInterval time.Duration
	// Calls, when set, learns how every tool call went (metrics).
	Calls CallObserver
	// NoFastPath has the SDK answer every request on stdio and over
	// HTTP, tools/call included (dsh serve --mcp-fast-path=false; see package mcpfast):
	// slower, and independent of how the SDK writes its answers.
	NoFastPath bool
	// Audit, when set, gets a record of every tool call.
	Audit *audit.Log
	// AllowedRoots are directories a client's workspace may be in: a
	// session whose client declares MCP roots gets its first root as its
	// workspace, instead of Workdir, if that root is one of these or
	// below one (symlinks resolved). Empty: every owner works in Workdir.
	AllowedRoots []string
	// OwnerID, when set, is the id of every owner this front makes
	// instead of a random one: the one owner of a named stdio session
	// (dsh serve --session), whose shell a keeper keeps for a later dsh's
	// owner of the same id. Only for a front that serves one session at a
	// time.
	OwnerID string
	// DetachOwners lets the owner of a session that ends go (host.Owner.
	// Detach) rather than close it: its shell stays with its keeper, for
	// a later dsh (dsh serve --session).
	DetachOwners bool
}

// CallObserver learns how each tool call went: the tool, the outcome
// (OutcomeOK, OutcomeError, OutcomeCancelled) and how long it took.
type CallObserver interface {
	ObserveCall(tool, outcome string, took time.Duration)
}

// Call outcomes, as a CallObserver sees them.
const (
	OutcomeOK        = "ok"
	OutcomeError     = "error"     // an error result (the model sees it)
	OutcomeCancelled = "cancelled" // the client cancelled or went away
)

// defaultProgressInterval keeps clients that give up on a request after
// 60 s without a word (Claude Code and Gemini CLI over HTTP) waiting, with
// room to spare.
const defaultProgressInterval = 15 * time.Second

// Front serves a host's tools over MCP, one owner per session.
type Front struct {
	host   *host.Host
	server *mcp.Server
	impl   *mcp.Implementation
	// fastEncoder writes the answers of the stdio fast path; nil when it
	// is off (Options.NoFastPath).
	fastEncoder *mcpfast.Encoder
	// toolNames are the tools a fast path may answer a call of;
	// statefulVersions the protocol versions the SDK serves over stateful
	// HTTP, which a call answered by dsh may carry in its header.
	toolNames        map[string]bool
	statefulVersions map[string]bool
	httpCalls        httpCalls
	httpServed       atomic.Int64 // calls the HTTP handler answered itself
	workdir          string
	ownerID          string // Options.OwnerID
	detach           bool   // Options.DetachOwners
	// store, over HTTP with kept shells, remembers the sessions for a
	// later dsh (HTTPOptions.Sessions); reviving serializes handing the
	// SDK a revived session's id (nextSessionID) with making new sessions,
	// so that only the revive's session takes it; revives are the ids
	// being revived.
	store         *SessionStore
	reviving      sync.RWMutex
	nextSessionID atomic.Pointer[string]
	revives       revivals
	logger        *slog.Logger
	progress      time.Duration
	calls         CallObserver
	requests      requests
	users         sessionUsers // over HTTP: who opened each session
	sessions      sessionSlots // over HTTP: sessions being opened
	roots         []string     // Options.AllowedRoots, resolved
	audit         *audit.Log

	mu      sync.Mutex
	closing bool
	orphans []*orphans // of the HTTP handlers, stopped on Close
	idles   []*idleSessions
	// owners holds each session's owner from its first call until the
	// session has ended (its Wait returned), closed owners included, so that
	// a session that is ending never gets a new one. A nil owner marks a
	// session Serve is ending before it had one.
	owners map[*mcp.ServerSession]*host.Owner
	// states are the sessions with an owner (sessions.go).
	states map[*mcp.ServerSession]*sessionState
	// watchers close an owner when its session ends; Close waits for them.
	watchers sync.WaitGroup
}

// New builds the MCP server for h's tools as they are now. It does not take
// ownership of h: close the front first, then the host.
func New(h *host.Host, opts Options) *Front {
	if opts.Workdir == "" {
		opts.Workdir = "."
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "devel"
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = defaultProgressInterval
	}
	f := &Front{
		host:     h,
		progress: opts.ProgressInterval,
		calls:    opts.Calls,
		workdir:  opts.Workdir,
		logger:   opts.Logger,
		owners:   make(map[*mcp.ServerSession]*host.Owner),
		states:   make(map[*mcp.ServerSession]*sessionState),
		audit:    opts.Audit,
		ownerID:  opts.OwnerID,
		detach:   opts.DetachOwners,
	}
	for _, dir := range opts.AllowedRoots {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			f.roots = append(f.roots, real)
		} else {
			f.logger.Warn("an allowed root is not usable", "dir", dir, "error", err)
		}
	}
	var instructions []string
	for _, t := range h.Tools().List() {
		if t.Instructions != "" {
			instructions = append(instructions, t.Instructions)
		}
	}
	f.impl = &mcp.Implementation{Name: "dsh", Version: opts.Version}
	if !opts.NoFastPath {
		f.fastEncoder = mcpfast.NewEncoder(f.impl)
		f.toolNames = make(map[string]bool)
		for _, t := range h.Tools().List() {
			f.toolNames[t.Name] = true
		}
		f.statefulVersions = make(map[string]bool)
		for _, v := range mcp.SupportedProtocolVersions() {
			if v < mcpfast.PerRequestProtocol {
				f.statefulVersions[v] = true
			}
		}
	}
	f.server = mcp.NewServer(f.impl, &mcp.ServerOptions{
		// The tools' own instructions, which clients show the model.
		Instructions: strings.Join(instructions, "\n\n"),
		Logger:       slog.New(redactSessionIDs(opts.Logger.Handler())).With("component", "mcp"),
		// Tools only: no logging capability (the SDK's default), no list
		// changes (the tool set is fixed when New runs).
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		GetSessionID: f.sessionID,
	})
	// The raw AddTool takes our schema verbatim; the generic mcp.AddTool
	// would infer one from a Go type. It panics on a schema whose type is
	// not "object" or that misuses x-mcp-header, both of which the host's
	// Tools.Register already rejects.
	for _, t := range h.Tools().List() {
		f.server.AddTool(&mcp.Tool{
			Name:        t.Name,
			Description: t.Description,
			InputSchema: t.InputSchema,
		}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return f.call(ctx, t.Name, req)
		})
	}
	return f
}

func (f *Front) call(ctx context.Context, name string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	owner, err := f.ownerFor(req.Session, func() string { return f.workspace(ctx, req.Session) })
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	ctx, done := f.callContext(ctx, owner, req.Extra)
	defer done()
	ctx, later := withAsker(ctx, req)
	if token := req.Params.GetProgressToken(); token != nil {
		// Over HTTP the first report goes at once: it puts the response's
		// headers on the wire. Over stdio it has no use, and a report that
		// reaches the client in the same read as the response is taken
		// for an unknown token (see lineConn.writeAnswer).
		atOnce := req.Extra != nil && req.Extra.Header != nil
		tail := new(outputTail)
		ctx = host.WithOutput(ctx, tail.add)
		defer f.reportProgress(ctx, req.Session, token, atOnce, tail)()
	}
	start := time.Now()
	st := f.beginCall(req.Session, owner, req.Extra, name, req.Params.Arguments, start)
	var notes *host.Notes
	if f.audit != nil {
		ctx, notes = host.WithNotes(ctx)
	}
	res := f.host.Tools().Call(ctx, owner, name, req.Params.Arguments)
	ended := f.endCall(st)
	outcome := OutcomeOK
	switch {
	case ctx.Err() != nil:
		outcome = OutcomeCancelled
	case res.IsError:
		outcome = OutcomeError
	}
	if f.calls != nil {
		f.calls.ObserveCall(name, outcome, time.Since(start))
	}
	if f.audit != nil {
		f.auditCall(st, name, req.Params.Arguments, start, outcome, res, notes.Map())
	}
	if errors.Is(context.Cause(ctx), context.Canceled) {
		// The client cancelled the request (notifications/cancelled):
		// it wants no answer. Over HTTP the POST's response goes quiet
		// here; over stdio the transport drops the answer itself.
		f.requests.silence(req.Extra)
	}
	if ended {
		// The session is going away under the call: the client learns it
		// from an error, never from a result that looks like a run.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: ErrSessionEnded.Error()}
	}
	var ask *host.InputRequired
	if later && errors.As(res.Err, &ask) {
		return inputRequired(ask), nil
	}
	if res.IsError {
		f.logger.Debug("tool call failed", "tool", name, "owner", owner.ID(), "error", res.Text)
	}
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: res.Text}},
		IsError: res.IsError,
	}, nil
}

// reportProgress sends notifications/progress for a running call: with
// atOnce one at once, which over HTTP also puts the response's headers on
// the wire, then one every f.progress, with the time the call has run and
// the last lines of output it has printed (tail). Clients that give up on
// a silent request (60 s in Claude Code and Gemini CLI) wait as long as the
// command runs. The returned func stops it.
func (f *Front) reportProgress(ctx context.Context, ss *mcp.ServerSession, token any, atOnce bool, tail *outputTail) (stop func()) {
	start := time.Now()
	// A client forgets a call's progress token when it cancels the call
	// or gets its answer, and then takes a late report for an error of the
	// connection (Claude Code: "Received a progress notification for an
	// unknown token"). So a report is made only while the call runs: the
	// check of ctx and the write share a lock with the end of reporting,
	// and a cancellation (which cancels ctx at once) is seen by every
	// report that starts after it.
	notify := ss.NotifyProgress
	if sink, ok := ctx.Value(progressSinkKey{}).(progressSink); ok {
		notify = sink // the call's own stream, where dsh answers it
	}
	var mu sync.Mutex
	over := false
	report := func() {
		mu.Lock()
		defer mu.Unlock()
		if over || ctx.Err() != nil {
			return
		}
		elapsed := time.Since(start).Round(time.Second)
		message := "running for " + elapsed.String()
		if last := tail.String(); last != "" {
			message += "; last output:\n" + last
		}
		err := notify(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      elapsed.Seconds(),
			Message:       message,
		})
		if err != nil {
			f.logger.Debug("progress notification failed", "error", err)
		}
	}
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		if atOnce {
			report()
		}
		tick := time.NewTicker(f.progress)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				report()
			case <-quit:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
		mu.Lock()
		over = true // no report after the result
		mu.Unlock()
	}
}

// callContext derives a call's context: ctx (cancelled by the client's
// notifications/cancelled), also cancelled when the owner starts closing and,
// over HTTP, when the POST carrying the call has gone. done releases it.
func (f *Front) callContext(ctx context.Context, owner *host.Owner, extra *mcp.RequestExtra) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-owner.Done():
			cancel(ErrSessionClosed)
		case <-ctx.Done():
		}
	}()
	stop := f.requests.watch(extra, func() { cancel(ErrClientGone) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// ownerFor returns the session's owner, creating it on first use, in the
// workspace workdir returns, together with the watcher that closes it when
// the session ends.
func (f *Front) ownerFor(ss *mcp.ServerSession, workdir func() string) (*host.Owner, error) {
	f.mu.Lock()
	_, ok := f.owners[ss]
	f.mu.Unlock()
	dir := f.workdir
	if !ok && workdir != nil {
		dir = workdir() // it may ask the client: not under the lock
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return nil, ErrClosed
	}
	if o, ok := f.owners[ss]; ok {
		if o == nil || !o.Live() {
			return nil, ErrSessionClosed
		}
		return o, nil
	}
	// Random, never the session id: over HTTP that id is the session's only
	// credential, and the owner id reaches the shell's environment
	// (DSH_SESSION_ID) and the logs.
	id := f.ownerID
	var stored storedSession
	var revived bool
	if f.store != nil {
		// A session from before dsh restarted gets its owner back, whose
		// kept shell is then taken back, in its workspace.
		if stored, revived = f.store.get(ss.ID()); revived {
			id, dir = stored.Owner, stored.Workdir
		}
	}
	if id == "" {
		id = host.NewOwnerID("mcp")
	}
	o, err := f.host.NewOwner(id, dir)
	if err != nil {
		return nil, fmt.Errorf("mcpfront: new owner: %w", err)
	}
	if f.store != nil && !revived {
		if err := f.store.put(ss.ID(), storedSession{User: f.users.user(ss.ID()), Owner: id, Workdir: o.Workdir()}); err != nil {
			f.logger.Warn("a session's shell will not be found after a restart", "owner", id, "error", err)
		}
	}
	f.owners[ss] = o
	f.logger.Debug("owner created", "owner", o.ID(), "workdir", o.Workdir())
	f.watchers.Go(func() {
		err := ss.Wait()
		f.logger.Debug("session ended", "owner", o.ID(), "error", err)
		f.closeOwner(context.Background(), ss)
		f.forget(ss)
	})
	return o, nil
}

// closeOwner closes the session's owner, if it has one. Concurrent calls for
// one session all return once the owner is closed. The owner stays in
// f.owners (see forget).
func (f *Front) closeOwner(ctx context.Context, ss *mcp.ServerSession) error {
	f.mu.Lock()
	o := f.owners[ss]
	f.mu.Unlock()
	if o == nil {
		return nil
	}
	f.mu.Lock()
	closing := f.closing
	f.mu.Unlock()
	end := o.Close
	switch {
	case f.detach, f.store != nil && closing:
		// dsh stops with the shells kept: they wait for the next dsh.
		end = o.Detach
	case f.store != nil:
		// The session ends (DELETE, idle): so does its shell, for good.
		if err := f.store.remove(ss.ID()); err != nil {
			f.logger.Warn("forgetting an ended session failed", "owner", o.ID(), "error", err)
		}
	}
	err := end(ctx)
	if err != nil {
		f.logger.Warn("closing owner failed", "owner", o.ID(), "error", err)
	}
	return err
}

// forget drops the session's entry. Only once the session has ended (its
// Wait returned): no call of it can arrive any more.
func (f *Front) forget(ss *mcp.ServerSession) {
	f.mu.Lock()
	delete(f.owners, ss)
	delete(f.states, ss)
	f.mu.Unlock()
	f.users.forget(ss.ID())
}

// Serve runs one MCP session over t (stdio, in-memory) until the client
// disconnects or ctx is done, then closes the session's owner. A client that
// leaves is a normal end (nil); a broken connection is an error.
func (f *Front) Serve(ctx context.Context, t mcp.Transport) error {
	st, _ := t.(*StdioTransport)
	if st != nil && f.fastEncoder != nil && !st.sdkOnly {
		st.ready = make(chan struct{})
	}
	cctx := ctx
	if f.detach {
		// The calls must not end with ctx before the owner is let go:
		// its kept shell takes a running command to its keeper first
		// (see the AfterFunc below, and host.Owner.Detach).
		cctx = context.WithoutCancel(ctx)
	}
	ss, err := f.server.Connect(cctx, t, nil)
	var conn *lineConn
	if st != nil && st.ready != nil {
		if conn = st.conn.Load(); conn != nil && err == nil {
			conn.fast.Store(newFastCalls(f, ss))
		}
		close(st.ready)
	}
	if err != nil {
		return fmt.Errorf("mcpfront: connect: %w", err)
	}
	// On ctx, close the owner first: that cancels its calls, which ss.Close
	// would otherwise wait for.
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(closed)
		f.mu.Lock()
		if _, ok := f.owners[ss]; !ok {
			f.owners[ss] = nil // no call may make one from now on
		}
		f.mu.Unlock()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownCloseTimeout)
		defer cancel()
		f.closeOwner(cctx, ss)
		ss.Close()
	})
	werr := ss.Wait()
	if !stop() {
		<-closed // it ran: let it finish, so nothing outlives Serve
	}
	f.mu.Lock()
	if ctx.Err() != nil || f.closing {
		werr = nil // we closed the connection: how its reader ended is no news
	}
	f.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownCloseTimeout)
	defer cancel()
	err = f.closeOwner(cctx, ss)
	if conn != nil {
		conn.waitCalls() // closing the owner ended them
	}
	f.forget(ss)
	return errors.Join(werr, err)
}

// shutdownCloseTimeout bounds closing a session's owner when Serve ends: a
// shell with an unkillable process must not keep dsh from exiting.
const shutdownCloseTimeout = 10 * time.Second

// SessionCount is how many MCP sessions are open (initialized).
func (f *Front) SessionCount() int { return f.sessionCount() }

// Close closes every owner (cancelling their calls and closing their shells)
// and every session, and waits for the session watchers. New calls are
// refused from the start. The host is not closed.
func (f *Front) Close(ctx context.Context) error {
	f.mu.Lock()
	f.closing = true
	sessions := make([]*mcp.ServerSession, 0, len(f.owners))
	for ss := range f.owners {
		sessions = append(sessions, ss)
	}
	orphans, idles := f.orphans, f.idles
	f.mu.Unlock()
	for _, o := range orphans {
		o.stop()
	}
	for _, i := range idles {
		i.stop()
	}

	errs := make([]error, len(sessions))
	var wg sync.WaitGroup
	for i, ss := range sessions {
		wg.Go(func() { errs[i] = f.closeOwner(ctx, ss) })
	}
	wg.Wait()
	for ss := range f.server.Sessions() {
		wg.Go(func() { ss.Close() })
	}
	waited := make(chan struct{})
	go func() {
		wg.Wait()
		f.watchers.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("mcpfront: waiting for sessions to close: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

// rootsBound bounds asking a client for its roots: a client that declared
// them but does not answer gets Workdir.
const rootsBound = 10 * time.Second

// workspace is where a new owner of ss works: the client's first MCP root,
// when the client declares roots and that root lies within an allowed
// directory; otherwise Workdir. A root outside them is refused, with a
// log line that says why.
func (f *Front) workspace(ctx context.Context, ss *mcp.ServerSession) string {
	if len(f.roots) == 0 || ss == nil {
		return f.workdir
	}
	// Roots are deprecated from protocol 2026-07-28 (SEP-2577), but HTTP
	// sessions are held at 2025-11-25 (see the package doc), where they
	// are what clients declare their workspace with.
	ip := ss.InitializeParams()
	//lint:ignore SA1019 see above
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.RootsV2 == nil {
		return f.workdir
	}
	ctx, cancel := context.WithTimeout(ctx, rootsBound)
	defer cancel()
	res, err := ss.ListRoots(ctx, nil) //lint:ignore SA1019 see above
	if err != nil {
		f.logger.Info("the client's roots could not be listed; the session works in the default workspace", "error", err)
		return f.workdir
	}
	if len(res.Roots) == 0 {
		return f.workdir
	}
	dir, err := f.allowedRoot(res.Roots[0].URI)
	if err != nil {
		f.logger.Warn("the client's first root is refused; the session works in the default workspace", "root", res.Roots[0].URI, "error", err)
		return f.workdir
	}
	return dir
}

// allowedRoot returns the directory a root's file URI names, symlinks
// resolved, if it is an allowed root or lies below one.
func (f *Front) allowedRoot(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") || !filepath.IsAbs(u.Path) {
		return "", fmt.Errorf("not a local file URI")
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(u.Path))
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", real)
	}
	for _, allowed := range f.roots {
		if rel, err := filepath.Rel(allowed, real); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return real, nil
		}
	}
	return "", fmt.Errorf("%s is not within an --allow-root directory", real)
}

// outputTail keeps the last lines of a call's output, for its progress
// reports: progressLines lines of at most progressLineRunes characters.
type outputTail struct {
	mu      sync.Mutex
	lines   []string
	partial string // the line being written
}

const (
	progressLines     = 3
	progressLineRunes = 200
)

// add takes output text as the tool hands it on (host.Output).
func (t *outputTail) add(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	text = t.partial + text
	complete := strings.LastIndexByte(text, '\n')
	if complete < 0 {
		t.partial = clipRunes(text, progressLineRunes)
		return
	}
	t.partial = clipRunes(text[complete+1:], progressLineRunes)
	text = text[:complete]
	// Only the last lines of a large chunk matter.
	start := len(text)
	for range progressLines {
		if start <= 0 {
			break
		}
		start = strings.LastIndexByte(text[:start], '\n')
	}
	for line := range strings.SplitSeq(text[start+1:], "\n") {
		t.lines = append(t.lines, clipRunes(line, progressLineRunes))
	}
	if n := len(t.lines); n > progressLines {
		t.lines = append(t.lines[:0], t.lines[n-progressLines:]...)
	}
}

// String is the last lines, the line being written included.
func (t *outputTail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if t.partial != "" {
		lines = append(lines[:len(lines):len(lines)], t.partial)
	}
	if len(lines) > progressLines {
		lines = lines[len(lines)-progressLines:]
	}
	return strings.Join(lines, "\n")
}

// clipRunes cuts s to n characters, marking the cut with an ellipsis.
func clipRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
