package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestE2EHTTPLoad runs many concurrent HTTP sessions, each with its own
// shell, each making many bash calls, against the real binary. Every result
// must be exact. Then half the sessions end (DELETE) and the server is
// stopped with the other half open: no shell may survive. The numbers
// (time, throughput, latency, dsh's own memory, which excludes the bash
// processes, shutdown time) are logged, never asserted.
//
// Plain `go test` runs a small load; DSH_LOAD_FULL=1 runs the full one
// (200 sessions × 50 calls):
//
//	DSH_LOAD_FULL=1 go test -run TestE2EHTTPLoad -v ./cmd/dsh
func TestE2EHTTPLoad(t *testing.T) {
	sessions, calls := 10, 10
	if os.Getenv("DSH_LOAD_FULL") == "1" {
		sessions, calls = 200, 50
	}
	d := startHTTP(t)
	before := procStatus(t, d.cmd.Process.Pid)

	var (
		mu        sync.Mutex
		failures  []string
		latencies []time.Duration
		pids      = make(map[string]bool)
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	// All sessions stay open until every call is done, so the memory
	// reading sees them all at once. Then the even ones end, and the odd
	// ones only after the server has stopped.
	var callsDone, evenClosed, closed sync.WaitGroup
	release, serverStopped := make(chan struct{}), make(chan struct{})
	start := time.Now()
	for s := range sessions {
		callsDone.Add(1)
		if s%2 == 0 {
			evenClosed.Add(1)
		}
		closed.Go(func() {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "load", Version: "v0"}, nil).
				Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url, HTTPClient: d.client}, nil)
			if err != nil {
				fail("session %d: connect: %v", s, err)
				callsDone.Done()
				if s%2 == 0 {
					evenClosed.Done()
				}
				return
			}
			shell := ""
			for c := range calls {
				want := fmt.Sprintf("s%d-c%d", s, c)
				t0 := time.Now()
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo " + want + " $$"}})
				elapsed := time.Since(t0)
				if err != nil {
					fail("session %d call %d: %v", s, c, err)
					continue
				}
				text := ""
				if len(res.Content) == 1 {
					if tc, ok := res.Content[0].(*mcp.TextContent); ok {
						text = tc.Text
					}
				}
				got, pid, _ := strings.Cut(text, " ")
				if res.IsError || got != want || pid == "" || (shell != "" && pid != shell) {
					fail("session %d call %d: %q (isError %v), want %q from shell %s", s, c, text, res.IsError, want, shell)
					continue
				}
				shell = pid
				mu.Lock()
				latencies = append(latencies, elapsed)
				mu.Unlock()
			}
			mu.Lock()
			if shell != "" && pids[shell] {
				failures = append(failures, fmt.Sprintf("session %d shares shell %s", s, shell))
			}
			pids[shell] = true
			mu.Unlock()
			callsDone.Done()
			<-release
			if s%2 == 0 {
				cs.Close()
				evenClosed.Done()
				return
			}
			<-serverStopped
			cs.Close()
		})
	}
	callsDone.Wait()
	elapsed := time.Since(start)
	peak := procStatus(t, d.cmd.Process.Pid)
	close(release)
	evenClosed.Wait()
	after := procStatus(t, d.cmd.Process.Pid)
	stopStart := time.Now()
	d.stop(t, syscall.SIGTERM)
	shutdown := time.Since(stopStart)
	close(serverStopped)
	closed.Wait()
	for pid := range pids {
		n, err := strconv.Atoi(pid)
		if err != nil {
			t.Errorf("shell pid %q", pid)
			continue
		}
		assertGone(t, n)
	}

	for _, f := range failures[:min(len(failures), 20)] {
		t.Error(f)
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d calls failed", len(failures), sessions*calls)
	}
	slices.Sort(latencies)
	pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	t.Logf("%d sessions × %d calls = %d bash calls over HTTP in %s (%.0f calls/s, shell start included); errors: 0",
		sessions, calls, sessions*calls, elapsed.Round(time.Millisecond), float64(sessions*calls)/elapsed.Seconds())
	t.Logf("call latency: p50 %s, p90 %s, p99 %s, max %s",
		pct(0.5).Round(time.Microsecond), pct(0.9).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), latencies[len(latencies)-1].Round(time.Microsecond))
	t.Logf("dsh process memory (bash processes excluded): idle VmRSS %s; with %d sessions open VmRSS %s, VmHWM %s; after %d closed VmRSS %s",
		before["VmRSS"], sessions, peak["VmRSS"], peak["VmHWM"], (sessions+1)/2, after["VmRSS"])
	t.Logf("SIGTERM with %d sessions open: dsh exited 0 after %s; all %d shells gone",
		sessions/2, shutdown.Round(time.Millisecond), len(pids))
}

// procStatus reads the memory lines of /proc/PID/status.
func procStatus(t testing.TB, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(k, "Vm") {
			out[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return out
}

// BenchmarkE2EStdioBashEcho measures one bash call's round trip through the
// real binary over stdio: MCP framing, the tools service and the shell.
//
//	go test -run '^$' -bench BenchmarkE2EStdioBashEcho ./cmd/dsh
func BenchmarkE2EStdioBashEcho(b *testing.B) {
	cmd := exec.Command(dshBinary(b), "serve")
	cs, err := newE2EClient().Connect(b.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	bash(b, cs, "true") // start the shell outside the timing
	for b.Loop() {
		if text, _ := bash(b, cs, "echo hi"); text != "hi" {
			b.Fatalf("echo: %q", text)
		}
	}
}
