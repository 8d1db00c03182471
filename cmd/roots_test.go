//go:build linux

package dshcmd

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestE2EHTTPWorkspaceFromRoots: over HTTP, each client that declares MCP
// roots works in its first root, when that lies within an --allow-root
// directory; a root elsewhere (a symlink out included), or a client
// without roots, works in --workdir as before.
func TestE2EHTTPWorkspaceFromRoots(t *testing.T) {
	allowed := t.TempDir()
	for _, d := range []string{"agent-a", "agent-b"} {
		if err := os.Mkdir(filepath.Join(allowed, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(allowed, "escape")); err != nil {
		t.Fatal(err)
	}
	workdir := t.TempDir()
	d := startHTTP(t, "--workdir", workdir, "--allow-root", allowed)
	pwd := func(roots ...string) string {
		t.Helper()
		client := newE2EClient()
		for _, r := range roots {
			//lint:ignore SA1019 roots are what the feature reads (deprecated from 2026-07-28; HTTP sessions are at 2025-11-25)
			client.AddRoots(&mcp.Root{URI: (&url.URL{Scheme: "file", Path: r}).String()})
		}
		cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url, HTTPClient: d.client}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		text, _ := bash(t, cs, "pwd")
		return text
	}
	for _, tc := range []struct {
		name  string
		roots []string
		want  string
	}{
		{"first root within", []string{filepath.Join(allowed, "agent-a"), filepath.Join(allowed, "agent-b")}, filepath.Join(allowed, "agent-a")},
		{"another agent", []string{filepath.Join(allowed, "agent-b")}, filepath.Join(allowed, "agent-b")},
		{"the allowed directory itself", []string{allowed}, allowed},
		{"outside", []string{outside}, workdir},
		{"a symlink out", []string{filepath.Join(allowed, "escape")}, workdir},
		{"not there", []string{filepath.Join(allowed, "missing")}, workdir},
		{"no roots", nil, workdir},
	} {
		if got := pwd(tc.roots...); got != tc.want {
			t.Errorf("%s: pwd %q, want %q", tc.name, got, tc.want)
		}
	}
}
