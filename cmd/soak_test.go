//go:build linux

package dshcmd

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshdev/dsh/internal/cgtest"
)

// soakDeployment is the deployment the soak serves: shells with the limits
// of the shipped deployments, and the sandboxed deployment's timeout
// action, with a short timeout so the fork bomb's call ends soon.
const soakDeployment = `
- id: terminal
  name: terminal
- id: terminal-bash
  name: terminal-bash
  config:
%s
- id: bash
  name: tool-bash-persistent
  config:
    timeoutMs: 20000
    timeoutAction: interrupt
`

const soakLimits = `    limits: { memory: 512MiB, pids: 256, cpu: 1 }`

// TestSoakOneSessionCannotTakeDownTheOthers: many sessions make calls of
// every kind (see mixedCall) while one session runs, in turn, a fork bomb,
// a memory hog and 150 MB of output. Every call of the others must give its
// exact result, and dsh must survive and stop cleanly. dsh and everything
// it starts run in a cgroup of the test's own (tasks and memory bounded),
// so that the machine survives a failure. dsh's peak memory and the box's
// peak task count are logged.
//
//	go test -run TestSoak -v ./cmd/
//	DSH_SOAK_SESSIONS=50 go test -run TestSoak -v ./cmd/
//
// DSH_SOAK_NO_LIMITS=1 serves shells without limits (dsh's headroom alone
// then keeps it alive); DSH_SOAK_BIN runs another dsh binary, such as one
// built before the limits existed.
func TestSoakOneSessionCannotTakeDownTheOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes half a minute")
	}
	sessions := envInt(t, "DSH_SOAK_SESSIONS", 20)
	const boxTasks, boxMemory = 1500, 3 << 30
	box := cgtest.NewBox(t, boxTasks, boxMemory)
	box.Enter(t)

	limits := soakLimits
	if os.Getenv("DSH_SOAK_NO_LIMITS") == "1" {
		limits = "    idleSilenceMs: 3000"
	}
	dep := filepath.Join(t.TempDir(), "soak.yaml")
	if err := os.WriteFile(dep, fmt.Appendf(nil, soakDeployment, limits), 0o600); err != nil {
		t.Fatal(err)
	}
	if bin := os.Getenv("DSH_SOAK_BIN"); bin != "" {
		built.once.Do(func() { built.path = bin })
	}
	t.Setenv(checkInvariantsEnv, "0") // a measurement, as the load test
	d := startHTTP(t, "--deployment", dep, "--metrics", "127.0.0.1:0")
	pid := d.cmd.Process.Pid

	var (
		mu       sync.Mutex
		failures []string
		calls    atomic.Int64
		lat      []time.Duration
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	abuseDone := make(chan struct{})
	var others sync.WaitGroup
	for s := range sessions {
		others.Go(func() {
			cs, err := newE2EClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url, HTTPClient: d.client}, nil)
			if err != nil {
				fail("session %d: connect: %v", s, err)
				return
			}
			defer cs.Close()
			for c := 0; ; c++ {
				select {
				case <-abuseDone:
					if c >= 8 {
						return
					}
				default:
				}
				command, check := mixedCall(s, c)
				t0 := time.Now()
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
				elapsed := time.Since(t0)
				calls.Add(1)
				if err != nil {
					fail("session %d call %d: %v", s, c, err)
					return
				}
				text := resultText(res)
				if _, why := check(text); res.IsError || why != "" {
					fail("session %d call %d %q: %q (isError %v): %s", s, c, command, text, res.IsError, why)
					continue
				}
				mu.Lock()
				lat = append(lat, elapsed)
				mu.Unlock()
			}
		})
	}

	abuser := d.connect(t)
	phases := []struct {
		name, command string
		// then, when set, is a command repeated after command until its
		// result holds until: it waits for what command left running in
		// the background, whatever the timeout cuts short.
		then, until string
		want        []string
	}{
		// The loop holds the call until the timeout: the bomb's first
		// function returns once bash gives up retrying its forks, and
		// what is left of the bomb would go on in the background.
		{name: "fork bomb", command: "b(){ b & b & wait; }; b 2>/dev/null; while :; do wait; done", want: []string{"timed out after 20 seconds"}},
		// The hog needs CPU to fill 512 MiB, and its share is small: its
		// leaf is one of the busy shells' in dsh's cpu group, which all
		// together weigh as much as one process of the machine's. On a
		// loaded machine it can take longer than the timeout, which
		// would end it before it reaches the limit. So it runs in the
		// background and the calls wait for it, as long as it takes: the
		// one during which the kernel ends it names the limit.
		{name: "memory hog", command: `python3 -c 'x = b"x" * (1 << 30)' &`, then: `wait $!; echo "the hog's exit status: $?"`, until: "the hog's exit status: "},
		{name: "150 MB of output", command: `head -c 150000000 /dev/zero | tr '\0' a | fold -w 99`, want: []string{"characters (", "omitted; the full output"}},
		{name: "a call after all that", command: "echo still here", want: []string{"still here"}},
	}
	if limits == soakLimits {
		phases[0].want = append(phases[0].want, "limit of 256 processes and threads", "they were ended too")
		phases[1].want = append(phases[1].want, "memory limit (512MiB)", "the hog's exit status: 137")
	}
	call := func(command string) (string, error) {
		res, err := abuser.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
		if err != nil {
			return "", err
		}
		return resultText(res), nil
	}
	for _, p := range phases {
		t0 := time.Now()
		text, err := call(p.command)
		for n := 1; err == nil && p.then != ""; n++ {
			var more string
			more, err = call(p.then)
			text += "\n" + more
			if strings.Contains(more, p.until) {
				t.Logf("%s: waited for in %d calls", p.name, n)
				break
			}
		}
		if err != nil {
			t.Errorf("%s: %v", p.name, err)
			break
		}
		for _, w := range p.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: the result lacks %q:\n%s", p.name, w, clipText(text, 2000))
			}
		}
		t.Logf("%s: answered in %s; limit hits so far: memory %s, pids %s", p.name, time.Since(t0).Round(time.Millisecond),
			scrapeMaybe(d.metricsURL, "dsh_bash_memory_limit_hits_total"), scrapeMaybe(d.metricsURL, "dsh_bash_pids_limit_hits_total"))
	}
	close(abuseDone)
	others.Wait()
	status := procStatus(t, pid)
	peakTasks := box.PeakTasks()
	ended := scrapeMaybe(d.metricsURL, "dsh_bash_timeout_ended_processes_total")
	memHits := scrapeMaybe(d.metricsURL, "dsh_bash_memory_limit_hits_total")
	pidsHits := scrapeMaybe(d.metricsURL, "dsh_bash_pids_limit_hits_total")
	abuser.Close()
	d.stop(t, syscall.SIGTERM)

	for _, f := range failures[:min(len(failures), 20)] {
		t.Error(f)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d calls of the other sessions failed", len(failures), calls.Load())
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		t.Logf("%d other sessions made %d calls, %d failed; latency p50 %s, p99 %s, max %s",
			sessions, calls.Load(), len(failures), lat[len(lat)/2].Round(time.Millisecond),
			lat[int(0.99*float64(len(lat)-1))].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	}
	t.Logf("dsh survived and stopped cleanly; its peak RSS (VmHWM) %s, threads at the end %s; the box's peak tasks %d of %d; processes the timeout ended: %s; limit hits: memory %s, pids %s",
		status["VmHWM"], status["Threads"], peakTasks, boxTasks, ended, memHits, pidsHits)
	if limits == soakLimits && (memHits != "1" || pidsHits != "1") {
		t.Errorf("limit hits counted: memory %s, pids %s; want 1 each", memHits, pidsHits)
	}
}

// scrapeMaybe reads one unlabelled metric, "-" when dsh does not serve
// it (a dsh of another version, or one that died).
func scrapeMaybe(url, name string) string {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "-"
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "-"
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return v
		}
	}
	return "-"
}

func resultText(res *mcp.CallToolResult) string {
	if len(res.Content) != 1 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + " … " + s[len(s)-n/2:]
}
