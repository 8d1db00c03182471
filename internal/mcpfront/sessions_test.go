package mcpfront

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// initBody is an initialize request; extra goes into its object.
func initBody(extra string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize",` + extra + `"params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
}

// rawMessage posts body on session (none: "") as s's client and returns the
// status, the session id of the answer and its body.
func rawMessage(t *testing.T, s *httpServer, session, body string) (code int, sid, text string) {
	t.Helper()
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
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

// rawSession opens a session with an initialize written as body, the way
// a client that means harm could write it, and makes one call on it.
func rawSession(t *testing.T, s *httpServer, body string) string {
	t.Helper()
	code, sid, text := rawMessage(t, s, "", body)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q", code, text)
	}
	if code, _, text := rawMessage(t, s, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %q", code, text)
	}
	if code, _, text := rawMessage(t, s, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`); code != http.StatusOK || !strings.Contains(text, "mcp-") {
		t.Fatalf("whoami: %d %q", code, text)
	}
	return sid
}

// TestHTTPMaxSessionsHoldsWhateverTheBody: an initialize the SDK reads
// though dsh's own check would not (a case-variant duplicate "METHOD" key)
// or a batch holding one does not open a session past --max-sessions
// (issue 26, item 9).
func TestHTTPMaxSessionsHoldsWhateverTheBody(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{MaxSessions: 1})
	srv.connect(t, "")
	for _, tt := range []struct {
		name string
		body string
		want int
	}{
		{"duplicate METHOD key", initBody(`"METHOD":"ping",`), http.StatusServiceUnavailable},
		{"duplicate Method key", initBody(`"Method":"tools/list",`), http.StatusServiceUnavailable},
		{"plain", initBody(""), http.StatusServiceUnavailable},
		{"batch", "[" + initBody("") + "]", http.StatusBadRequest},
	} {
		if code, _, text := rawMessage(t, srv, "", tt.body); code != tt.want {
			t.Errorf("%s: %d %q, want %d", tt.name, code, text, tt.want)
		}
	}
	if n := r.f.SessionCount(); n != 1 {
		t.Fatalf("%d sessions open, want 1 (--max-sessions 1)", n)
	}
}

// TestHTTPBatchWithInitializeIsRefused: a JSON-RPC batch may not open a
// session, with or without a bound.
func TestHTTPBatchWithInitializeIsRefused(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{})
	for _, body := range []string{
		"[" + initBody("") + "]",
		"[" + initBody("") + `,{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		` [ ` + initBody(`"METHOD":"ping",`) + `]`,
	} {
		if code, sid, text := rawMessage(t, srv, "", body); code != http.StatusBadRequest || sid != "" || !strings.Contains(text, "batch") {
			t.Errorf("%s: %d, session %q, %q; want 400 naming the batch", body, code, sid, text)
		}
	}
	if n := r.f.SessionCount(); n != 0 {
		t.Fatalf("%d sessions open, want none", n)
	}
}

// TestHTTPEverySessionBelongsToItsToken: a session opened with an
// initialize dsh's own check did not recognise is bound to its token all
// the same: another token's DELETE is refused before it closes anything.
func TestHTTPEverySessionBelongsToItsToken(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{Tokens: tokens(t, tokenA, tokenB)})
	a := srv.as(tokenA)
	sid := rawSession(t, a, initBody(`"METHOD":"ping",`))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := srv.as(tokenB).client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("DELETE with another token: %s, want 403", resp.Status)
	}
	if code, _, text := rawMessage(t, a, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`); code != http.StatusOK || !strings.Contains(text, "mcp-") || strings.Contains(text, "isError\":true") {
		t.Fatalf("the owner's call after another token's DELETE: %d %q", code, text)
	}
}

// TestHTTPDeleteOfUnknownSession: a DELETE for a session dsh did not
// record is refused without effect.
func TestHTTPDeleteOfUnknownSession(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", "no-such-session")
	resp, err := srv.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("DELETE of an unknown session: %s, want 404", resp.Status)
	}
}

// TestHTTPMaxSessionsUnderARush: initializes that arrive together open no
// more sessions than the bound.
func TestHTTPMaxSessionsUnderARush(t *testing.T) {
	r := newRig(t)
	const max, rush = 3, 64
	srv := r.serveHTTP(t, HTTPOptions{MaxSessions: max})
	codes := make(chan int, rush)
	var wg sync.WaitGroup
	for range rush {
		wg.Go(func() {
			code, _, _ := rawMessage(t, srv, "", initBody(""))
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	opened := 0
	for code := range codes {
		switch code {
		case http.StatusOK:
			opened++
		case http.StatusServiceUnavailable:
		default:
			t.Errorf("status %d", code)
		}
	}
	if n := r.f.SessionCount(); opened > max || n > max || opened == 0 {
		t.Fatalf("%d initializes answered 200, %d sessions open; want 1 to %d", opened, n, max)
	}
}
