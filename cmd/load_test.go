//go:build linux

package dshcmd

import (
	"fmt"
	"io"
	"net/http"
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
// shell, each making many bash calls of mixed kinds (see mixedCall),
// against the real binary. Every result must be exact. Then half the
// sessions end (DELETE) and the server is stopped with the other half open:
// no shell may survive. The numbers (time, throughput, latency, dsh's own
// CPU per call and memory, which exclude the bash processes, shutdown time)
// are logged, never asserted.
//
// Plain `go test` runs a small load; DSH_LOAD_FULL=1 runs 200 sessions × 50
// calls, and DSH_LOAD_SESSIONS and DSH_LOAD_CALLS set other sizes:
//
//	DSH_LOAD_FULL=1 go test -run TestE2EHTTPLoad -v ./cmd/
//	DSH_LOAD_SESSIONS=1000 DSH_LOAD_CALLS=20 go test -run TestE2EHTTPLoad -v -timeout 30m ./cmd/
//	DSH_WARM_SHELLS=1000 DSH_LOAD_SESSIONS=1000 go test -run TestE2EHTTPLoad -v -timeout 30m ./cmd/
func TestE2EHTTPLoad(t *testing.T) {
	sessions, calls := 10, 10
	if os.Getenv("DSH_LOAD_FULL") == "1" {
		sessions, calls = 200, 50
	}
	sessions = envInt(t, "DSH_LOAD_SESSIONS", sessions)
	calls = envInt(t, "DSH_LOAD_CALLS", calls)
	if sessions > 10 {
		// A measurement: the invariants walk every session after every
		// call, which is their job at the default size, not at a thousand.
		t.Setenv(checkInvariantsEnv, "0")
	}
	d := startHTTP(t, "--metrics", "127.0.0.1:0")
	// DSH_WARM_SHELLS sizes the default deployment's warm pool (it reaches
	// dsh through the environment): the storm starts once it is full.
	warm := envInt(t, "DSH_WARM_SHELLS", 0)
	if warm > 0 {
		deadline := time.Now().Add(10 * time.Minute)
		for scrapeCounter(t, d.metricsURL, "dsh_warm_shells") != strconv.Itoa(warm) {
			if time.Now().After(deadline) {
				t.Fatalf("the warm pool did not fill to %d", warm)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	before := procStatus(t, d.cmd.Process.Pid)
	cpuBefore := processCPU(t, d.cmd.Process.Pid)

	var (
		mu        sync.Mutex
		failures  []string
		latencies []time.Duration
		firsts    []time.Duration // of each session's first call, which starts its shell
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
				command, check := mixedCall(s, c)
				t0 := time.Now()
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
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
				pid, why := check(text)
				switch {
				case res.IsError || why != "":
					fail("session %d call %d %q: %q (isError %v): %s", s, c, command, text, res.IsError, why)
					continue
				case pid != "" && shell != "" && pid != shell:
					fail("session %d call %d: shell %s, want %s", s, c, pid, shell)
					continue
				case pid != "":
					shell = pid
				}
				mu.Lock()
				latencies = append(latencies, elapsed)
				if c == 0 {
					firsts = append(firsts, elapsed)
				}
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
	cpu := processCPU(t, d.cmd.Process.Pid) - cpuBefore
	peak := procStatus(t, d.cmd.Process.Pid)
	peakFDs := openFDs(t, d.cmd.Process.Pid)
	resets := scrapeCounter(t, d.metricsURL, "dsh_bash_resets_total")
	// Before the shutdown, which may fail on a loaded machine: the first
	// calls are what a warm pool is for.
	slices.Sort(firsts)
	if len(firsts) > 0 {
		t.Logf("first calls (shell start included; %d warm shells waiting): p50 %s, p99 %s",
			warm, firsts[len(firsts)/2].Round(time.Microsecond), firsts[int(0.99*float64(len(firsts)-1))].Round(time.Microsecond))
	}
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
	t.Logf("dsh CPU per call (bash processes excluded, shell starts included): %s",
		(cpu / time.Duration(sessions*calls)).Round(time.Microsecond))
	t.Logf("dsh memory per open session: %.0f KiB", float64(vmKiB(t, peak["VmRSS"])-vmKiB(t, before["VmRSS"]))/float64(sessions))
	t.Logf("call latency: p50 %s, p90 %s, p99 %s, max %s",
		pct(0.5).Round(time.Microsecond), pct(0.9).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), latencies[len(latencies)-1].Round(time.Microsecond))
	t.Logf("dsh process memory (bash processes excluded): idle VmRSS %s; with %d sessions open VmRSS %s, VmHWM %s; after %d closed VmRSS %s",
		before["VmRSS"], sessions, peak["VmRSS"], peak["VmHWM"], (sessions+1)/2, after["VmRSS"])
	t.Logf("shells reset by calls: %s", resets)
	t.Logf("dsh OS threads: %s idle, %s with %d sessions open; descriptors with them open: %d (%.1f per session)",
		before["Threads"], peak["Threads"], sessions, peakFDs, float64(peakFDs)/float64(sessions))
	if resets != "0" {
		t.Errorf("%s shells were reset under load", resets)
	}
	t.Logf("SIGTERM with %d sessions open: dsh exited 0 after %s; all %d shells gone",
		sessions/2, shutdown.Round(time.Millisecond), len(pids))
}

// mixedCall is call c of session s in the load test: a command and a check
// of its result, which returns the shell's pid when the command reports it.
// The kinds rotate: output with the pid, an exit status, state set for the
// next call and checked by it, an output burst, and every eighth call a
// read that the tool must interrupt.
func mixedCall(s, c int) (string, func(string) (pid, why string)) {
	tag := fmt.Sprintf("s%d-c%d", s, c)
	exact := func(want string) func(string) (string, string) {
		return func(got string) (string, string) {
			if got != want {
				return "", fmt.Sprintf("want %q", want)
			}
			return "", ""
		}
	}
	switch {
	case c%8 == 7:
		return "read x", exact("[The command was waiting for interactive input, which this tool does not provide, so it was interrupted. Pass input non-interactively: arguments, a pipe, a here-document, or a --yes style flag.]")
	case c%4 == 0:
		return "echo " + tag + " $$", func(got string) (string, string) {
			text, pid, _ := strings.Cut(got, " ")
			if text != tag || pid == "" {
				return "", fmt.Sprintf("want %q and a pid", tag)
			}
			return pid, ""
		}
	case c%4 == 1:
		return "echo " + tag + "; (exit 3)", exact(tag + "\n[exit code: 3]")
	case c%4 == 2:
		return "cd / && export LOAD_TAG=" + tag, exact("")
	}
	prev := fmt.Sprintf("s%d-c%d", s, c-1)
	return `printf '%s %s\n' "$PWD" "$LOAD_TAG"; seq 1 3000 | tail -n 1`, exact("/ " + prev + "\n3000")
}

// envInt reads a positive integer from the environment, or returns def.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// processCPU is the user and system time pid has used, from
// /proc/PID/stat (fields 14 and 15, in ticks of 1/100 s).
func processCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// vmKiB parses a /proc/PID/status memory value such as "11520 kB".
func vmKiB(t testing.TB, v string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSuffix(v, " kB"))
	if err != nil {
		t.Fatalf("memory value %q", v)
	}
	return n
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
		if k, v, ok := strings.Cut(line, ":"); ok && (strings.HasPrefix(k, "Vm") || k == "Threads") {
			out[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return out
}

// scrapeCounter reads one unlabelled metric from a Prometheus text page.
// The page is startHTTP's, which takes testToken.
func scrapeCounter(t testing.TB, url, name string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return v
		}
	}
	t.Fatalf("no %s in the metrics", name)
	return ""
}

// openFDs is how many descriptors process pid has open.
func openFDs(t testing.TB, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// BenchmarkE2EStdioBashEcho measures one bash call's round trip through the
// real binary over stdio: MCP framing, the tools service and the shell.
//
//	go test -run '^$' -bench BenchmarkE2EStdioBashEcho ./cmd/
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
