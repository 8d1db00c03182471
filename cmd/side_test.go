//go:build linux

package dshcmd

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var sideTokenLine = regexp.MustCompile(`^dsh: metrics and profiles need "Authorization: Bearer <token>"; the token is in (\S+) \(kept for the next start: --rotate-token makes a new one\)\n$`)

// sideGet fetches url with token (none: "") and extra headers, and returns
// the status.
func sideGet(t *testing.T, client *http.Client, url, token string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// checkGuarded asserts that url answers only requests with token, naming
// this server in Host, and from no foreign Origin.
func checkGuarded(t *testing.T, url, token string) {
	t.Helper()
	client := &http.Client{}
	for _, tt := range []struct {
		name   string
		token  string
		header map[string]string
		want   int
	}{
		{"no token", "", nil, http.StatusUnauthorized},
		{"another token", "Zr8Hw2LmQ5cT1vXk9JdN3pYs7Ge4Ub6Fo0iRa2SnKqM", nil, http.StatusUnauthorized},
		{"a foreign Host (DNS rebinding)", token, map[string]string{"Host": "evil.example"}, http.StatusForbidden},
		{"a foreign Origin", token, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"the token", token, nil, http.StatusOK},
	} {
		if code := sideGet(t, client, url, tt.token, tt.header); code != tt.want {
			t.Errorf("GET %s with %s: %d, want %d", url, tt.name, code, tt.want)
		}
	}
}

// TestE2ESideServersAreGuarded: --metrics and --pprof (argv, goroutine
// dumps, profiles) answer only requests that carry the bearer token and
// name this server, as /mcp does (issue 26, item 10). Over stdio dsh keeps
// a token for them; over HTTP they take the front's.
func TestE2ESideServersAreGuarded(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		runtime := t.TempDir()
		cmd := exec.Command(dshBinary(t), "serve", "--metrics", "127.0.0.1:0", "--pprof", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime)
		pipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		cs, err := newE2EClient().Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		br := bufio.NewReader(pipe)
		urls := map[string]string{}
		for range 2 {
			line, err := br.ReadString('\n')
			m := sideLine.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("stderr line %q (%v), want where metrics and profiles are", line, err)
			}
			urls[m[1]] = m[2]
		}
		for _, url := range []string{urls["metrics"], urls["profiles"], urls["profiles"] + "cmdline"} {
			if code := sideGet(t, &http.Client{}, url, "", nil); code != http.StatusUnauthorized {
				t.Fatalf("GET %s without a token: %d, want 401", url, code)
			}
		}
		line, err := br.ReadString('\n')
		m := sideTokenLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("stderr line %q (%v), want where the token is", line, err)
		}
		go io.Copy(io.Discard, br)
		if filepath.Dir(m[1]) != filepath.Join(runtime, "dsh") {
			t.Fatalf("token file %s is not in $XDG_RUNTIME_DIR/dsh", m[1])
		}
		data, err := os.ReadFile(m[1])
		if err != nil {
			t.Fatal(err)
		}
		token := strings.TrimSpace(string(data))
		for _, url := range []string{urls["metrics"], urls["profiles"], urls["profiles"] + "cmdline"} {
			checkGuarded(t, url, token)
		}
		closeAndWait(t, cs, cmd)
		if fi, err := os.Stat(m[1]); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the kept token file: %v, %v", fi, err)
		}
	})
	t.Run("http", func(t *testing.T) {
		d := startHTTP(t, "--metrics", "127.0.0.1:0")
		checkGuarded(t, d.metricsURL, testToken)
	})
	t.Run("unix socket", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "run", "metrics.sock")
		cmd := exec.Command(dshBinary(t), "serve", "--metrics", "unix:"+sock)
		pipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		cs, err := newE2EClient().Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		br := bufio.NewReader(pipe)
		line, _ := br.ReadString('\n')
		if want := "dsh: metrics at unix:" + sock + " (HTTP path /metrics)\n"; line != want {
			t.Fatalf("stderr line %q, want %q", line, want)
		}
		go io.Copy(io.Discard, br)
		client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
		if code := sideGet(t, client, "http://localhost/metrics", "", nil); code != http.StatusOK {
			t.Fatalf("GET /metrics over the socket: %d", code)
		}
		if code := sideGet(t, client, "http://localhost/metrics", "", map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
			t.Fatalf("GET /metrics over the socket from a foreign Origin: %d", code)
		}
		closeAndWait(t, cs, cmd)
	})
}
