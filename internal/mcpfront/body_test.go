package mcpfront

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rawExchange sends head (a request's line and headers, then whatever part
// of a body the case sends) on a fresh TCP connection and reads until the
// server closes it. It returns the response's status, or fails when the
// server holds the connection past the test's deadline.
func rawExchange(t *testing.T, s *httpServer, head string) int {
	t.Helper()
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The server may stop reading before the head is all sent (a body too
	// large): what it answers is what counts.
	go io.WriteString(c, head)
	c.SetReadDeadline(time.Now().Add(deadline))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	// The server closes the connection: an EOF, or a reset when it closed
	// with part of the body unread.
	if _, err := io.Copy(io.Discard, br); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s, then the connection was held: %v", resp.Status, err)
	}
	return resp.StatusCode
}

// TestHTTPBodyThatNeverArrives: a request whose body never comes gives its
// connection back within the body timeout, whatever it is answered:
// without a token, with a foreign Host, too large, or with a token and
// every header right (issue 26, item 8). net/http reads an unread body
// before it writes an answer, and after it, with no deadline of its own.
func TestHTTPBodyThatNeverArrives(t *testing.T) {
	r := newRig(t)
	srv := r.serveHTTP(t, HTTPOptions{Tokens: tokens(t, tokenA), BodyTimeout: 500 * time.Millisecond})
	post := func(extra string) string {
		return "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" + extra + "\r\n"
	}
	auth := "Authorization: Bearer " + tokenA + "\r\n"
	// A body too large is refused as it arrives; sending 16 MiB may take
	// longer than the short timeout on a loaded machine, so that case has
	// a server with a long one.
	long := r.serveHTTP(t, HTTPOptions{Tokens: tokens(t, tokenA), BodyTimeout: deadline})
	for _, tt := range []struct {
		name string
		head string
		want int
		srv  *httpServer
	}{
		{"no token", post("Content-Length: 100\r\n"), http.StatusUnauthorized, nil},
		{"no token, chunked", post("Transfer-Encoding: chunked\r\n"), http.StatusUnauthorized, nil},
		{"no token, part of the body", post("Content-Length: 100\r\n") + `{"jsonrpc":`, http.StatusUnauthorized, nil},
		{"foreign Host", strings.Replace(post(auth+"Content-Length: 100\r\n"), "Host: localhost", "Host: evil.example", 1), http.StatusForbidden, nil},
		{"too large", post(auth + fmt.Sprintf("Content-Length: %d\r\n", MaxBodyBytes+1)), http.StatusRequestEntityTooLarge, nil},
		{"too large, chunked", post(auth+"Transfer-Encoding: chunked\r\n") + fmt.Sprintf("%x\r\n%s\r\n", MaxBodyBytes+1, strings.Repeat(" ", MaxBodyBytes+1)), http.StatusRequestEntityTooLarge, long},
		{"with the token", post(auth + "Content-Length: 100\r\n"), http.StatusRequestTimeout, nil},
		{"with the token, chunked", post(auth + "Transfer-Encoding: chunked\r\n"), http.StatusRequestTimeout, nil},
		{"with the token, part of the body", post(auth+"Content-Length: 100\r\n") + `{"jsonrpc":`, http.StatusRequestTimeout, nil},
		{"GET with a body", "GET /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n" + auth + "Content-Length: 100\r\n\r\n", http.StatusRequestTimeout, nil},
		{"DELETE with a body", "DELETE /mcp HTTP/1.1\r\nHost: localhost\r\nMcp-Session-Id: x\r\n" + auth + "Content-Length: 100\r\n\r\n", http.StatusRequestTimeout, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := srv
			if tt.srv != nil {
				s = tt.srv
			}
			if code := rawExchange(t, s, tt.head); code != tt.want {
				t.Fatalf("status %d, want %d", code, tt.want)
			}
		})
	}
}
