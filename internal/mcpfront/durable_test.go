package mcpfront

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPRevivesSideBySide: the sessions of a front that is gone, all
// presented at once to a new front with the same store (every client
// coming back after a restart, each with two requests), are each revived
// once, with their owners, while new sessions open beside them.
func TestHTTPRevivesSideBySide(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.json")
	store, err := OpenSessionStore(path)
	if err != nil {
		t.Fatal(err)
	}
	before := newRig(t).serveHTTP(t, HTTPOptions{Sessions: store})
	const n = 12
	ids, owners := make([]string, n), make([]string, n)
	var version string
	for i := range n {
		cs := before.connect(t, "")
		who, _ := callText(t, cs, "whoami", nil)
		ids[i], owners[i], version = cs.ID(), ownerID(who), cs.InitializeResult().ProtocolVersion
	}

	store, err = OpenSessionStore(path)
	if err != nil {
		t.Fatal(err)
	}
	after := newRig(t).serveHTTP(t, HTTPOptions{Sessions: store})
	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	for i := range 2 * n {
		wg.Go(func() {
			id, owner := ids[i%n], owners[i%n]
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`, i+1)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, after.url, strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("Mcp-Protocol-Version", version)
			resp, err := after.client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !strings.Contains(string(got), owner+" ") {
				errs <- fmt.Errorf("session %d: %s: %s, want its owner %s", i%n, resp.Status, got, owner)
			}
		})
	}
	for range n {
		wg.Go(func() {
			cs, err := newClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: after.url, HTTPClient: after.client}, nil)
			if err != nil {
				errs <- fmt.Errorf("a new session: %w", err)
				return
			}
			defer cs.Close()
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
			if err != nil || len(res.Content) != 1 {
				errs <- fmt.Errorf("a new session's whoami: %v", err)
				return
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.HasPrefix(tc.Text, "mcp-") {
				errs <- fmt.Errorf("a new session's owner: %v", res.Content[0])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
