package terminaltool_test

import (
	"regexp"
	"strings"
	"testing"
)

var handedOverTo = regexp.MustCompile(`handed over as terminal (pty-\w+)`)

// With onInput: handoff, a bash command waiting for input becomes a
// terminal: the model finishes it there, and bash goes on in the same
// shell, its state kept.
func TestBashHandsOverAWaitingCommand(t *testing.T) {
	r := newRig(t, rigOptions{bashConfig: "{onInput: handoff}"})
	out := r.ok("bash", map[string]any{"command": "cd /tmp && x=kept && read -p 'Name: ' name && echo \"hello $name\""})
	m := handedOverTo.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "Name: ") {
		t.Fatalf("bash result:\n%s", out)
	}
	id := m[1]
	if text, isErr := r.call("bash", map[string]any{"command": "echo busy"}); !isErr || !strings.Contains(text, "terminal "+id) {
		t.Fatalf("bash while the command is handed over = %q (error %v), want an error naming the terminal", text, isErr)
	}
	r.send(id, "Ann", "Enter")
	if out := r.read(id); !strings.Contains(out, "hello Ann") || !strings.HasSuffix(out, "[exited with code 0]") {
		t.Fatalf("terminal_read:\n%s", out)
	}
	if out := r.ok("bash", map[string]any{"command": "echo $x $name $PWD"}); out != "kept Ann /tmp" {
		t.Fatalf("bash after the terminal = %q, want the shell's state kept", out)
	}
}

// A handed-over command that ended without a read since gives the shell
// back to the next bash call all the same.
func TestHandedOverCommandEndsUnread(t *testing.T) {
	r := newRig(t, rigOptions{bashConfig: "{onInput: handoff}"})
	out := r.ok("bash", map[string]any{"command": "read -p 'Name: ' name"})
	m := handedOverTo.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("bash result:\n%s", out)
	}
	r.send(m[1], "Bo", "Enter")
	if out := r.ok("bash", map[string]any{"command": "echo $name"}); out != "Bo" {
		t.Fatalf("bash after the unread end = %q, want Bo", out)
	}
}

// terminal_close on a handed-over command ends the command, not the shell.
func TestClosingAHandedOverCommandKeepsTheShell(t *testing.T) {
	r := newRig(t, rigOptions{bashConfig: "{onInput: handoff}"})
	out := r.ok("bash", map[string]any{"command": "x=kept; cat"})
	m := handedOverTo.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("bash result:\n%s", out)
	}
	r.ok("terminal_close", map[string]any{"id": m[1]})
	if out := r.ok("bash", map[string]any{"command": "echo $x"}); out != "kept" {
		t.Fatalf("bash after terminal_close = %q, want the shell kept", out)
	}
}

// Without the terminal tools the bash tool interrupts as before.
func TestHandoffWithoutTerminalTools(t *testing.T) {
	r := newRig(t, rigOptions{bashConfig: "{onInput: handoff}", terminalConfig: "{}", noTerminalTools: true})
	out := r.ok("bash", map[string]any{"command": "read x"})
	if !strings.Contains(out, "waiting for interactive input") {
		t.Fatalf("bash result:\n%s", out)
	}
}
