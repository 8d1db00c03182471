package bashtool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshdev/dsh/host"
)

// venvScript is a stand-in for an activated virtualenv: it changes the
// environment and defines a function, as `source .venv/bin/activate` does.
const venvScript = `export VIRTUAL_ENV=/opt/venv
venv_greet() { echo "venv-ok"; }
`

// stateProbe reads back what prepareState set.
const stateProbe = `pwd; echo "K=${K-unset}"; venv_greet 2>/dev/null || echo "no venv_greet"`

func timeoutHeader(secs string) string {
	return "Your command timed out after " + secs + " seconds or experienced an OOM error. Below is partial output:"
}

// TestTimeoutActions: after a timeout, interrupt and background keep the
// shell's directory, variables and functions; reset does not.
func TestTimeoutActions(t *testing.T) {
	venv := filepath.Join(t.TempDir(), "activate")
	if err := os.WriteFile(venv, []byte(venvScript), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct {
		action string
		last   string // the result's last line
		kept   bool
	}{
		{"reset", reset, false},
		{"interrupt", "[The command was interrupted with SIGINT when it timed out. The shell and its state are kept: current directory, variables, functions, background jobs.]", true},
		{"background", "[The command was moved to the background as job %1 when it timed out, and keeps running. The shell and its state are kept. Its output appears in later results; `wait %1` waits for it and gives its status, `kill %1` stops it.]", true},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			t.Parallel()
			hs := newHarness(t, fmt.Sprintf("{timeoutMs: 1000, timeoutAction: %s}", tt.action), "")
			o := hs.owner(t, tt.action)
			hs.expect(t, o, fmt.Sprintf("cd %q; export K=1; source %q", dir, venv), "")
			got := hs.run(t, o, "echo started; sleep 100")
			want := timeoutHeader("1") + "\nstarted\n" + tt.last
			if got != want {
				t.Fatalf("timeout result:\n%s", diff(got, want))
			}
			wantState := dir + "\nK=1\nvenv-ok"
			if !tt.kept {
				wantState = o.Workdir() + "\nK=unset\nno venv_greet"
			}
			hs.expect(t, o, stateProbe, wantState)
		})
	}
}

// TestTimeoutBackgroundJobLivesOn: a command moved to the background goes
// on running in the same shell; what it prints later reaches a later call,
// and `wait %1` gives its status.
func TestTimeoutBackgroundJobLivesOn(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "{timeoutMs: 1000, timeoutAction: background}", "")
	o := hs.owner(t, "bg")
	gate := fifo(t)
	got := hs.run(t, o, fmt.Sprintf("bash -c 'echo started; read x < %q; echo late-output; exit 7'", gate))
	if !strings.HasPrefix(got, timeoutHeader("1")+"\nstarted\n[The command was moved to the background as job %1 ") {
		t.Fatalf("timeout result %q", got)
	}
	if got := hs.run(t, o, "jobs"); !regexp.MustCompile(`^\[1\]\+ +Running +bash -c .* &$`).MatchString(got) {
		t.Fatalf("jobs shows %q", got)
	}
	// The job waits on the gate, not the terminal. The shell opens it with
	// a builtin and goes straight into wait: no foreground job ends in
	// between, so bash cannot have reported (and forgotten) the job
	// before wait asks for it.
	got = hs.run(t, o, fmt.Sprintf("echo go > %q; wait %%1; echo status=$?", gate))
	if strings.Count("\n"+got+"\n", "\nlate-output\n") != 1 || !strings.HasSuffix(got, "status=7") {
		t.Fatalf("after wait: %q", got)
	}
	hs.expect(t, o, "echo $$ >/dev/null; jobs", "")
}

// TestTimeoutInterruptEscalates: a command that ignores SIGINT and SIGTERM
// is killed, one that ignores SIGTSTP is interrupted instead of moved, and
// a loop of the shell itself (which no job control can stop) is broken by
// SIGINT; the shell is kept each time.
func TestTimeoutInterruptEscalates(t *testing.T) {
	tests := []struct{ name, command, output, signal string }{
		// bash -c with INT, TERM and TSTP ignored: every child inherits
		// that, so only SIGKILL ends it.
		{"stubborn", `bash -c 'trap "" INT TERM TSTP; echo stubborn; while :; do sleep 0.05; done'`, "stubborn", "SIGKILL"},
		{"ignores TSTP", `bash -c 'trap "" TSTP; echo no-stop; while :; do sleep 0.05; done'`, "no-stop", "SIGINT"},
		{"shell loop", `echo looping; while :; do :; done`, "looping", "SIGINT"},
	}
	for _, action := range []string{"interrupt", "background"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			hs := newHarness(t, fmt.Sprintf("{timeoutMs: 1000, timeoutAction: %s}", action), "")
			o := hs.owner(t, action)
			hs.expect(t, o, "export K=1", "")
			for _, tt := range tests {
				if action == "interrupt" && tt.name == "ignores TSTP" {
					continue
				}
				got := hs.run(t, o, tt.command)
				want := timeoutHeader("1") + "\n" + tt.output + "\n[The command was interrupted with " + tt.signal + " when it timed out. The shell and its state are kept: current directory, variables, functions, background jobs.]"
				if got != want {
					t.Fatalf("%s: timeout result:\n%s", tt.name, diff(got, want))
				}
				hs.expect(t, o, "echo K=$K; jobs", "K=1")
			}
		})
	}
}

// TestTimeoutAnswersAtTheDeadline: the answer does not wait for a shell
// whose command ignores SIGTERM and SIGHUP to be killed (disposeGraceMs
// later); the next call waits for it instead, and never sees it.
func TestTimeoutAnswersAtTheDeadline(t *testing.T) {
	t.Parallel()
	const timeoutMs, graceMs = 2000, 10000
	hs := newHarness(t, fmt.Sprintf("{timeoutMs: %d}", timeoutMs), fmt.Sprintf("{disposeGraceMs: %d}", graceMs))
	o := hs.owner(t, "bound")
	pid, _ := strconv.Atoi(hs.run(t, o, "echo $$"))
	start := time.Now()
	got := hs.run(t, o, "trap '' TERM HUP; echo stubborn; sleep 100")
	took := time.Since(start)
	if want := timeoutHeader("2") + "\nstubborn\n" + reset; got != want {
		t.Fatalf("timeout result:\n%s", diff(got, want))
	}
	// Generous: the old behaviour answers after timeoutMs + disposeGraceMs.
	if bound := time.Duration(timeoutMs+graceMs/2) * time.Millisecond; took > bound {
		t.Fatalf("answered after %v, beyond %v", took, bound)
	}
	t.Logf("answered %v after the call started (timeoutMs %d)", took, timeoutMs)
	hs.expect(t, o, "echo next", "next")
	if alive(pid) {
		t.Fatalf("the old shell %d was alive when the next call ran", pid)
	}
}

func TestTimeoutHeaderSaysTheRealDuration(t *testing.T) {
	for _, tt := range []struct {
		ms   int
		secs string
	}{{500, "0.5"}, {1250, "1.25"}} {
		hs := newHarness(t, fmt.Sprintf("{timeoutMs: %d}", tt.ms), "")
		o := hs.owner(t, "subsecond")
		got := hs.run(t, o, "sleep 100")
		if want := timeoutHeader(tt.secs) + "\n\n" + reset; got != want {
			t.Fatalf("timeoutMs %d:\n%s", tt.ms, diff(got, want))
		}
	}
}

func TestTimeoutActionIsValidated(t *testing.T) {
	d, err := host.ParseDeployment("bad.yaml", []byte(`
- id: terminal
  name: terminal
- id: terminal-bash
  name: terminal-bash
- id: bash
  name: tool-bash-persistent
  config: {timeoutAction: kill}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Load(t.Context(), d)
	if err == nil {
		h.Close(t.Context())
		t.Fatal("a deployment with timeoutAction: kill loaded")
	}
	if want := `bad.yaml:8: entry "bash" (tool-bash-persistent): timeoutAction must be one of reset, interrupt, background; got "kill"`; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

// TestShellStartDoesNotCountAgainstTheTimeout: on a machine starting many
// shells at once, a first call waits for its shell; that wait is not the
// command's, so a command well within timeoutMs is not timed out for it.
// The shell here takes 1.5 s to start, longer than timeoutMs.
func TestShellStartDoesNotCountAgainstTheTimeout(t *testing.T) {
	t.Parallel()
	slow := filepath.Join(t.TempDir(), "slow-bash")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 1.5\nexec /bin/bash \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hs := newHarness(t, "{timeoutMs: 1000}", fmt.Sprintf("{shellPath: %q}", slow))
	o := hs.owner(t, "slowstart")
	hs.expect(t, o, "echo started", "started")
	// The command itself is still bounded by timeoutMs.
	got := hs.run(t, o, "sleep 100")
	if want := timeoutHeader("1") + "\n\n" + reset; got != want {
		t.Fatalf("a command past timeoutMs:\n%s", diff(got, want))
	}
}

// TestTimeoutBackgroundCompound: bash moves only the program a command
// runs, not a loop or list of its own around it. The result names what was
// moved and says that the rest of the command was not run, and nothing of
// it runs: the loop does not go on, the list does not either. A command
// that is the program alone, or ends with it, is moved whole.
func TestTimeoutBackgroundCompound(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, "{timeoutMs: 1000, timeoutAction: background}", "")
	o := hs.owner(t, "compound")
	// The bash backend (in process or not) ends the line at the job; a
	// backend that cannot (SSH, Docker: run the suite with
	// DSH_TEST_BACKEND) lets bash go on, and the result must say so.
	rest, after := "the rest of the command was not run", ""
	if path := os.Getenv(externalBackend); path != "" && filepath.Base(path) != "dsh-backend-bash" {
		rest = "the shell went on at once with the rest of the command"
	}
	moved := func(job int, what string) string {
		return fmt.Sprintf("[The command timed out while running `%[2]s`, which was moved to the background as job %%%[1]d and keeps running; %[3]s (bash can move only the program it runs, not a loop or list around it). The shell and its state are kept. Its output appears in later results; `wait %%%[1]d` waits for it and gives its status, `kill %%%[1]d` stops it.]", job, what, rest)
	}
	whole := "[The command was moved to the background as job %1 when it timed out, and keeps running. The shell and its state are kept. Its output appears in later results; `wait %1` waits for it and gives its status, `kill %1` stops it.]"
	for _, tt := range []struct{ command, output, rest, last string }{
		{"for i in 1 2 3; do echo it-$i; sleep 100; done; echo after-loop", "it-1", "after-loop\n", moved(1, "sleep 100")},
		{"echo first; sleep 100; echo after-list", "first", "after-list\n", moved(1, "sleep 100")},
		{"cd /tmp && echo in-tmp && sleep 100", "in-tmp", "", whole},
	} {
		got := hs.run(t, o, tt.command)
		if strings.HasPrefix(rest, "the shell went on") {
			after = tt.rest
		}
		if want := timeoutHeader("1") + "\n" + tt.output + "\n" + after + tt.last; got != want {
			t.Fatalf("%s:\n%s", tt.command, diff(got, want))
		}
		// Nothing of the rest runs later either.
		if got := hs.run(t, o, "jobs; kill %1; wait %1 2>/dev/null; :"); !regexp.MustCompile(`^\[1\]\+ +Running +sleep 100 &`).MatchString(got) || strings.Contains(got, "after") || strings.Contains(got, "it-2") {
			t.Fatalf("%s: afterwards: %q", tt.command, got)
		}
	}
}
