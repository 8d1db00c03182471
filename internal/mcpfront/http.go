package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configures Handler.
type HTTPOptions struct {
	// IdleTimeout closes a session, and with it its owner and shell, once
	// the client has sent no request for this long. A running call keeps
	// its session alive. Zero means never: abandoned sessions then keep
	// their shells until the server stops.
	IdleTimeout time.Duration
	// OrphanGrace closes a session whose client has closed its standalone
	// GET stream and sent nothing since, for this long, with no call
	// running: a client that left without a DELETE. Zero selects
	// DefaultOrphanGrace; negative turns it off (IdleTimeout still
	// applies).
	OrphanGrace time.Duration
	// Tokens, when set, are the bearer tokens every request must carry
	// (401 otherwise); each session belongs to the token that opened it.
	// Nil serves without authentication.
	Tokens *Tokens
	// ListenHost is the host part of the listen address, which requests
	// may name in their Host header besides loopback names; "" for a
	// wildcard address.
	ListenHost string
	// AllowedHosts are further Host names requests may carry (a name the
	// server is reached by through a proxy or a tunnel).
	AllowedHosts []string
	// MaxSessions bounds the open sessions: a client that would open one
	// more is answered 503 with a message saying so. Zero means no bound.
	MaxSessions int
	// Sessions, when set, keeps the sessions whose owners' shells are
	// kept past dsh (dsh serve --http --keep-shells): a dsh started again
	// honours their ids, for the token identity that opened each, and its
	// owner takes the same shell back. Owners are then let go, not
	// closed, when dsh stops; a session that ends (DELETE, the idle
	// timeout) ends its shell as without it.
	Sessions *SessionStore
	// BodyTimeout bounds how long a request's body may take to arrive,
	// from the end of its headers. Zero selects DefaultBodyTimeout.
	BodyTimeout time.Duration
}

// Handler returns the streamable HTTP handler (stateful: one Mcp-Session-Id
// per client session, each with its own owner). Mount it at /mcp. It keeps
// the SDK's DNS-rebinding protection and adds cross-origin protection, so a
// web page cannot drive a local shell.
func (f *Front) Handler(opts HTTPOptions) http.Handler {
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.server }, &mcp.StreamableHTTPOptions{
		// No SessionTimeout: idle (below) times every session, since the
		// SDK does not see the calls dsh answers itself.
		//
		// The Host check below covers every connection, loopback ones
		// included, and knows the names a deployment allows; the SDK's
		// would refuse those on a loopback connection (a tunnel's name).
		DisableLocalhostProtection: true,
		Logger:                     slog.New(redactSessionIDs(f.logger.Handler())).With("component", "mcp-http"),
	})
	grace := opts.OrphanGrace
	if grace == 0 {
		grace = DefaultOrphanGrace
	}
	orphans := newOrphans(grace, f.closeSessionByID)
	idle := newIdleSessions(opts.IdleTimeout, f.closeSessionByID)
	f.mu.Lock()
	f.orphans = append(f.orphans, orphans)
	f.idles = append(f.idles, idle)
	if opts.Sessions != nil {
		f.store = opts.Sessions
	}
	f.mu.Unlock()
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(sessionIDHeader)
		if opts.Sessions != nil && id != "" && !f.users.known(id) {
			if rec, ok := opts.Sessions.get(id); ok {
				// A session from before dsh restarted: only the token
				// identity that opened it may take it back.
				if rec.User != requestUser(r) {
					http.Error(w, "forbidden: the session belongs to another token", http.StatusForbidden)
					return
				}
				if err := f.revive(sdk, r, id, rec.User, idle); err != nil {
					f.logger.Warn("reviving a session from before the restart failed", "error", err)
					http.Error(w, "session not found", http.StatusNotFound)
					return
				}
			}
		}
		// Every check comes before any effect: the SDK checks the user
		// itself, but only after the DELETE below has closed the owner.
		if !f.users.allows(id, requestUser(r)) {
			http.Error(w, "forbidden: the session belongs to another token", http.StatusForbidden)
			return
		}
		if err := readBody(w, r); err != nil {
			http.Error(w, err.Error(), bodyErrorStatus(err))
			return
		}
		if r.Method == http.MethodDelete && !f.users.known(id) {
			// Every session dsh serves was recorded when it was made: this
			// one is not a session (the SDK would answer the same).
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodPost && id == "" {
			// The SDK makes a session for every POST without one, whatever
			// the body holds (dsh does not decide what the SDK will read in
			// it), so each is counted and bound to its token.
			msgs, batch := postMessages(r)
			if batch && slices.ContainsFunc(msgs, isInitialize) {
				http.Error(w, "an initialize request must come on its own, not in a JSON-RPC batch", http.StatusBadRequest)
				return
			}
			// No session is made while one is revived (see revive).
			f.reviving.RLock()
			defer f.reviving.RUnlock()
			release, ok := f.sessions.reserve(opts.MaxSessions, f.sessionCount)
			if !ok {
				http.Error(w, fmt.Sprintf("dsh has %d sessions open, its limit (--max-sessions); close one or raise the limit", opts.MaxSessions), http.StatusServiceUnavailable)
				return
			}
			// Released once the answer starts: by then an initialize has
			// made its session, which counts among the open ones.
			defer release()
			user := requestUser(r)
			w = &recordingWriter{ResponseWriter: w, onHeader: func(hdr http.Header) {
				if sid := hdr.Get(sessionIDHeader); sid != "" && f.recordSession(sid, user, func() { idle.forget(sid) }) {
					idle.start(sid)
				}
				release()
			}}
		}
		switch r.Method {
		case http.MethodGet:
			defer orphans.begin(id, true)()
		case http.MethodPost:
			defer orphans.begin(id, false)()
			defer idle.begin(id)()
			req := postRequest(r)
			method := ""
			switch {
			case req != nil:
				method = req.Method
			default:
				method = postMethod(r)
			}
			if id != "" && req != nil && f.fastHTTP(w, r, id, req) {
				return
			}
			var endEarly, end func()
			w, endEarly = earlyHeaders(w, r, method, f.progress)
			defer endEarly()
			w, end = f.requests.begin(w, r)
			defer end()
		case http.MethodDelete:
			orphans.forget(id)
			// The SDK's DELETE waits for the session's running calls before
			// it ends the session; the client has just said it wants none of
			// them, so close the owner (cancelling them) first. Calls that
			// arrive meanwhile are refused (see ownerFor).
			f.endSessionByID(context.WithoutCancel(r.Context()), r.Header.Get(sessionIDHeader))
		}
		// The SDK gets a copy of the request: it replaces the body, and
		// net/http reads the original's while an early header goes out
		// from another goroutine (see earlyHeaders).
		sdk.ServeHTTP(w, r.Clone(r.Context()))
	})
	return Guard(h, GuardOptions{
		Tokens:       opts.Tokens,
		ListenHost:   opts.ListenHost,
		AllowedHosts: opts.AllowedHosts,
		BodyTimeout:  opts.BodyTimeout,
	})
}

// GuardOptions configures Guard.
type GuardOptions struct {
	// Tokens, when set, are the bearer tokens every request must carry
	// (401 otherwise). Nil serves without authentication.
	Tokens *Tokens
	// ListenHost and AllowedHosts are the names requests may carry in
	// their Host header besides loopback ones (see HTTPOptions).
	ListenHost   string
	AllowedHosts []string
	// BodyTimeout bounds a request body's arrival; zero selects
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
}

// Guard wraps h in the checks every dsh HTTP endpoint makes, in this order,
// each before any effect: the body's deadline, the Host header (against
// DNS rebinding), the Origin (no cross-origin request, GET included), then
// the bearer token. The MCP handler and the metrics and profile servers all
// sit behind it. A request a web page made is refused whatever it carries.
func Guard(h http.Handler, opts GuardOptions) http.Handler {
	if opts.Tokens != nil {
		h = challenge(auth.RequireBearerToken(opts.Tokens.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h))
	}
	inner := http.NewCrossOriginProtection().Handler(h)
	policy := hostPolicy{listen: opts.ListenHost, allowed: opts.AllowedHosts}
	return boundBody(opts.BodyTimeout, func(w http.ResponseWriter, r *http.Request) {
		if err := policy.check(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		if err := checkOrigin(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		inner.ServeHTTP(w, r)
	})
}

// sessionCount is how many initialized sessions are open. The SDK also
// makes a short-lived session for a request without one that is not an
// initialize (a client's server/discover probe); those do not count.
func (f *Front) sessionCount() int {
	n := 0
	for ss := range f.server.Sessions() {
		if ss.InitializeParams() != nil {
			n++
		}
	}
	return n
}

// postMessages decodes the JSON-RPC message, or batch of them, that a POST
// (whose body readBody has buffered) carries, the way the SDK decodes it;
// none for a body the SDK will refuse.
func postMessages(r *http.Request) (msgs []jsonrpc.Message, batch bool) {
	body, ok := r.Body.(interface{ Bytes() []byte })
	if !ok {
		return nil, false
	}
	data := bytes.TrimLeft(body.Bytes(), " \t\r\n")
	if len(data) > 0 && data[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(data, &raws) != nil {
			return nil, true
		}
		for _, raw := range raws {
			if msg, err := jsonrpc.DecodeMessage(raw); err == nil {
				msgs = append(msgs, msg)
			}
		}
		return msgs, true
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, false
	}
	return []jsonrpc.Message{msg}, false
}

// postRequest is the one JSON-RPC request or notification a POST (whose
// body readBody has buffered) carries, decoded as the SDK decodes it; nil
// for anything else (a batch, a response, a body that is not plain JSON).
func postRequest(r *http.Request) *jsonrpc.Request {
	body, ok := r.Body.(interface{ Bytes() []byte })
	if !ok {
		return nil
	}
	data := bytes.TrimSpace(body.Bytes())
	if len(data) == 0 || data[0] != '{' {
		return nil
	}
	if req, plain, _ := decodeLine(data); plain {
		return req
	}
	return nil
}

// postMethod is the method of the one JSON-RPC request a POST carries:
// "initialize", "tools/call"; empty for anything else (a batch, a response,
// a body that is not JSON).
func postMethod(r *http.Request) string {
	msgs, batch := postMessages(r)
	if batch || len(msgs) != 1 {
		return ""
	}
	if req, ok := msgs[0].(*jsonrpc.Request); ok {
		return req.Method
	}
	return ""
}

func isInitialize(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	return ok && req.Method == "initialize"
}

// sessionSlots bounds the sessions being opened together with those open:
// a POST that may open one holds a slot until its answer starts, when the
// session it opened (if any) counts among the open ones.
type sessionSlots struct {
	mu      sync.Mutex
	opening int
}

// reserve takes a slot if fewer than max sessions (open, counted by open,
// and opening) exist; max 0 means no bound. release gives it back.
func (s *sessionSlots) reserve(max int, open func() int) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if max > 0 && open()+s.opening >= max {
		return nil, false
	}
	s.opening++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.opening--
			s.mu.Unlock()
		})
	}, true
}

// recordSession binds the session the SDK just made to the identity that
// made it, until the session ends; then ended runs. It reports false for
// a session that has ended already.
func (f *Front) recordSession(id, user string, ended func()) bool {
	for ss := range f.server.Sessions() {
		if ss.ID() == id {
			f.users.record(id, user, ss)
			// Under the lock, as ownerFor's watcher: once Close has begun
			// waiting for the watchers, none is added.
			f.mu.Lock()
			defer f.mu.Unlock()
			if !f.closing {
				f.watchers.Go(func() {
					ss.Wait()
					f.users.forget(id)
					ended()
				})
			}
			return true
		}
	}
	return false // already gone
}

// checkOrigin refuses an Origin other than the server's own on any method,
// GET included (the cross-origin protection around the handler lets safe
// methods through).
func checkOrigin(r *http.Request) error {
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Errorf("forbidden: cross-origin request from %q", origin)
		}
	}
	return nil
}

// loopbackHost reports whether host[:port] names this machine's loopback.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sessionIDHeader is the streamable HTTP transport's session header.
const sessionIDHeader = "Mcp-Session-Id"

// closeSessionByID ends the session with this id: its owner, then the
// SDK's session.
func (f *Front) closeSessionByID(ctx context.Context, id string) {
	for ss := range f.server.Sessions() {
		if ss.ID() == id {
			f.logger.Debug("closing a session whose client left")
			f.closeOwner(ctx, ss)
			ss.Close()
			return
		}
	}
}

func (f *Front) endSessionByID(ctx context.Context, id string) {
	if id == "" {
		return
	}
	f.mu.Lock()
	var match *mcp.ServerSession
	for ss := range f.owners {
		if ss.ID() == id {
			match = ss
			break
		}
	}
	f.mu.Unlock()
	if match != nil {
		f.closeOwner(ctx, match)
	}
}

// requestHeader tags each POST so the tool handler, which sees the request's
// headers (RequestExtra.Header) but not its context, can find the context
// and stop the call when the client goes away. A client's own value is
// overwritten.
const requestHeader = "Dsh-Request"

// requests maps the tags of POSTs being served to what is known of them.
type requests struct {
	next atomic.Uint64
	mu   sync.Mutex
	live map[string]*post
}

// post is a POST being served.
type post struct {
	ctx context.Context
	// silent is set when the client cancelled the call the POST carries:
	// nothing more is written to its response, the answer included (a
	// client that gets one may take it for an unknown id and drop the
	// connection).
	silent atomic.Bool
}

// begin tags r and records it until end is called. The returned writer is
// w, gone quiet once the POST is silenced.
func (q *requests) begin(w http.ResponseWriter, r *http.Request) (_ http.ResponseWriter, end func()) {
	tag := strconv.FormatUint(q.next.Add(1), 10)
	r.Header.Set(requestHeader, tag)
	p := &post{ctx: r.Context()}
	q.mu.Lock()
	if q.live == nil {
		q.live = make(map[string]*post)
	}
	q.live[tag] = p
	q.mu.Unlock()
	return &silenceable{ResponseWriter: w, post: p}, func() {
		q.mu.Lock()
		delete(q.live, tag)
		q.mu.Unlock()
	}
}

// silence stops all further writes to the response of the POST that
// carried a call.
func (q *requests) silence(extra *mcp.RequestExtra) {
	if extra == nil || extra.Header == nil {
		return
	}
	q.mu.Lock()
	p := q.live[extra.Header.Get(requestHeader)]
	q.mu.Unlock()
	if p != nil {
		p.silent.Store(true)
	}
}

// silenceable is a response writer that drops what is written once its
// POST is silenced.
type silenceable struct {
	http.ResponseWriter
	post *post
}

func (w *silenceable) Write(p []byte) (int, error) {
	if w.post.silent.Load() {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *silenceable) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.post.silent.Load() {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *silenceable) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// watch calls gone once the POST that carried a call has ended: its answer
// can no longer be delivered (the handler keeps no event store). It returns
// a function that stops watching. Calls from other transports carry no tag.
func (q *requests) watch(extra *mcp.RequestExtra, gone func()) (stop func()) {
	if extra == nil || extra.Header == nil {
		return func() {}
	}
	tag := extra.Header.Get(requestHeader)
	if tag == "" {
		return func() {}
	}
	q.mu.Lock()
	p := q.live[tag]
	q.mu.Unlock()
	if p == nil {
		// The POST ended before the call started.
		gone()
		return func() {}
	}
	s := context.AfterFunc(p.ctx, gone)
	return func() { s() }
}

// challenge adds "WWW-Authenticate: Bearer" to a 401, as RFC 6750 asks:
// without it, MCP clients take the 401 for a server that wants OAuth and
// start a login flow dsh does not offer, instead of saying that the token
// is missing or wrong.
func challenge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&challenger{ResponseWriter: w}, r)
	})
}

type challenger struct{ http.ResponseWriter }

func (w *challenger) WriteHeader(code int) {
	if code == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="dsh"`)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *challenger) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *challenger) Unwrap() http.ResponseWriter { return w.ResponseWriter }
