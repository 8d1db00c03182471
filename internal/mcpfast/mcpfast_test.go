package mcpfast

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSDKVersion fails when the go-sdk this binary links is not the one
// this package was checked against: the fast path writes the SDK's bytes
// by hand, and a new SDK may write others. Check the package against the
// new version (mcpfront's TestFastCallMatchesSDK compares every line
// under both protocols), then move CheckedAgainst.
func TestSDKVersion(t *testing.T) {
	// A test binary carries no module versions in its build info: the
	// go command says which version the module selects.
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", "github.com/modelcontextprotocol/go-sdk").Output()
	if err != nil {
		t.Fatalf("go list the go-sdk module: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != CheckedAgainst {
		t.Fatalf("the MCP fast path was checked against go-sdk %s, and this build selects %s: check internal/mcpfast against it (mcpfront's TestFastCallMatchesSDK), then move CheckedAgainst", CheckedAgainst, got)
	}
}

// TestAppendText: the line appended for a one-text result is the line the
// SDK's encoding makes of it.
func TestAppendText(t *testing.T) {
	e := NewEncoder(&mcp.Implementation{Name: "dsh", Version: "test"})
	if !e.PerRequest() {
		t.Fatal("this SDK's results do not decode a result type")
	}
	ids := []jsonrpc.ID{mustID(t, float64(0)), mustID(t, float64(-5)), mustID(t, "a\"<b>\u2028"), mustID(t, "")}
	texts := []string{"", "hi", "<&>\u2028\u2029\x00\x1f\t\n\"\\", "bad \xff utf-8", "中文 emoji 🙂"}
	for _, id := range ids {
		for _, text := range texts {
			for _, perRequest := range []bool{false, true} {
				for _, isError := range []bool{false, true} {
					res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
					want, err := e.encode(id, perRequest, res, nil)
					if err != nil {
						t.Fatal(err)
					}
					got := e.appendText(nil, id, perRequest, text, isError)
					if string(got) != string(want)+"\n" {
						t.Errorf("id %v, text %q, per-request %v, isError %v:\n got %s\nwant %s", id.Raw(), text, perRequest, isError, got, want)
					}
				}
			}
		}
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
