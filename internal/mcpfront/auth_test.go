package mcpfront

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// as returns a server handle whose client sends token.
func (s *httpServer) as(token string) *httpServer {
	return &httpServer{url: s.url, client: &http.Client{Transport: bearer{token, s.client.Transport}}}
}

// Two tokens as NewToken makes them.
var (
	tokenA = "vV3k0qL8xJ2nHc5TzR7mW1yQe9dBf4sGp6uNa0KtXiE"
	tokenB = "Zr8Hw2LmQ5cT1vXk9JdN3pYs7Ge4Ub6Fo0iRa2SnKqM"
)

func tokens(t *testing.T, tok ...string) *Tokens {
	t.Helper()
	ts, err := NewTokens(tok...)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// rawPost sends a ping (or, without a session, an initialize) and returns
// the status.
func rawPost(t *testing.T, s *httpServer, session, host string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if session != "" {
		body = `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	if host != "" {
		req.Host = host
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestHTTPRequiresAToken: without the token nothing runs; with it, a
// session works.
func TestHTTPRequiresAToken(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{Tokens: tokens(t, tokenA)})
	for _, tt := range []struct {
		name string
		s    *httpServer
	}{
		{"no token", srv},
		{"wrong token", srv.as(tokenB)},
		{"a prefix of the token", srv.as(tokenA[:40])},
	} {
		if code := rawPost(t, tt.s, "", ""); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", tt.name, code)
		}
	}
	if _, err := newClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: srv.client}, nil); err == nil {
		t.Error("a client without the token connected")
	}
	cs := srv.as(tokenA).connect(t, "")
	if text, isErr := callText(t, cs, "echo", map[string]any{"text": "hi"}); isErr || text != "hi" {
		t.Fatalf("call with the token: %q (error %v)", text, isErr)
	}
	if n := ownerCount(r.f); n != 1 {
		t.Fatalf("%d owners, want the one session's", n)
	}
}

// TestHTTPSessionBelongsToItsToken: another token cannot use, or end, a
// session whose id it learnt.
func TestHTTPSessionBelongsToItsToken(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{Tokens: tokens(t, tokenA, tokenB)})
	cs := srv.as(tokenA).connect(t, "")
	if _, isErr := callText(t, cs, "whoami", nil); isErr {
		t.Fatal("whoami failed")
	}
	other := srv.as(tokenB)
	if code := rawPost(t, other, cs.ID(), ""); code != http.StatusForbidden {
		t.Errorf("ping with another token: %d, want 403", code)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := other.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("DELETE with another token: %s, want 403", resp.Status)
	}
	if _, isErr := callText(t, cs, "whoami", nil); isErr {
		t.Error("the session's owner was closed by another token's DELETE")
	}
	if code := rawPost(t, srv.as(tokenA), cs.ID(), ""); code != http.StatusOK {
		t.Errorf("ping with the session's own token: %d", code)
	}
}

// TestHTTPHostPolicy: the Host header must name this server, on any
// listener; an allowed name passes.
func TestHTTPHostPolicy(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{AllowedHosts: []string{"devbox.lan"}, ListenHost: "192.0.2.7"})
	for _, tt := range []struct {
		host string
		want int
	}{
		{"evil.example", http.StatusForbidden},
		{"evil.example:8080", http.StatusForbidden},
		{"localhost:1234", http.StatusOK},
		{"[::1]:1234", http.StatusOK},
		{"DEVBOX.lan:8080", http.StatusOK},
		{"192.0.2.7:8080", http.StatusOK},
		{"192.0.2.8:8080", http.StatusForbidden},
	} {
		if code := rawPost(t, srv, "", tt.host); code != tt.want {
			t.Errorf("Host %q: %d, want %d", tt.host, code, tt.want)
		}
	}
}

func TestHTTPMaxSessions(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{MaxSessions: 2})
	srv.connect(t, "")
	srv.connect(t, "")
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := srv.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg strings.Builder
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	msg.Write(buf[:n])
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(msg.String(), "--max-sessions") {
		t.Fatalf("a third session: %s %q, want 503 naming --max-sessions", resp.Status, msg.String())
	}
}

func TestHTTPBodyBound(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url, strings.NewReader(strings.Repeat(" ", MaxBodyBytes+1)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := srv.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an oversized body: %s, want 413", resp.Status)
	}
}

// TestTokensRefuseGuessable: a token file refuses tokens that are long
// enough but regular (issue 26, item 12); random ones of 128 bits pass.
func TestTokensRefuseGuessable(t *testing.T) {
	for _, tt := range []struct {
		token string
		ok    bool
	}{
		{"short", false},
		{strings.Repeat("a", 43), false},
		{"0123456789abcdef0123456789abcdef", false},
		{"abcdefghijklmnopqrstuvwxyz0123456789", false},
		{strings.Repeat("password", 5), false},
		{strings.Repeat("Tr0ub4dor&3", 3), false},
		{"9f86d081884c7d659a2feaa0c55ad015", true}, // 32 hex digits
		{tokenA, true},
		{NewToken(), true},
	} {
		_, err := NewTokens(tt.token)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrWeakToken)) {
			t.Errorf("NewTokens(%q) (about %.0f bits): %v, want ok %v", tt.token, TokenBits(tt.token), err, tt.ok)
		}
	}
}

func TestTokens(t *testing.T) {
	if _, err := NewTokens("short"); err == nil {
		t.Error("a 5-character token was accepted")
	}
	if _, err := ReadTokens(strings.NewReader("# none\n\n")); err != ErrNoTokens {
		t.Errorf("an empty file: %v, want ErrNoTokens", err)
	}
	ts, err := ReadTokens(strings.NewReader("# dsh tokens\n" + tokenA + "\n  " + tokenB + "  \n"))
	if err != nil {
		t.Fatal(err)
	}
	a, errA := ts.verify(t.Context(), tokenA, nil)
	b, errB := ts.verify(t.Context(), tokenB, nil)
	if errA != nil || errB != nil || a.UserID == b.UserID || strings.Contains(a.UserID, tokenA[:8]) {
		t.Fatalf("identities %+v %v, %+v %v: want two, not revealing the tokens", a, errA, b, errB)
	}
	if tok := NewToken(); len(tok) != 43 || tok == NewToken() {
		t.Errorf("NewToken gave %q", tok)
	}
}
