package bashtool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dshdev/dsh/host"
	bashtool "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

const reset = "The persistent bash shell was reset; the next bash call starts from the workspace with a fresh current directory and environment."

func TestSchemaAndDescription(t *testing.T) {
	hs := newHarness(t, "", "")
	tools := hs.h.Tools().List()
	if len(tools) != 1 || tools[0].Name != "bash" || tools[0].Description != bashtool.DefaultDescription {
		t.Fatalf("tools %+v", tools)
	}
	// The original's schema, and two optional controls (issue 27, item 9).
	want := `{"properties":{"background":{"description":"Run as a background job: answer at once; its output comes with later results.","type":"boolean"},"command":{"description":"The bash command to run. Relative path is preferred in the command.","type":"string"},"timeoutMs":{"description":"Timeout in milliseconds, at most the default.","minimum":1,"type":"integer"}},"required":["command"],"type":"object"}`
	var v any
	if err := json.Unmarshal(tools[0].InputSchema, &v); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(v)
	if string(got) != want {
		t.Fatalf("schema\n got %s\nwant %s", got, want)
	}
}

func TestModelVisibleTexts(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "texts")
	tests := []struct{ command, want string }{
		{"true", ""},
		{"false", "[exit code: 1]"},
		{"echo hi; false", "hi\n[exit code: 1]"},
		{"printf 'a\\nb'", "a\nb"},
		{"printf 'a\\nb\\n'", "a\nb"},
		{"echo $'\\e[31mred\\e[0m plain'", "red plain"},
		{"echo out; echo err >&2", "out\nerr"},
		{"printf '10%%\\r20%%\\r30%%\\n'", "30%"},
		{"echo 中文 ✓", "中文 ✓"},
		{"printf '\\xff\\xfe\\n'", "\ufffd\ufffd"},
		{"echo __dsh_0123456789abcdef_end_0__ __dsh_x_start__", "__dsh_0123456789abcdef_end_0__ __dsh_x_start__"},
		{"echo before; exit 3", "before\n[shell exited: code 3]\n" + reset},
		{"exit 3", "[shell exited: code 3]\n" + reset},
		{"echo gone; kill -9 $$", "gone\n[shell killed by signal: SIGKILL]\n" + reset},
		{"pwd", o.Workdir()},
	}
	for _, tt := range tests {
		hs.expect(t, o, tt.command, tt.want)
	}
}

func TestEmptyAndInvalidCommands(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "empty")
	for _, tt := range []struct{ args, want string }{
		{`{"command":"  \n"}`, "command must be a non-empty string"},
		{`{"command":"echo a\u0000b"}`, "command contains a NUL byte, which bash cannot run"},
		{`{}`, `invalid arguments: missing required property "command"`},
		{`{"command":5}`, `invalid arguments: "command" must be a string, got number 5`},
	} {
		res := hs.h.Tools().Call(t.Context(), o, "bash", json.RawMessage(tt.args))
		if !res.IsError || res.Text != tt.want {
			t.Errorf("%s: got %q (error %v), want error %q", tt.args, res.Text, res.IsError, tt.want)
		}
	}
	hs.expect(t, o, "echo still fine", "still fine")
}

func TestPersistence(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "persist")
	sub := filepath.Join(o.Workdir(), "nested dir")
	hs.expect(t, o, fmt.Sprintf("mkdir -p %q && cd %q", sub, sub), "")
	hs.expect(t, o, "export KEEP=kept; LOCAL=local", "")
	hs.expect(t, o, "greet() { echo \"hello $1\"; }", "")
	hs.expect(t, o, "alias ll='echo aliased'", "")
	hs.expect(t, o, `printf '%s|%s|%s\n' "$PWD" "$KEEP" "$LOCAL"`, sub+"|kept|local")
	hs.expect(t, o, "greet you", "hello you")
	hs.expect(t, o, "ll", "aliased")
	started := hs.run(t, o, "sleep 1000 &")
	if !regexp.MustCompile(`^\[1\] \d+$`).MatchString(started) {
		t.Fatalf("background start: %q", started)
	}
	hs.expect(t, o, "jobs", "[1]+  Running                 sleep 1000 &")
	hs.expect(t, o, "kill %1 && wait %1", "[1]+  Terminated              sleep 1000\n[exit code: 143]")
	got := hs.run(t, o, "sleep 0.01 & wait; echo waited")
	if !regexp.MustCompile(`^\[1\] \d+\n\[1\]\+  Done                    sleep 0\.01\nwaited$`).MatchString(got) {
		t.Fatalf("a job that finishes within the call is reported in it: %q", got)
	}
	// A new shell after an exit starts in the workspace, with nothing kept.
	hs.run(t, o, "exit")
	hs.expect(t, o, `printf '%s|%s\n' "$PWD" "${KEEP-unset}"`, o.Workdir()+"|unset")
}

func TestHostileInputs(t *testing.T) {
	hs := newHarness(t, "{maxOutputChars: 1000000}", "")
	o := hs.owner(t, "hostile")
	bigIn := make([]string, 3000)
	for i := range bigIn {
		bigIn[i] = fmt.Sprintf("line %d with 'quotes' and $dollars and \\back\\slashes", i)
	}
	tests := []struct{ name, command, want string }{
		{"literal tab", "printf 'a\tb\\n'", "a\tb"},
		{"CRLF line endings", "echo one\r\necho two\r\n", "one\ntwo"},
		// bash gets one argument "x\recho"; a terminal shows the CR as a
		// return to the line start, and so does the tool.
		{"lone CR", "echo x\recho y", "echo y"},
		{"trailing comment", "echo hi # a comment", "hi"},
		{"comment only line after", "echo hi\n# done", "hi"},
		{"heredoc", "cat <<'EOF'\nalpha\nbeta\nEOF", "alpha\nbeta"},
		{"expanding heredoc", "X=7; cat <<EOF\nx=$X\nEOF", "x=7"},
		{"big heredoc", "cat <<'EOF'\n" + strings.Join(bigIn, "\n") + "\nEOF", strings.Join(bigIn, "\n")},
		{"unbalanced double quote", `echo "unterminated`, "bash: unexpected EOF while looking for matching `\"'\n[exit code: 2]"},
		{"unbalanced single quote", `echo 'unterminated`, "bash: unexpected EOF while looking for matching `''\n[exit code: 2]"},
		{"syntax error", "echo (", "bash: syntax error near unexpected token `newline'\n[exit code: 2]"},
		{"history expansion is off", "echo 'a!b' !x", "a!b !x"},
		{"control bytes", "printf '%s\\n' $'\\x03\\x1a'ok", "ok"},
		{"after all that", "echo fine", "fine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { hs.expect(t, o, tt.command, tt.want) })
	}
}

func TestShellStateOverrides(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "overrides")
	steps := []struct{ command, want string }{
		{"PS1='broken> '", ""},
		{"echo after-ps1", "after-ps1"},
		{"PROMPT_COMMAND='echo noise'", ""},
		{"echo after-prompt-command", "after-prompt-command"},
		{"PS2='cont> '", ""},
		{"echo after-ps2", "after-ps2"},
		{"stty echo", ""},
		{"echo after-stty", "after-stty"},
		{"exec >/dev/null; echo hidden", ""},
		{"echo after-exec", "after-exec"},
		{"exec 2>/dev/null; echo visible; echo hidden-err >&2", "visible"},
		{"echo err-again >&2", "err-again"},
		{"set -e", ""},
		{"false", "[exit code: 1]"},
		{"echo errexit-does-not-stick", "errexit-does-not-stick"},
		{"set -e; false; echo not-reached", "[shell exited: code 1]\n" + reset},
		{"echo fresh", "fresh"},
		{"set -u; echo $NOPE_UNSET", "bash: NOPE_UNSET: unbound variable\n[exit code: 1]"},
		// The trace shows the command's own commands, one level deep
		// (they run inside eval), and nothing of the plumbing.
		{"set +u; set -x; echo traced", "++ echo traced\ntraced"},
		{"echo still-traced", "++ echo still-traced\nstill-traced"},
		{"set +x 2>/dev/null; echo untraced", "++ set +x\nuntraced"},
		{"echo clean", "clean"},
	}
	for _, s := range steps {
		hs.expect(t, o, s.command, s.want)
	}
}

func TestExecReplacesShell(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "exec")
	hs.expect(t, o, "export KEEP=1; exec bash --noprofile --norc -i", "")
	hs.expect(t, o, "echo $KEEP", "1")
}

func TestBackgroundOutputBetweenCalls(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "background")
	f := fifo(t)
	hs.run(t, o, fmt.Sprintf("(cat %q >/dev/null; echo late-output) >/dev/tty 2>&1 &", f))
	// Release the job and let it print while no call runs; the next call
	// shows it under a header (and the job notice after its own output).
	if err := os.WriteFile(f, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := hs.run(t, o, "wait; echo now")
	if !strings.Contains(got, "now") || !strings.Contains(got, "late-output") {
		t.Fatalf("result %q lacks the background output", got)
	}
}

func TestInteractiveProgramsAreInterrupted(t *testing.T) {
	hs := newHarness(t, "", `{idleSilenceMs: 600000}`)
	o := hs.owner(t, "interactive")
	file := filepath.Join(o.Workdir(), "long.txt")
	var b strings.Builder
	for i := range 500 {
		fmt.Fprintf(&b, "row %d\n", i)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	notice := "[The command was waiting for interactive input, which this tool does not provide, so it was interrupted. Pass input non-interactively: arguments, a pipe, a here-document, or a --yes style flag.]"
	tests := []struct {
		name, command string
		contains      []string
	}{
		{"read builtin", "echo before; read x; echo never", []string{"before"}},
		{"read with prompt", "read -p 'Name: ' x", []string{"Name: "}},
		{"cat", "echo start; cat", []string{"start"}},
		{"python repl", "python3 -i -q", []string{">>> "}},
		{"pager", "less long.txt", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hs.run(t, o, tt.command)
			if !strings.HasSuffix(got, notice) {
				t.Fatalf("%q: result %q does not end with the notice", tt.command, got)
			}
			for _, c := range tt.contains {
				if !strings.Contains(got, c) {
					t.Fatalf("%q: result %q lacks %q", tt.command, got, c)
				}
			}
			if strings.Contains(got, "never") {
				t.Fatalf("the rest of the line ran: %q", got)
			}
			// The shell is back and the next command is not typed into the
			// program.
			hs.expect(t, o, "echo next", "next")
		})
	}
}

// A password prompt is a program asking for a secret: a caller that cannot
// ask the person (no MCP elicitation here) interrupts it and says so, and
// what the person can do.
func TestSecretPromptWithoutAskerIsInterrupted(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "agent")
	got := hs.run(t, o, `python3 -c 'import getpass; getpass.getpass("Password: ")'; echo NOT-RUN`)
	want := `[The command asked for a secret ("Password:"), which dsh never passes through the model, and this client cannot ask the user for it (MCP elicitation), so it was interrupted.`
	if !strings.Contains(got, "Password: ") || !strings.Contains(got, want) || strings.Contains(got, "NOT-RUN") {
		t.Fatalf("result %q, want the prompt and %q", got, want)
	}
	if out := hs.run(t, o, "echo alive"); out != "alive" {
		t.Fatalf("the shell after the interrupt: %q", out)
	}
}

func TestPipelineReadingAPipeIsNotInteractive(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "pipe")
	hs.expect(t, o, "sleep 0.3 | cat; echo done", "done")
	hs.expect(t, o, "printf 'a\\nb\\n' | while read l; do echo got-$l; done", "got-a\ngot-b")
}

func TestLongOutputKeepsHeadAndTail(t *testing.T) {
	hs := newHarness(t, "{maxOutputChars: 2000}", "")
	o := hs.owner(t, "long")
	got := withoutSavedLines(t, hs.run(t, o, "seq 1 100000"))
	if !strings.HasPrefix(got, "1\n2\n3\n") || !strings.HasSuffix(got, "\n99999\n100000") {
		t.Fatalf("head or tail missing: %q...%q", got[:40], got[len(got)-40:])
	}
	m := regexp.MustCompile(`\[\.\.\. (\d+) characters \((\d+) lines\) omitted; the full output \(100000 lines\) is in (\S+) \.\.\.\]`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("no notice in %q", got)
	}
	if n := len([]rune(got)) - len(m[0]); n > 2000+2 {
		t.Fatalf("shown %d characters besides the notice, limit 2000", n)
	}
	data, err := os.ReadFile(m[3])
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 1; i <= 100000; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if string(data) != want.String() {
		t.Fatalf("output file holds %d bytes, want %d", len(data), want.Len())
	}
	omitted, _ := strconv.Atoi(m[1])
	// got is head, the notice line, "\n", tail; the output is want without
	// its last newline.
	if omitted+len([]rune(got))-len(m[0])-1 != len([]rune(want.String()))-1 {
		t.Fatalf("omitted count %d does not add up", omitted)
	}
	if got := hs.run(t, o, "grep -c . "+m[3]); got != "100000" {
		t.Fatalf("the model cannot grep the file: %q", got)
	}
	dir := filepath.Dir(m[3])
	if err := o.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("output directory survived the owner: %v", err)
	}
}

func TestTimeoutReturnsPartialOutput(t *testing.T) {
	hs := newHarness(t, "{timeoutMs: 1500}", "")
	o := hs.owner(t, "timeout")
	got := hs.run(t, o, "echo partial; sleep 30")
	want := "Your command timed out after 1.5 seconds or experienced an OOM error. Below is partial output:\npartial\n" + reset
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	hs.expect(t, o, "echo after-timeout", "after-timeout")
}

// TestCancellationResetsTheShell: with cancelAction reset (the original's
// contract; the default keeps the shell, see TestCancelKeepsTheShell) a
// cancelled call closes the shell.
func TestCancellationResetsTheShell(t *testing.T) {
	hs := newHarness(t, "{cancelAction: reset}", "")
	o := hs.owner(t, "cancel")
	hs.expect(t, o, "export KEEP=1", "")
	f := fifo(t)
	ctx, cancel := context.WithCancel(t.Context())
	res := make(chan host.Result, 1)
	go func() { res <- hs.call(ctx, o, fmt.Sprintf("echo $$ > %q; sleep 1000", f)) }()
	pid, _ := strconv.Atoi(awaitFIFO(t, f))
	cancel()
	r := <-res
	if !r.IsError || !errors.Is(r.Err, context.Canceled) || !strings.HasPrefix(r.Text, "bash call cancelled") {
		t.Fatalf("cancelled call: %+v", r)
	}
	if alive(pid) {
		t.Fatalf("the shell %d survived the reset", pid)
	}
	// The next result says so first (issue 27, item 3).
	if got := hs.run(t, o, "echo ${KEEP-unset}"); !strings.HasPrefix(got, "[The previous command was cancelled after ") || !strings.HasSuffix(got, "]\nunset") {
		t.Fatalf("after the reset: %q", got)
	}
}

func TestOwnersAreIsolatedAndParallel(t *testing.T) {
	hs := newHarness(t, "", "")
	a, b := hs.owner(t, "a"), hs.owner(t, "b")
	hs.expect(t, a, "export WHO=a", "")
	hs.expect(t, b, "export WHO=b", "")
	// a waits for something only b's call does: if owners were serialized,
	// a would never finish.
	f := fifo(t)
	var wg sync.WaitGroup
	var ra string
	wg.Go(func() { ra = hs.run(t, a, fmt.Sprintf("read line < %q; echo $WHO got $line", f)) })
	hs.expect(t, b, fmt.Sprintf("echo from-b > %q; echo $WHO", f), "b")
	wg.Wait()
	if ra != "a got from-b" {
		t.Fatalf("owner a: %q", ra)
	}
}

func TestSameOwnerCallsAreSerialized(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "serial")
	log := filepath.Join(o.Workdir(), "log")
	const n = 12
	var wg sync.WaitGroup
	results := make([]string, n)
	for i := range n {
		wg.Go(func() {
			results[i] = hs.run(t, o, fmt.Sprintf("echo start-%d >> %q; sleep 0.01; echo end-%d >> %q; echo done-%d", i, log, i, log, i))
		})
	}
	wg.Wait()
	for i, r := range results {
		if r != fmt.Sprintf("done-%d", i) {
			t.Fatalf("call %d got %q", i, r)
		}
	}
	data, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i := 0; i < len(lines); i += 2 {
		if strings.TrimPrefix(lines[i], "start-") != strings.TrimPrefix(lines[i+1], "end-") {
			t.Fatalf("calls interleaved: %q", lines)
		}
	}
}

func TestManyFastCallsNoCrossTalk(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "fast")
	for i := range 200 {
		hs.expect(t, o, fmt.Sprintf("echo call-%d", i), fmt.Sprintf("call-%d", i))
	}
}

func TestShellDeadBetweenCalls(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "dead")
	out := hs.run(t, o, "(sleep 0.05; kill -9 $$) >/dev/null 2>&1 & echo $$")
	pid, err := strconv.Atoi(out[strings.LastIndexByte(out, '\n')+1:])
	if err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	awaitExit(t, pid)
	hs.expect(t, o, "echo here", "[The shell had exited before this command: [shell killed by signal: SIGKILL]. The command ran in a new shell.]\nhere")
	hs.expect(t, o, "echo again", "again")
}

func TestUnloadWhileACallRuns(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "unload")
	f := fifo(t)
	res := make(chan host.Result, 1)
	go func() { res <- hs.call(context.Background(), o, fmt.Sprintf("echo $$ > %q; sleep 1000", f)) }()
	pid, _ := strconv.Atoi(awaitFIFO(t, f))
	if err := hs.h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if !r.IsError || r.Text != "the agent's session closed" {
		t.Fatalf("call survived the unload: %+v", r)
	}
	if alive(pid) {
		t.Fatalf("shell %d survived", pid)
	}
}

func TestInstructions(t *testing.T) {
	for _, tt := range []struct{ config, want string }{
		{"", bashtool.DefaultInstructions},
		{`{instructions: "Use the shell."}`, "Use the shell."},
		{`{instructions: ""}`, ""},
		{`{timeoutAction: interrupt}`, strings.Replace(bashtool.DefaultInstructions, "returns what it printed, and the shell is reset.", "returns what it printed; the command is interrupted and the shell is kept.", 1)},
		{`{timeoutAction: background}`, strings.Replace(bashtool.DefaultInstructions, "returns what it printed, and the shell is reset.", "returns what it printed; the command goes on as a background job of the same shell, which you can wait for or kill.", 1)},
		{`{timeoutAction: background, instructions: "Mine."}`, "Mine."},
	} {
		hs := newHarness(t, tt.config, "")
		if got := hs.h.Tools().List()[0].Instructions; got != tt.want {
			t.Errorf("config %q: instructions %q, want %q", tt.config, got, tt.want)
		}
	}
}

// TestShellThatCannotStart: the model sees why, each context once.
func TestShellThatCannotStart(t *testing.T) {
	hs := newHarness(t, "", `{shellPath: /nonexistent/bash}`)
	o := hs.owner(t, "nostart")
	res := hs.call(t.Context(), o, "true")
	// The same whether the backend runs in process or as a plugin.
	want := regexp.MustCompile(`^bash: start PTY session pty-[a-z2-7]{16} \(shell\): terminal-bash: cannot start /nonexistent/bash: no such file or directory$`)
	if !res.IsError || !want.MatchString(res.Text) {
		t.Fatalf("got %q (error %v), want %s", res.Text, res.IsError, want)
	}
}

// TestCommandTexts: what the model writes reaches bash exactly, whether
// it rides on the typed line (short printable ASCII) or goes through the
// input channel (anything else), and the two agree.
func TestCommandTexts(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "texts")
	xs := func(n int) string { return strings.Repeat("x", n) }
	const maxInlineBytes = 2048 // terminal-bash types a command this long on its line
	tests := []struct{ command, want string }{
		{`echo 'a  b'`, "a  b"},
		{`echo "it's"`, "it's"},
		{`printf '%s|\n' 'x'\''y' "q\"r"`, "x'y|\nq\"r|"},
		{`echo \$HOME '$HOME'`, "$HOME $HOME"},
		{`echo $'one\x27two'`, "one'two"},
		{`echo !x !! '!'`, "!x !! !"},
		{"echo `echo back` $(echo '$(not)')", "back $(not)"},
		{`  echo   spaced   `, "spaced"},
		{`echo a # a comment with a quote '`, "a"},
		{`echo trailing\`, `trailing\`},
		{`echo semi;`, "semi"},
		{`echo '\__dsh_e 0123456789abcdef;} 2>/dev/null'`, `\__dsh_e 0123456789abcdef;} 2>/dev/null`},
		{"echo " + xs(maxInlineBytes-5), xs(maxInlineBytes - 5)}, // the longest on the line
		{"echo " + xs(maxInlineBytes-4), xs(maxInlineBytes - 4)}, // the shortest through the channel
		{"echo 'tab\there'", "tab\there"},                        // a tab: the channel
		{"echo 中文 'ü'", "中文 ü"},                                  // not ASCII: the channel
		{"echo first\necho second", "first\nsecond"},             // a newline: the channel
		{"cat <<'EOF'\n'quoted' $x\nEOF", "'quoted' $x"},         // a heredoc
	}
	for _, tt := range tests {
		hs.expect(t, o, tt.command, tt.want)
	}
}
