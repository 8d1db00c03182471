package bashtool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dshdev/dsh/host"
	bashtool "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

// callArgs calls the tool with args and fails the test on an error result.
func (hs *harness) callArgs(t testing.TB, o *host.Owner, args bashtool.Args) string {
	t.Helper()
	raw, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := hs.h.Tools().Call(ctx, o, bashtool.ToolName, raw)
	if res.IsError {
		t.Fatalf("%+v: error result %q", args, res.Text)
	}
	return res.Text
}

// TestCallTimeout: a call's timeoutMs shortens the configured timeout, never
// lengthens it, and the timeout's header says which one applied.
func TestCallTimeout(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "{timeoutMs: 2000, timeoutAction: interrupt}", "")
	o := hs.owner(t, "calltimeout")
	interrupted := "[The command was interrupted with SIGINT when it timed out. The shell and its state are kept: current directory, variables, functions, background jobs.]"
	for _, tt := range []struct {
		ms   int
		secs string
	}{{300, "0.3"}, {600000, "2"}} {
		got := hs.callArgs(t, o, bashtool.Args{Command: "echo started; sleep 100", TimeoutMs: tt.ms})
		if want := timeoutHeader(tt.secs) + "\nstarted\n" + interrupted; got != want {
			t.Fatalf("timeoutMs %d:\n%s", tt.ms, diff(got, want))
		}
	}
	// Within its own timeout a call is not cut short.
	if got := hs.callArgs(t, o, bashtool.Args{Command: "sleep 0.1; echo in-time", TimeoutMs: 60000}); got != "in-time" {
		t.Fatalf("a call within its timeout: %q", got)
	}
}

// TestCallTimeoutMustBePositive: a timeoutMs below 1 is refused by name
// before anything runs.
func TestCallTimeoutMustBePositive(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "", "")
	o := hs.owner(t, "badtimeout")
	res := hs.h.Tools().Call(t.Context(), o, bashtool.ToolName, json.RawMessage(`{"command":"echo hi","timeoutMs":-5}`))
	if !res.IsError || !strings.Contains(res.Text, "timeoutMs") {
		t.Fatalf("timeoutMs -5: %+v", res)
	}
}

// TestBackgroundCall: background starts the command as a job of the same
// shell and answers at once with its job number; the job's output comes
// with a later result, and wait gives its status.
func TestBackgroundCall(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "", "")
	o := hs.owner(t, "background")
	gate := fifo(t)
	hs.expect(t, o, "cd /tmp; export K=1", "")
	start := time.Now()
	got := hs.callArgs(t, o, bashtool.Args{Command: fmt.Sprintf("read x < %q; echo job-output in $PWD K=$K\nexit 3 # a comment", gate), Background: true})
	want := "[The command was started in the background as job %1 and keeps running. Its output appears in later results; `wait %1` waits for it and gives its status, `kill %1` stops it.]"
	if got != want {
		t.Fatalf("background call:\n%s", diff(got, want))
	}
	t.Logf("answered in %v", time.Since(start))
	if got := hs.run(t, o, "jobs"); !strings.HasPrefix(got, "[1]+  Running") {
		t.Fatalf("jobs: %q", got)
	}
	got = hs.run(t, o, fmt.Sprintf("echo go > %q; wait %%1; echo status=$?", gate))
	if !strings.Contains(got, "job-output in /tmp K=1") || !strings.HasSuffix(got, "status=3") {
		t.Fatalf("after wait: %q", got)
	}
	// The shell is the same one, where the command ran as a job.
	hs.expect(t, o, "echo $PWD K=$K; jobs", "/tmp K=1")
	// A command that cannot start reports why, as any command does.
	if got := hs.callArgs(t, o, bashtool.Args{Command: "if then", Background: true}); !strings.Contains(got, "syntax error") || !strings.HasSuffix(got, "[exit code: 2]") {
		t.Fatalf("a background command with a syntax error: %q", got)
	}
}
