package mcpfront

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestSessionIDsAreRedacted(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(redactSessionIDs(slog.NewTextHandler(&buf, nil)))
	const id = "Q4B6TZJ3NFRZ6VB3ZYXRCYQ2ME"
	log.Info("server session connected", "session_id", id)
	log.With("session_id", id).Info("again")
	log.Info("other", "owner", "mcp-1")
	out := buf.String()
	if strings.Contains(out, id) {
		t.Fatalf("the session id reached the log:\n%s", out)
	}
	if n := strings.Count(out, "session_id=sha256:"); n != 2 {
		t.Errorf("%d hashed ids, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, "owner=mcp-1") {
		t.Errorf("other attributes lost:\n%s", out)
	}
}

// TestHTTPLogsNoSessionID: what the SDK logs about an HTTP session, at
// info, names it by a hash only.
func TestHTTPLogsNoSessionID(t *testing.T) {
	var buf syncBuf
	r := newRig(t)
	r.f = New(r.h, Options{Workdir: r.workdir, Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	c, _ := startRawHTTP(t, r, -1)
	c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	out := buf.String()
	if c.session == "" || strings.Contains(out, c.session) {
		t.Errorf("the log names session %q:\n%s", c.session, out)
	}
	if !strings.Contains(out, "session_id=sha256:") {
		t.Errorf("the SDK logged no session (hashed or not), so this test proves nothing:\n%s", out)
	}
}

// syncBuf is a buffer that several goroutines may log to.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
