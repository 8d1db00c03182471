package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tokens are the bearer tokens an HTTP handler accepts. Each is its own
// identity: a session belongs to the token that opened it, and requests for
// it with another token are refused, so a leaked session id is useless
// without its token.
type Tokens struct {
	digests [][sha256.Size]byte
}

// ErrNoTokens is the error of a token file that holds none.
var ErrNoTokens = errors.New("no token in the file")

// minTokenLen keeps a guessable token out of a token file; maxTokenLen
// keeps TokenBits, quadratic in the worst case, quick.
const (
	minTokenLen = 32
	maxTokenLen = 1024
)

// MinTokenBits is the least entropy a token may show (see TokenBits):
// random tokens of 32 hex digits (128 bits) show 84 or more, and a long
// word or a pattern (aaaa…, 0123…, a phrase typed four times) far less.
const MinTokenBits = 80

// ErrWeakToken is the error of a token that is too short or too regular
// to be a secret.
var ErrWeakToken = errors.New("token too easy to guess")

// NewTokens accepts each of tokens.
func NewTokens(tokens ...string) (*Tokens, error) {
	t := &Tokens{}
	for i, tok := range tokens {
		if len(tok) < minTokenLen {
			return nil, fmt.Errorf("%w: token %d has %d characters, too short to be secret (at least %d)", ErrWeakToken, i+1, len(tok), minTokenLen)
		}
		if len(tok) > maxTokenLen {
			return nil, fmt.Errorf("token %d has %d characters, more than a token needs (at most %d)", i+1, len(tok), maxTokenLen)
		}
		if bits := TokenBits(tok); bits < MinTokenBits {
			return nil, fmt.Errorf("%w: token %d shows about %.0f bits of entropy (at least %d): make one with `openssl rand -base64 32`", ErrWeakToken, i+1, bits, MinTokenBits)
		}
		t.digests = append(t.digests, sha256.Sum256([]byte(tok)))
	}
	if len(t.digests) == 0 {
		return nil, ErrNoTokens
	}
	return t, nil
}

// ReadTokens reads a token file: one token per line; blank lines and lines
// starting with # are ignored.
func ReadTokens(r io.Reader) (*Tokens, error) {
	var tokens []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tokens = append(tokens, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return NewTokens(tokens...)
}

// TokenBits estimates the entropy of a token, in bits, from the token
// alone: the characters that do not repeat an earlier stretch of four or
// more are what is new in it, and the estimate is the smaller of their
// Shannon information (each character as often as it occurs) and that of
// the steps between neighbours (which sees runs like 0123… or abab…). It
// is a floor for patterns, not a proof of randomness: a random token of n
// characters from k symbols scores close to n·log2(k).
func TokenBits(tok string) float64 {
	novel := novelBytes([]byte(tok))
	if len(novel) < 2 {
		return 0
	}
	steps := make([]int, len(novel)-1)
	for i := 1; i < len(novel); i++ {
		steps[i-1] = int(novel[i]) - int(novel[i-1])
	}
	chars := make([]int, len(novel))
	for i, c := range novel {
		chars[i] = int(c)
	}
	return min(information(chars), information(steps))
}

// novelBytes drops from b every stretch of 4 or more bytes that repeats
// an earlier one (greedy, longest first), keeping what is new.
func novelBytes(b []byte) []byte {
	const minRepeat = 4
	var out []byte
	for i := 0; i < len(b); {
		longest := 0
		for j := 0; j < i; j++ {
			n := 0
			for i+n < len(b) && j+n < i && b[j+n] == b[i+n] {
				n++
			}
			longest = max(longest, n)
		}
		if longest >= minRepeat {
			i += longest
			continue
		}
		out = append(out, b[i])
		i++
	}
	return out
}

// information is the Shannon information of a sequence whose symbols occur
// as often as they do in it: length × entropy per symbol.
func information(seq []int) float64 {
	counts := make(map[int]int)
	for _, v := range seq {
		counts[v]++
	}
	n := float64(len(seq))
	bits := 0.0
	for _, c := range counts {
		p := float64(c) / n
		bits -= p * math.Log2(p)
	}
	return bits * n
}

// NewToken returns a fresh token: 256 random bits, base64url.
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// verify is the go-sdk's TokenVerifier: a token is compared with every
// accepted one through its SHA-256 digest, in constant time, so neither its
// content nor which token matched leaks through timing. The identity is a
// digest prefix: it names the token in logs without revealing it.
func (t *Tokens) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	d := sha256.Sum256([]byte(token))
	match := -1
	for i := range t.digests {
		if subtle.ConstantTimeCompare(d[:], t.digests[i][:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return nil, fmt.Errorf("%w: the bearer token is not one this server accepts", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{
		UserID: "token-" + hex.EncodeToString(t.digests[match][:6]),
		// The token lives as long as the server: expiry does not apply.
		Expiration: time.Time{},
	}, nil
}

// hostPolicy says which Host headers a request may carry: loopback names,
// the host the server listens on, and those allowed explicitly. A page on
// another site reaches a local server only through a name that resolves
// there (DNS rebinding); that name is never on the list.
type hostPolicy struct {
	listen  string // the listen address's host; "" for a wildcard
	allowed []string
}

func (p hostPolicy) check(r *http.Request) error {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local.Network() == "unix" {
		return nil // no web page reaches a unix socket, whatever name it uses
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	switch {
	case loopbackHost(host):
		return nil
	case p.listen != "" && strings.EqualFold(host, p.listen):
		return nil
	}
	for _, a := range p.allowed {
		if strings.EqualFold(host, a) {
			return nil
		}
	}
	return fmt.Errorf("forbidden: Host %q is not this server's (allow it with --allowed-host)", r.Host)
}

// sessionUsers remembers which identity opened each session ("" without
// authentication), so that a request carrying another identity is refused
// before it has any effect (dsh acts on a DELETE before the SDK sees it),
// and the SDK's session of each id, for the calls dsh answers itself
// (fasthttp.go).
type sessionUsers struct {
	mu    sync.Mutex
	users map[string]sessionEntry
}

// sessionEntry is what sessionUsers knows of one session.
type sessionEntry struct {
	user string
	ss   *mcp.ServerSession
}

func (s *sessionUsers) record(id, user string, ss *mcp.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users == nil {
		s.users = make(map[string]sessionEntry)
	}
	s.users[id] = sessionEntry{user: user, ss: ss}
}

func (s *sessionUsers) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.users, id)
}

// user is who opened session id ("" for an unknown one).
func (s *sessionUsers) user(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.users[id].user
}

// known reports whether session id was recorded.
func (s *sessionUsers) known(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.users[id]
	return ok
}

// allows reports whether user may act on session id. A session dsh has not
// recorded is the SDK's to judge (it answers 404 for an unknown one).
func (s *sessionUsers) allows(id, user string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.users[id]
	return !ok || e.user == user
}

// session is the SDK's session of id, if it was recorded and has not ended.
func (s *sessionUsers) session(id string) *mcp.ServerSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.users[id].ss
}

// requestUser is the identity a request authenticated as, or "".
func requestUser(r *http.Request) string {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		return ti.UserID
	}
	return ""
}

// recordingWriter notes the session id the SDK assigns in its answer to an
// initialize request.
type recordingWriter struct {
	http.ResponseWriter
	onHeader func(http.Header)
	done     bool
}

func (w *recordingWriter) WriteHeader(code int) {
	if !w.done {
		w.done = true
		w.onHeader(w.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// MaxBodyBytes bounds a request's body, as MaxLineBytes bounds a message
// on stdio.
const MaxBodyBytes = MaxLineBytes

// DefaultBodyTimeout bounds how long a client may take to send a request's
// body; a client that trickles it, or never sends it, would otherwise hold
// its connection (and a descriptor) forever.
const DefaultBodyTimeout = 30 * time.Second

// errBodyTooLarge and errBodyTimeout are why a body was refused.
var (
	errBodyTooLarge = fmt.Errorf("request body longer than %d bytes", MaxBodyBytes)
	errBodyTimeout  = errors.New("the request body did not arrive in time")
)

// boundBody puts a deadline on the arrival of every request's body, before
// any check runs, and lifts it the moment the body has been read to its end
// (a call's answer may take hours, and a deadline left on the connection
// would end it). A request answered before its body has arrived (a 401, a
// 403, a 413) closes its connection instead of waiting for the rest: net/http
// would otherwise read what remains before it writes the answer, and again
// after the handler, with no deadline of its own.
func boundBody(timeout time.Duration, next http.HandlerFunc) http.HandlerFunc {
	if timeout <= 0 {
		timeout = DefaultBodyTimeout
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next(w, r)
			return
		}
		if r.ContentLength > MaxBodyBytes {
			w.Header().Set("Connection", "close")
			http.Error(w, errBodyTooLarge.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(timeout)) // unsupported only in tests' recorders
		b := &arrivingBody{ReadCloser: r.Body, arrived: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		r.Body = b
		next(&closeUnlessArrived{ResponseWriter: w, body: b, rc: rc}, r)
	}
}

// arrivingBody is a request body that calls arrived once it has been read
// to its end.
type arrivingBody struct {
	io.ReadCloser
	arrived func()
	done    atomic.Bool
}

func (b *arrivingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done.Swap(true) {
		b.arrived()
	}
	return n, err
}

// closeUnlessArrived marks an answer written before its request's body has
// arrived as the connection's last, and stops waiting for the rest of the
// body: nothing will read it.
type closeUnlessArrived struct {
	http.ResponseWriter
	body   *arrivingBody
	rc     *http.ResponseController
	headed bool
}

func (w *closeUnlessArrived) WriteHeader(code int) {
	if !w.headed {
		w.headed = true
		if !w.body.done.Load() {
			w.Header().Set("Connection", "close")
			_ = w.rc.SetReadDeadline(time.Now())
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeUnlessArrived) Write(p []byte) (int, error) {
	if !w.headed {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *closeUnlessArrived) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *closeUnlessArrived) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// readBody reads r's whole body (boundBody bounds how long that may take)
// and keeps it in memory, where the SDK reads it and dsh looks at it.
func readBody(w http.ResponseWriter, r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.As(err, &tooBig):
			return errBodyTooLarge
		case errors.As(err, &netErr) && netErr.Timeout():
			return errBodyTimeout
		}
		return fmt.Errorf("reading the request body: %w", err)
	}
	r.Body = &bufferedBody{Reader: bytes.NewReader(body), data: body}
	return nil
}

// bodyErrorStatus is the status of a request whose body readBody refused.
func bodyErrorStatus(err error) int {
	switch {
	case errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errBodyTimeout):
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// bufferedBody is a request body read ahead: the SDK reads it, dsh looks at
// its bytes.
type bufferedBody struct {
	*bytes.Reader
	data []byte
}

func (b *bufferedBody) Close() error  { return nil }
func (b *bufferedBody) Bytes() []byte { return b.data }
