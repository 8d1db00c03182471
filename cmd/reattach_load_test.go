//go:build linux

package dshcmd

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// TestE2EHTTPReattachLoad measures how long a dsh started again takes to
// give every kept shell back. dsh serve --http --keep-shells runs N
// sessions, each with a shell holding state (a variable and a directory);
// dsh is killed with SIGKILL and started again on the same address, and
// every client makes its next call at once. Each answer must be the same
// shell (its pid) with its state, after the kept-shell line. The times
// from the new dsh's exec to its serving line, to the first answer and to
// the last are logged, never asserted.
//
// Plain `go test` runs 4 sessions; DSH_REATTACH_SESSIONS sets another
// number:
//
//	DSH_REATTACH_SESSIONS=1000 go test -run TestE2EHTTPReattachLoad -v -timeout 30m ./cmd/
func TestE2EHTTPReattachLoad(t *testing.T) {
	sessions := envInt(t, "DSH_REATTACH_SESSIONS", 4)
	if sessions > 10 {
		t.Setenv(checkInvariantsEnv, "0")
	}
	runtime := t.TempDir()
	t.Cleanup(func() { stopKeepers(t, runtime) })
	env := []string{"XDG_RUNTIME_DIR=" + runtime}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	work := t.TempDir()
	args := []string{"--http", addr, "--token-file", tokens, "--keep-shells", "1h", "--workdir", work}

	d := startHTTPEnv(t, env, args...)
	d.client.Transport = bearer{testToken, d.client.Transport}
	type owner struct {
		cs    *mcp.ClientSession
		shell string // its shell's pid
	}
	owners := make([]owner, sessions)
	var (
		mu       sync.Mutex
		failures []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	// Opening sessions, each with its shell: a few at a time, as the
	// machine's cores allow.
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	opened := time.Now()
	for i := range owners {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cs, err := newE2EClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url, HTTPClient: d.client}, nil)
			if err != nil {
				fail("session %d: connect: %v", i, err)
				return
			}
			owners[i].cs = cs
			out, isErr, err := callBash(t.Context(), cs, fmt.Sprintf("export K=k%d; cd /tmp; echo $$", i))
			if err != nil || isErr || out == "" {
				fail("session %d: first call: %q (error %v) %v", i, out, isErr, err)
				return
			}
			owners[i].shell = out
		})
	}
	wg.Wait()
	checkFailures(t, failures)
	t.Logf("%d sessions opened, each with its shell, in %s", sessions, time.Since(opened).Round(time.Millisecond))

	keepers := keeperPIDs(t, runtime)
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one", keepers)
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	keeperBefore := processCPU(t, keepers[0])

	// The clients wait at a gate that opens when the new dsh serves; each
	// answer's time counts from the new dsh's exec.
	var started time.Time
	gate := make(chan struct{})
	answered := make([]time.Duration, sessions)
	for i, o := range owners {
		wg.Go(func() {
			<-gate
			out, isErr, err := callBash(t.Context(), o.cs, `echo "$K $$"; pwd`)
			answered[i] = time.Since(started)
			want := fmt.Sprintf("\nk%d %s\n/tmp", i, o.shell)
			if err != nil || isErr || !strings.HasPrefix(out, "[dsh restarted; this shell was kept") || !strings.HasSuffix(out, want) {
				fail("session %d: first call after the restart (error %v, %v):\n%s\nwant the kept-shell line, then %q", i, isErr, err, out, want)
			}
		})
	}
	started = time.Now()
	d2 := startHTTPEnv(t, env, args...)
	serving := time.Since(started)
	close(gate)
	wg.Wait()
	dshCPU, keeperCPU := processCPU(t, d2.cmd.Process.Pid), processCPU(t, keepers[0])-keeperBefore
	checkFailures(t, failures)
	slices.Sort(answered)
	pct := func(p float64) time.Duration {
		return answered[int(p*float64(len(answered)-1))].Round(time.Millisecond)
	}
	t.Logf("%d kept shells after a kill -9, from the new dsh's exec: serving after %s; first call answered after %s, half after %s, all %d after %s",
		sessions, serving.Round(time.Millisecond), pct(0), pct(0.5), sessions, pct(1))
	t.Logf("CPU meanwhile: the new dsh %s, the keeper %s", dshCPU, keeperCPU)

	// Every session ends, and its shell with it. The client's DELETE is
	// best effort, given up after 5 s, which a loaded machine closing a
	// thousand shells can take: what counts is that every shell ends.
	var unanswered atomic.Int32
	for _, o := range owners {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := o.cs.Close(); err != nil {
				unanswered.Add(1)
			}
		})
	}
	wg.Wait()
	if n := unanswered.Load(); n > 0 {
		t.Logf("%d DELETEs were not answered within the client's bound", n)
	}
	for i, o := range owners {
		var pid int
		if _, err := fmt.Sscan(o.shell, &pid); err != nil {
			t.Fatalf("session %d: shell pid %q", i, o.shell)
		}
		waitExit(t, pid, fmt.Sprintf("the shell of ended session %d", i))
	}
	d2.stop(t, unix.SIGTERM)
}

// callBash is a bash call that reports its failure rather than ending the
// test, for goroutines.
func callBash(ctx context.Context, cs *mcp.ClientSession, command string) (string, bool, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
	if err != nil {
		return "", false, err
	}
	if len(res.Content) != 1 {
		return "", res.IsError, fmt.Errorf("%d content blocks, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return "", res.IsError, fmt.Errorf("content is %T, want text", res.Content[0])
	}
	return tc.Text, res.IsError, nil
}

func checkFailures(t *testing.T, failures []string) {
	t.Helper()
	for i, f := range failures {
		if i == 20 {
			t.Errorf("and %d more", len(failures)-i)
			break
		}
		t.Error(f)
	}
	if len(failures) > 0 {
		t.FailNow()
	}
}
