package terminalssh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// State set by one command is there for the next: the shell persists.
func TestPersistence(t *testing.T) {
	s := spawn(t, newBackend(t, nil), "")
	dir := t.TempDir()
	mustComplete(t, s, "cd "+inband.Quote(dir), 0)
	mustComplete(t, s, "export DSH_T_VAR=kept; greet() { echo \"hello $1\"; }; alias dsh_t_alias='echo via-alias'", 0)
	out := mustComplete(t, s, "pwd; echo \"$DSH_T_VAR\"; greet you; bash -c 'echo child:$DSH_T_VAR'", 0)
	if want := dir + "\nkept\nhello you\nchild:kept\n"; out != want {
		t.Fatalf("output = %q, want %q", out, want)
	}
	// An alias defined by one command applies to the next one's text.
	if out := mustComplete(t, s, "dsh_t_alias", 0); out != "via-alias\n" {
		t.Fatalf("alias output = %q", out)
	}
}

// A spawn's working directory overrides the configured one, which
// overrides the remote home.
func TestWorkdir(t *testing.T) {
	configured, requested := t.TempDir(), t.TempDir()
	cfg := testConfig()
	cfg.Workdir = configured
	b := newBackend(t, cfg)
	if out := mustComplete(t, spawn(t, b, ""), "pwd", 0); out != configured+"\n" {
		t.Errorf("pwd with the configured workdir = %q, want %q", out, configured)
	}
	if out := mustComplete(t, spawn(t, b, requested), "pwd", 0); out != requested+"\n" {
		t.Errorf("pwd with a requested workdir = %q, want %q", out, requested)
	}

	missing := requested + "/missing"
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	_, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-x", Cwd: missing})
	if !errors.Is(err, ErrRemoteShell) || !strings.Contains(err.Error(), "working directory") {
		t.Fatalf("spawn in a missing directory = %v, want %v naming the working directory", err, ErrRemoteShell)
	}
}

// Without spawnCwd, the directory a spawn names (the agent's workspace on
// this machine, as the bash tool sends it) does not matter: the shell
// starts in the configured workdir, even when the spawn's does not exist.
func TestSpawnCwdOff(t *testing.T) {
	configured := t.TempDir()
	cfg := testConfig()
	cfg.Workdir, cfg.SpawnCwd = configured, false
	b := newBackend(t, cfg)
	if out := mustComplete(t, spawn(t, b, "/no/such/local/workspace"), "pwd", 0); out != configured+"\n" {
		t.Errorf("pwd = %q, want the configured %q", out, configured)
	}
}

// The exit status comes from the shell, and the shell survives failures.
func TestExitCodes(t *testing.T) {
	s := spawn(t, newBackend(t, nil), "")
	for _, tc := range []struct {
		command string
		code    int
	}{
		{"true", 0},
		{"(exit 3)", 3},
		{"no-such-command-dsh-test", 127},
		{"false", 1},
		{"ls /no/such/dir", 2},
		{"(exit 255)", 255},
	} {
		t.Run(tc.command, func(t *testing.T) { mustComplete(t, s, tc.command, tc.code) })
	}
}

// A command is one unit: several lines, here-documents, and a syntax error
// that is the command's failure, never a shell waiting for more lines.
func TestCommandUnit(t *testing.T) {
	s := spawn(t, newBackend(t, nil), "")
	for _, tc := range []struct {
		name, command, out string
		code               int
	}{
		{"lines", "echo one\necho two\n\necho three", "one\ntwo\nthree\n", 0},
		{"heredoc", "cat <<'EOF'\nliteral $HOME `x`\n  indented\nEOF\necho after", "literal $HOME `x`\n  indented\nafter\n", 0},
		{"expanding heredoc", "v=42\ncat <<EOF\nv is $v\nEOF", "v is 42\n", 0},
		{"continued line", "echo a \\\n  b", "a b\n", 0},
		{"function over lines", "f() {\n  echo in-f\n  return 4\n}\nf", "in-f\n", 4},
		{"unfinished if", "if true; then echo x", "", 2},
		{"unmatched quote", "echo 'oops", "", 2},
		{"status of the last line", "false\ntrue", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := mustComplete(t, s, tc.command, tc.code)
			if tc.code == 2 && tc.out == "" {
				if !strings.Contains(out, "syntax error") && !strings.Contains(out, "unexpected EOF") {
					t.Fatalf("output = %q, want bash's syntax error", out)
				}
			} else if out != tc.out {
				t.Fatalf("output = %q, want %q", out, tc.out)
			}
		})
	}
	mustComplete(t, s, "echo still-here", 0)
}

// Every byte of a command reaches the shell as typed: quotes, backslashes,
// '!', control characters, UTF-8, and a command longer than a terminal
// line holds.
func TestCommandBytes(t *testing.T) {
	s := spawn(t, newBackend(t, nil), "")
	long := strings.Repeat("0123456789", 2500) // 25000 bytes on one line
	for _, tc := range []struct{ name, arg string }{
		{"quotes", `it's "quoted" \back\slash`},
		{"history", "!! !$ !-1"},
		{"controls", "tab\there, bell\a, escape\x1b[31m, ^C\x03 ^D\x04 ^U\x15 ^Z\x1a DEL\x7f"},
		{"utf-8", "héllo wörld ✓ 日本語"},
		{"long", long},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Compare checksums: the terminal would render the controls.
			command := "printf '%s' " + inband.Quote(tc.arg) + " | od -An -tx1 | tr -d ' \\n'; echo"
			out := mustComplete(t, s, command, 0)
			if want := fmt.Sprintf("%x\n", tc.arg); out != want {
				t.Fatalf("the shell got other bytes:\n got %.200s\nwant %.200s", out, want)
			}
		})
	}
}

// Nothing of this host's environment reaches the remote shell, even with a
// server that accepts every variable and agent forwarding.
func TestEnvironmentNotForwarded(t *testing.T) {
	t.Setenv("DSH_TEST_SECRET_TOKEN", "leaked-secret-value")
	t.Setenv("LC_DSH_TEST", "leaked-locale-value")
	s := spawn(t, newBackend(t, nil), "")
	out := mustComplete(t, s, "env; echo \"agent:[${SSH_AUTH_SOCK-}] display:[${DISPLAY-}]\"", 0)
	if strings.Contains(out, "leaked-") {
		t.Fatalf("the remote environment holds the host's variables:\n%s", out)
	}
	if !strings.Contains(out, "agent:[] display:[]") {
		t.Fatalf("agent or X11 forwarding reached the remote shell:\n%s", out)
	}
	if !strings.Contains(out, "TERM=dumb") {
		t.Fatalf("TERM is not dumb:\n%s", out)
	}
}

// An interrupt reaches the foreground job through the remote terminal.
// SIGINT abandons the command line, with the shell's status for it; a job
// stopped by SIGTSTP ends its part of the line, and the line goes on.
func TestInterrupt(t *testing.T) {
	s := spawn(t, newBackend(t, nil), "")
	const job = "sh -c 'echo ready; exec sleep 1000'"
	for _, tc := range []struct {
		name, command string
		signal        func(send termapi.Send) error
		state         termapi.ExecState
		code          int
	}{
		{"Cancel", job + "; echo not-reached", func(send termapi.Send) error {
			if !send.Cancel() {
				return errors.New("cancel of a live send = false")
			}
			return nil
		}, termapi.ExecAbandoned, 130},
		{"SIGINT", job + "; echo not-reached", func(termapi.Send) error {
			_, err := s.Signal(context.Background(), termapi.SIGINT)
			return err
		}, termapi.ExecAbandoned, 130},
		{"SIGTSTP", job, func(termapi.Send) error {
			_, err := s.Signal(context.Background(), termapi.SIGTSTP)
			return err
		}, termapi.ExecCompleted, 148},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			send, err := s.Exec(ctx, termapi.ExecRequest{Command: tc.command, Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			// The job has the terminal once it prints.
			if line, err := send.Output(ctx); err != nil || line != "ready\n" {
				t.Fatalf("first output = %q, %v", line, err)
			}
			if err := tc.signal(send); err != nil {
				t.Fatal(err)
			}
			out, res := drain(t, ctx, send)
			if !res.Prompt || res.Exec.State != tc.state || res.Exec.ExitCode != tc.code {
				t.Fatalf("after %s: %s (prompt %v) with %+v, want %s with %d", tc.name, res.Reason, res.Prompt, *res.Exec, tc.state, tc.code)
			}
			if strings.Contains(out, "not-reached") {
				t.Fatalf("the rest of the line ran:\n%s", out)
			}
			mustComplete(t, s, "kill %% 2>/dev/null; true", 0)
		})
	}
	// While the shell is idle there is nothing to interrupt.
	if _, err := s.Signal(context.Background(), termapi.SIGINT); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, s, "echo after-interrupts", 0)
}

// An interrupt right after Exec, before the shell may have read the line,
// either reaches the command or discards the line; either way the shell
// comes back and the command is reported over.
func TestInterruptAtOnce(t *testing.T) {
	s := spawn(t, newBackend(t, nil), "")
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		send, err := s.Exec(ctx, termapi.ExecRequest{Command: "sleep 1000", Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		send.Cancel()
		_, res := drain(t, ctx, send)
		cancel()
		if !res.Prompt || res.Exec.State != termapi.ExecAbandoned {
			t.Fatalf("an interrupted command settled %s (prompt %v) with %+v", res.Reason, res.Prompt, *res.Exec)
		}
		mustComplete(t, s, "echo next", 0)
	}
}

// Job notices at a command's end come with its result, not its output.
func TestNotices(t *testing.T) {
	s := spawn(t, newBackend(t, nil), "")
	out := mustComplete(t, s, "sleep 0.1 &", 0)
	if !strings.HasPrefix(out, "[1] ") {
		t.Fatalf("the job's announcement = %q", out)
	}
	// Builtins only: bash reports the finished job at the next prompt.
	_, res := run(t, s, "read -t 1 -r _ </dev/tty; echo waited")
	if !strings.Contains(res.Exec.Notices, "Done") || !strings.Contains(res.Exec.Notices, "sleep 0.1") {
		t.Fatalf("notices = %q, want the job's Done notice", res.Exec.Notices)
	}
}

// The exit of the shell is the session's: its status, or the signal that
// killed it.
func TestShellExit(t *testing.T) {
	b := newBackend(t, nil)
	for _, tc := range []struct {
		command string
		want    termapi.Status
	}{
		{"exit 5", termapi.Status{Exited: true, ExitCode: 5}},
		{"exit", termapi.Status{Exited: true, ExitCode: 0}},
		{"kill -9 $$", termapi.Status{Exited: true, ExitCode: -1, Signal: "SIGKILL"}},
		{"set -e; false", termapi.Status{Exited: true, ExitCode: 1}},
	} {
		t.Run(tc.command, func(t *testing.T) {
			s := spawn(t, b, "")
			_, res := run(t, s, tc.command)
			if res.Reason != termapi.WaitSessionExit || res.Status != tc.want || s.Status() != tc.want {
				t.Fatalf("settled %s with %v (session %v), want session_exit with %v", res.Reason, res.Status, s.Status(), tc.want)
			}
			if res.Exec.State != termapi.ExecRunning {
				t.Fatalf("exec state = %s, want running (the shell took the command)", res.Exec.State)
			}
			if _, err := s.Exec(context.Background(), termapi.ExecRequest{Command: "true"}); !errors.Is(err, termapi.ErrSessionExited) {
				t.Fatalf("exec after the exit = %v, want %v", err, termapi.ErrSessionExited)
			}
		})
	}
}

// A streaming caller gets every byte; one that does not stream gets the
// newest bytes and Truncated.
func TestOutputVolume(t *testing.T) {
	s := spawn(t, newBackend(t, nil), "")
	const lines = 30000 // 3 MB: far more than any buffer on the way holds
	command := fmt.Sprintf("seq -f 'line %%05g %s' 1 %d", strings.Repeat("x", 88), lines)
	out := mustComplete(t, s, command, 0)
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != lines {
		t.Fatalf("streamed %d lines, want %d", len(got), lines)
	}
	for i, line := range got {
		if want := fmt.Sprintf("line %05d %s", i+1, strings.Repeat("x", 88)); line != want {
			t.Fatalf("line %d = %q, want %q", i+1, line, want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: command})
	if err != nil {
		t.Fatal(err)
	}
	res, err := send.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Exec.State != termapi.ExecCompleted || !res.Truncated || len(res.Viewport) > inband.MaxReadBytes {
		t.Fatalf("non-streaming: %+v, truncated %v, viewport %d bytes", *res.Exec, res.Truncated, len(res.Viewport))
	}
	if last := fmt.Sprintf("line %05d", lines); !strings.Contains(res.Viewport, last) {
		t.Fatalf("the viewport lacks the newest line %q", last)
	}
}

// Output is rendered as a terminal shows it, and a command's unfinished
// last line does not run into the next command's output.
func TestRendering(t *testing.T) {
	s := spawn(t, newBackend(t, nil), "")
	if out := mustComplete(t, s, `printf '10%%\r20%%\r30%%\n\e[31mred\e[0m\n'`, 0); out != "30%\nred\n" {
		t.Fatalf("rendered = %q", out)
	}
	if out := mustComplete(t, s, "printf no-newline", 0); out != "no-newline" {
		t.Fatalf("unfinished line = %q", out)
	}
	if out := mustComplete(t, s, "echo next", 0); out != "next\n" {
		t.Fatalf("the next command's output = %q", out)
	}
}

// A PROMPT_COMMAND the model sets (as activation hooks do) keeps running
// after every command, quietly, and the prompt stays dsh's.
func TestPromptCommand(t *testing.T) {
	s := spawn(t, newBackend(t, nil), "")
	mustComplete(t, s, "dsh_pc=0; PROMPT_COMMAND='dsh_pc=$((dsh_pc+1)); echo noisy'; PS1='custom> '", 0)
	for range 3 {
		if out := mustComplete(t, s, "echo quiet", 0); out != "quiet\n" {
			t.Fatalf("output = %q", out)
		}
	}
	if out := mustComplete(t, s, "echo $dsh_pc", 0); out == "0\n" || out == "" {
		t.Fatalf("the model's PROMPT_COMMAND did not run: %q", out)
	}
}
