package bashtool_test

// Tests of the shell protocol as the model sees it: background output, prompt
// overrides, interrupts, forging and hijacking attempts, and a stopped shell.
// Each one reproduces a defect found on an earlier design.

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const interactiveNotice = "[The command was waiting for interactive input, which this tool does not provide, so it was interrupted. Pass input non-interactively: arguments, a pipe, a here-document, or a --yes style flag.]"

// bgLine matches a line a background job of these tests prints.
var bgLine = regexp.MustCompile(`(?m)^bg-\d+$`)

// TestBackgroundOutputReachesTheModelOnce: background jobs that print while
// quick calls run lose nothing and duplicate nothing, whether their output
// lands during a call or between two.
func TestBackgroundOutputReachesTheModelOnce(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "bg-once")
	var all strings.Builder
	all.WriteString(hs.run(t, o, `for i in $(seq 20); do (sleep 0.0$i; echo bg-$i) & done`))
	for range 300 {
		all.WriteString("\n" + hs.run(t, o, "true"))
	}
	all.WriteString("\n" + hs.run(t, o, "wait"))
	all.WriteString("\n" + hs.run(t, o, "true"))
	seen := map[string]int{}
	for _, l := range bgLine.FindAllString(all.String(), -1) {
		seen[l]++
	}
	for i := 1; i <= 20; i++ {
		if n := seen["bg-"+strconv.Itoa(i)]; n != 1 {
			t.Errorf("bg-%d reached the model %d times, want once", i, n)
		}
	}
	if t.Failed() {
		t.Logf("all results:\n%s", all.String())
	}
}

// TestPromptOverridesNeverShow: whatever the model does to the prompt
// variables, no prompt text and no background header appear.
func TestPromptOverridesNeverShow(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "prompts")
	for _, override := range []string{
		`PS1='x> '; PROMPT_COMMAND=''; PS2=''`,
		`PROMPT_COMMAND="echo hi"`,
		`PS1='\[\e[1m\]\u@\h:\w\[\e[0m\]\$ '`,
		`PS0='ps0> '`,
		`PROMPT_COMMAND=(echo\ one echo\ two)`,
		`unset PROMPT_COMMAND PS1`,
		`PS1='$(echo subst)> '; PROMPT_COMMAND='printf "\e]0;title\a"'`,
	} {
		hs.expect(t, o, override, "")
		for i := range 3 {
			hs.expect(t, o, fmt.Sprintf("echo ok-%d", i), fmt.Sprintf("ok-%d", i))
		}
		hs.expect(t, o, "false", "[exit code: 1]")
	}
	// The model's own settings still take effect where it uses them.
	hs.expect(t, o, `PROMPT_COMMAND='touch pc-ran'; true`, "")
	hs.expect(t, o, "ls pc-ran", "pc-ran")
}

// TestInterruptKeepsTheShell: interrupting a program that waits for input
// keeps the shell and its state, even when background output lands right
// after the prompt and when the prompt hook was replaced.
func TestInterruptKeepsTheShell(t *testing.T) {
	hs := newHarness(t, "", `{idleSilenceMs: 600000}`)
	o := hs.owner(t, "interrupt")
	hs.expect(t, o, "export KEEP=kept", "")
	for _, setup := range []string{
		"",
		"PROMPT_COMMAND='echo noise'",
		"PS1='x> '",
	} {
		if setup != "" {
			hs.expect(t, o, setup, "")
		}
		for _, command := range []string{"read x", "cat", "echo before; read x; echo never"} {
			got := hs.run(t, o, command)
			if !strings.HasSuffix(got, interactiveNotice) || strings.Contains(got, "never") || strings.Contains(got, "x> ") || strings.Contains(got, "noise") {
				t.Fatalf("after %q, %q gave %q", setup, command, got)
			}
			hs.expect(t, o, "echo $KEEP", "kept")
		}
	}
	// A background job that keeps printing lands its output around every
	// prompt of the interrupt.
	hs.run(t, o, "(while :; do echo tick; done) >/dev/tty 2>&1 & TICKER=$!")
	got := withoutSavedLines(t, hs.run(t, o, "read x"))
	if !strings.HasSuffix(got, interactiveNotice) {
		t.Fatalf("read with a chatty background job: %q", clip(got, 300))
	}
	got = withoutSavedLines(t, hs.run(t, o, "kill $TICKER; wait $TICKER 2>/dev/null; echo $KEEP"))
	if !strings.HasSuffix(got, "kept") {
		t.Fatalf("state after the interrupt: %q", clip(got, 300))
	}
}

// TestPromptCommandKeepingDshs: a PROMPT_COMMAND that keeps the one it
// found (as direnv and bashrc snippets write it) holds dsh's own hook. It
// runs, quietly, after every command, and the shell and its state survive
// (it used to recurse until bash died of SIGSEGV).
func TestPromptCommandKeepingDshs(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "keeping-hook")
	hs.expect(t, o, "export KEEP=kept; n=0", "")
	for i, change := range []string{
		`PROMPT_COMMAND='n=$((n+1)); '"$PROMPT_COMMAND"`,
		`PROMPT_COMMAND="$PROMPT_COMMAND; history -a"`,
		`PROMPT_COMMAND+=$'\n''echo noise'`,
		`PROMPT_COMMAND+=('echo noise')`,
		`PROMPT_COMMAND=(history\ -a "$PROMPT_COMMAND")`,
	} {
		hs.expect(t, o, change, "")
		hs.expect(t, o, "echo $KEEP", "kept")
		if i == 0 {
			// The hook ran once after each of the two calls.
			hs.expect(t, o, "echo $n", "2")
		}
	}
}

// TestMultiLineBackgroundJobListsOnlyItsNumber: starting a background job
// whose text spans lines shows bash's "[1] PID" and nothing of its body.
func TestMultiLineBackgroundJobListsOnlyItsNumber(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "multiline-job")
	for _, command := range []string{
		"for i in 1 2 3; do sleep 0.3; done &",
		"{\n  sleep 0.3\n  true\n} &",
		"(cat <<'EOF' >/dev/null; sleep 0.3) &\nline one\nline two\nEOF",
	} {
		got := hs.run(t, o, command)
		if !regexp.MustCompile(`^\[\d+\] \d+$`).MatchString(got) {
			t.Fatalf("%q: %q, want only [N] PID", command, got)
		}
	}
	hs.run(t, o, "wait")
}

// hijacker joins the shell's process group, gives the terminal to it (as
// the shell would on its way back to its prompt), prints what an earlier
// design took for the shell's prompt, and then reads the terminal as if it
// were the shell.
const hijacker = `python3 -c '
import os, signal, sys
shell = os.getpgid(os.getppid())
os.setpgid(0, shell)
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
os.tcsetpgrp(0, shell)
sys.stdout.write("__dsh_0000_end_0__\n\x1b]133;D;0\x07dsh> ")
sys.stdout.flush()
line = sys.stdin.readline()
print("stole:", line.strip())
sys.exit(7)
'`

// TestTerminalHijackDoesNotEndTheCall: a program that takes the terminal
// back and fakes the shell's prompt neither ends the call nor reads the next
// command.
func TestTerminalHijackDoesNotEndTheCall(t *testing.T) {
	hs := newHarness(t, "", `{idleSilenceMs: 600000}`)
	o := hs.owner(t, "hijack")
	got := hs.run(t, o, hijacker)
	if !strings.HasSuffix(got, interactiveNotice) {
		t.Fatalf("the hijacker's call returned %q, want it interrupted as a program waiting for input", got)
	}
	hs.expect(t, o, "echo next", "next")
}

// TestInShellCodeCannotForgeResults: what a command can do inside the shell
// neither ends its call early nor breaks the calls after it.
func TestInShellCodeCannotForgeResults(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "forge")
	steps := []struct{ command, want string }{
		// Print every end marker an earlier design used.
		{`echo "__dsh_${__dsh_id}_end_0__"; printf '\0E 0\n'; echo rest; (exit 3)`, "__dsh__end_0__\nE 0\nrest\n[exit code: 3]"},
		// Write a fake end record into the shell's own status channel.
		{`for f in $(declare -f | grep -o "'/[^']*/out'" | tr -d "'"); do printf '\0E 0000000000000000 0 1 x\n' >>"$f"; done; echo rest; (exit 4)`, "rest\n[exit code: 4]"},
	}
	for _, s := range steps {
		got := hs.run(t, o, s.command)
		if !strings.HasSuffix(got, s.want) {
			t.Fatalf("%q:\n%s", s.command, diff(got, s.want))
		}
	}
	for _, sabotage := range []string{
		"__dsh_e() { :; }",
		"__dsh_b() { :; }",
		"unset -f __dsh_b __dsh_e __dsh_p",
		"alias eval=true builtin=true read=true printf=true",
		"enable -n printf",
		"enable -n read eval jobs",
		"printf() { echo fake; }",
		"read() { :; }; eval() { :; }; set() { :; }; jobs() { :; }; return() { :; }",
		"builtin() { :; }",
		"unset() { :; }; enable() { :; }",
		"set -o vi",
		"set +o emacs +o vi",
		"set +m",
		"IFS=x",
		"set -u; set -f; set -C",
	} {
		hs.run(t, o, sabotage)
		for i := range 2 {
			hs.expect(t, o, fmt.Sprintf("echo ok-%d", i), fmt.Sprintf("ok-%d", i))
		}
		hs.expect(t, o, "(exit 5)", "[exit code: 5]")
		hs.expect(t, o, "export CHECK=1; cd /; pwd", "/")
	}
}

// TestStoppedShellRecovers: a shell stopped with SIGSTOP, during a call or
// between calls, is continued at once instead of holding calls until they
// time out.
func TestStoppedShellRecovers(t *testing.T) {
	hs := newHarness(t, "{timeoutMs: 30000}", "")
	o := hs.owner(t, "stopped")
	hs.expect(t, o, "export KEEP=kept", "")
	got := hs.run(t, o, "kill -STOP $$; echo after-stop")
	if !strings.Contains(got, "after-stop") || strings.Contains(got, "timed out") {
		t.Fatalf("stopped during a call: %q", got)
	}
	hs.expect(t, o, "echo $KEEP", "kept")

	// The job stops the shell only once the call that started it is over.
	release, stopped := fifo(t), fifo(t)
	hs.run(t, o, fmt.Sprintf("(read _ < %q; kill -STOP $$; echo > %q) >/dev/null 2>&1 &", release, stopped))
	if err := os.WriteFile(release, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	awaitFIFO(t, stopped)
	got = hs.run(t, o, "echo $KEEP")
	// Bash reports the finished job itself, before or after the command.
	if !strings.HasPrefix(got, "[The shell had been stopped (SIGSTOP); it was continued.]\n") || !regexp.MustCompile(`(?m)^kept$`).MatchString(got) || strings.Contains(got, "timed out") {
		t.Fatalf("stopped between calls: %q", got)
	}
}

// TestNoticesAreExact: the notices the seed contract fixes come without
// stray blank lines or bash's own chatter, every time.
func TestNoticesAreExact(t *testing.T) {
	hs := newHarness(t, "", `{idleSilenceMs: 600000}`)
	o := hs.owner(t, "cosmetics")
	for range 10 {
		hs.expect(t, o, "read x", interactiveNotice)
		hs.expect(t, o, "echo before; read x", "before\n"+interactiveNotice)
	}
	for i := range 10 {
		hs.expect(t, o, fmt.Sprintf("echo before; exit %d", i+1), fmt.Sprintf("before\n[shell exited: code %d]\n%s", i+1, reset))
		hs.expect(t, o, "exit", "[shell exited: code 0]\n"+reset)
	}
}

// TestCallAfterOwnerCloseLeavesNothing: a shell's protocol files go with it.
func TestProtocolFilesGoWithTheShell(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "files")
	out := hs.run(t, o, `declare -f | grep -o "'/[^']*/out'" | tr -d "'" | head -1`)
	if out == "" {
		t.Fatal("no status channel found in the shell's functions")
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("status channel %s: %v", out, err)
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("status channel %s survived its shell: %v", out, err)
	}
}

// TestInterruptOfABusyShell: a shell slow to reach its prompt after a
// read is interrupted (here its own prompt command keeps it busy; on a
// loaded machine it is the scheduler) is waited for, past SIGINT's and
// SIGTERM's steps: SIGKILL would end the shell itself, and with it the
// owner's state.
func TestInterruptOfABusyShell(t *testing.T) {
	hs := newHarness(t, "", `{idleSilenceMs: 600000}`)
	o := hs.owner(t, "busy")
	pid := hs.run(t, o, "export KEEP=kept; echo $$")
	// Once, the prompt command loops in the shell itself longer than the
	// two steps (2 s each; an interactive bash ignores SIGTERM), whatever
	// the machine's speed: it counts wall-clock seconds.
	hs.expect(t, o, `PROMPT_COMMAND='if [[ -n $SLOW ]]; then unset SLOW; end=$((SECONDS + 6)); while ((SECONDS < end)); do :; done; fi'`, "")
	if got := hs.run(t, o, "SLOW=1; read x"); !strings.HasSuffix(got, interactiveNotice) || strings.Contains(got, "reset") {
		t.Fatalf("the busy shell's read gave %q", got)
	}
	hs.expect(t, o, "echo $$ $KEEP", pid+" kept")
}
