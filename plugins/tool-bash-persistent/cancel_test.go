package bashtool_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshdev/dsh/host"
)

// cancelLine matches the line that starts the owner's next result after a
// cancelled call, and captures the seconds the command ran.
func cancelLine(rest string) *regexp.Regexp {
	return regexp.MustCompile(`^\[The previous command was cancelled after ([0-9.]+) seconds` + regexp.QuoteMeta(rest))
}

const keptTail = " The shell and its state are kept. Its output until then:]\n"

// cancelDuring runs command as a call, waits until it has written to the
// fifo gate, cancels the call, and returns the call's result and how long
// the call took to return after the cancel.
func (hs *harness) cancelDuring(t *testing.T, o *host.Owner, command, gate string) (host.Result, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan host.Result, 1)
	go func() { done <- hs.call(ctx, o, command) }()
	awaitFIFO(t, gate)
	cancel()
	start := time.Now()
	select {
	case res := <-done:
		return res, time.Since(start)
	case <-time.After(60 * time.Second):
		t.Fatal("the cancelled call did not return within 60 s")
		return host.Result{}, 0
	}
}

// TestCancelKeepsTheShell: a cancelled call (Esc in Claude Code,
// notifications/cancelled, a second Ctrl-C in the REPL) interrupts its
// command and keeps the shell, its directory and variables; the owner's
// next result starts with a line saying so, how long the command ran, the
// signal that ended it, and what it printed.
func TestCancelKeepsTheShell(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "", "")
	o := hs.owner(t, "cancel")
	dir := t.TempDir()
	pid := hs.run(t, o, fmt.Sprintf("cd %q; export K=kept; echo $$", dir))
	gate := fifo(t)
	res, took := hs.cancelDuring(t, o, fmt.Sprintf("echo started; echo line-2; echo go > %q; sleep 100", gate), gate)
	if !res.IsError || !strings.Contains(res.Text, "cancelled") {
		t.Fatalf("the cancelled call: %+v", res)
	}
	t.Logf("the cancelled call returned %v after the cancel", took)
	got := hs.run(t, o, "echo $$ $PWD K=$K")
	m := cancelLine(" and interrupted with SIGINT." + keptTail + "started\nline-2\n" + pid + " " + dir + " K=kept").FindStringSubmatch(got + "$")
	if m == nil || !strings.HasSuffix(got, pid+" "+dir+" K=kept") {
		t.Fatalf("the next result:\n%s", got)
	}
	if secs, _ := strconv.ParseFloat(m[1], 64); secs > 60 {
		t.Fatalf("the command ran %s seconds, by the report", m[1])
	}
	// Said once: the result after does not repeat it.
	hs.expect(t, o, "echo again", "again")
}

// TestCancelEscalates: a command that ignores SIGINT is ended with
// SIGTERM, one that ignores SIGTERM too with SIGKILL, and the report says
// which; one that printed nothing says so.
func TestCancelEscalates(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "", "")
	o := hs.owner(t, "escalate")
	hs.run(t, o, "export K=kept")
	for _, tt := range []struct{ traps, signal string }{
		{"INT", "SIGTERM"},
		{"INT TERM", "SIGKILL"},
	} {
		gate := fifo(t)
		res, took := hs.cancelDuring(t, o, fmt.Sprintf(`bash -c 'trap "" %s; echo go > %q; while :; do sleep 0.05; done'`, tt.traps, gate), gate)
		if !res.IsError {
			t.Fatalf("the cancelled call: %+v", res)
		}
		t.Logf("%s: the cancelled call returned %v after the cancel", tt.signal, took)
		got := hs.run(t, o, "echo K=$K")
		if !cancelLine(" and interrupted with " + tt.signal + ". The shell and its state are kept. It printed nothing.]\nK=kept").MatchString(got) {
			t.Fatalf("after a command that ignores %s, the next result:\n%s", tt.traps, got)
		}
	}
}

// TestCancelReports: reports of cancelled calls are kept until a result
// carries them, in order, even when the next call is cancelled too.
func TestCancelReports(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "", "")
	o := hs.owner(t, "reports")
	for _, word := range []string{"first", "second"} {
		gate := fifo(t)
		if res, _ := hs.cancelDuring(t, o, fmt.Sprintf("echo %s; echo go > %q; sleep 100", word, gate), gate); !res.IsError {
			t.Fatalf("the cancelled call: %+v", res)
		}
	}
	got := hs.run(t, o, "echo third")
	lines := strings.Split(got, "\n")
	if len(lines) != 5 || !cancelLine("").MatchString(lines[0]) || lines[1] != "first" || !cancelLine("").MatchString(lines[2]) || lines[3] != "second" || lines[4] != "third" {
		t.Fatalf("the next result:\n%s", got)
	}
}

// TestCancelReset: with cancelAction reset, a cancelled call closes the
// shell as the original does, and the next result says so.
func TestCancelReset(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "{cancelAction: reset}", "")
	o := hs.owner(t, "cancelreset")
	hs.run(t, o, "export K=kept")
	gate := fifo(t)
	if res, _ := hs.cancelDuring(t, o, fmt.Sprintf("echo before; echo go > %q; sleep 100", gate), gate); !res.IsError {
		t.Fatalf("the cancelled call: %+v", res)
	}
	got := hs.run(t, o, "echo K=${K-unset}")
	if !cancelLine(", and the shell was reset: this command ran from the workspace with a fresh current directory and environment. Its output until then:]\nbefore\nK=unset").MatchString(got) {
		t.Fatalf("the next result:\n%s", got)
	}
}

// TestCancelEndsWhatTheCommandStarted: a cancelled command is ended as
// timeoutAction interrupt ends one: its background jobs go with it, and
// the next result says so; a job of an earlier call keeps running.
func TestCancelEndsWhatTheCommandStarted(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "", "")
	o := hs.owner(t, "cancelstarted")
	out := hs.run(t, o, "sleep 1000 & echo pid=$!")
	_, after, _ := strings.Cut(out, "pid=")
	early, err := strconv.Atoi(strings.TrimSpace(after))
	if err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	gate := fifo(t)
	if res, _ := hs.cancelDuring(t, o, fmt.Sprintf("sleep 1001 & sleep 1002 & echo started; echo go > %q; sleep 100", gate), gate); !res.IsError {
		t.Fatalf("the cancelled call: %+v", res)
	}
	got := hs.run(t, o, "echo next")
	left := "\nstarted\n[The command had left 2 processes running (background jobs and what they started); they were ended too. Jobs from earlier commands are kept.]\n"
	if !cancelLine(" and interrupted with SIGINT."+keptTail).MatchString(got) || !strings.Contains(got, left) || !strings.Contains(got, "\nnext") {
		t.Fatalf("the next result:\n%s", got)
	}
	if got := hs.run(t, o, "jobs -r"); !strings.Contains(got, "sleep 1000") || strings.Contains(got, "sleep 1001") || strings.Contains(got, "sleep 1002") {
		t.Errorf("jobs running after the cancel: %q", got)
	}
	if !alive(early) {
		t.Error("the earlier call's job was ended")
	}
}

// TestCancelReportIsClipped: the output a cancelled command printed is
// bounded in the report like any output: cut to maxOutputChars, the whole
// saved to a file the report names, which the shell can read.
func TestCancelReportIsClipped(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "{maxOutputChars: 2000}", "")
	o := hs.owner(t, "cancelclipped")
	gate := fifo(t)
	if res, _ := hs.cancelDuring(t, o, fmt.Sprintf("seq 1 20000; echo go > %q; sleep 100", gate), gate); !res.IsError {
		t.Fatalf("the cancelled call: %+v", res)
	}
	got := hs.run(t, o, "echo next")
	if !cancelLine(" and interrupted with SIGINT."+keptTail+"1\n2\n").MatchString(got) || len(got) > 4000 {
		t.Fatalf("the next result (%d characters):\n%s", len(got), clip(got, 3000))
	}
	m := regexp.MustCompile(`\n\[full output: (\S+)\]\n`).FindStringSubmatch(got)
	if m == nil || !strings.HasSuffix(got, "\nnext") {
		t.Fatalf("the next result names no saved file before its own output:\n%s", clip(got, 3000))
	}
	if lines := hs.run(t, o, fmt.Sprintf("wc -l < %q", m[1])); lines != "20000" {
		t.Fatalf("the saved file has %s lines", lines)
	}
}
