package terminaltool_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An agent sees only its own terminals: another agent's id is unknown.
func TestTerminalsAreFencedByOwner(t *testing.T) {
	r := newRig(t, rigOptions{})
	id, _ := r.open(map[string]any{"command": "cat"})
	other := r.connect(t)
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"terminal_read", map[string]any{"id": id}},
		{"terminal_send", map[string]any{"id": id, "text": "x"}},
		{"terminal_signal", map[string]any{"id": id, "signal": "KILL"}},
		{"terminal_close", map[string]any{"id": id}},
	} {
		res, err := other.CallTool(context.Background(), &mcp.CallToolParams{Name: call.tool, Arguments: call.args})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || !strings.Contains(text, "no such terminal") {
			t.Fatalf("%s of another agent's terminal = %q (error %v), want no such terminal", call.tool, text, res.IsError)
		}
	}
	res, err := other.CallTool(context.Background(), &mcp.CallToolParams{Name: "terminal_list", Arguments: map[string]any{}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "[no terminals]" {
		t.Fatalf("the other agent's list: %v, %v", res, err)
	}
	// The owner's terminal is untouched.
	r.send(id, "still mine", "Enter")
	if out := r.read(id); !strings.Contains(out, "still mine") {
		t.Fatalf("read after the other agent tried: %q", out)
	}
}

func TestTerminalLimits(t *testing.T) {
	r := newRig(t, rigOptions{terminalConfig: "{maxPerOwner: 2}"})
	a, _ := r.open(map[string]any{"command": "cat"})
	// A terminal whose program ended does not count.
	if _, out := r.open(map[string]any{"command": "true"}); !exitedOK.MatchString(out) {
		t.Fatalf("true: %q", out)
	}
	r.open(map[string]any{"command": "cat"})
	text, isErr := r.call("terminal_open", map[string]any{"command": "cat"})
	if !isErr || !strings.Contains(text, "you have 2 terminals open") || !strings.Contains(text, "maxPerOwner") {
		t.Fatalf("a third terminal: %q (error %v)", text, isErr)
	}
	r.ok("terminal_close", map[string]any{"id": a})
	r.open(map[string]any{"command": "cat"})
}

func TestSignals(t *testing.T) {
	r := newRig(t, rigOptions{})
	id, _ := r.open(map[string]any{"command": "cat"})
	r.ok("terminal_signal", map[string]any{"id": id, "signal": "TSTP"})
	if out := r.read(id); !strings.Contains(out, "[stopped (SIGTSTP)") {
		t.Fatalf("after TSTP: %q", out)
	}
	if out := r.ok("terminal_list", map[string]any{}); !strings.Contains(out, id+"  stopped") {
		t.Fatalf("list after TSTP: %q", out)
	}
	r.ok("terminal_signal", map[string]any{"id": id, "signal": "CONT"})
	r.send(id, "back again", "Enter")
	if out := r.read(id); !strings.Contains(out, "back again") || !strings.HasSuffix(out, "[waiting for input]") {
		t.Fatalf("after CONT: %q", out)
	}
	r.ok("terminal_signal", map[string]any{"id": id, "signal": "INT"})
	if out := r.read(id); !strings.Contains(out, "[ended") {
		t.Fatalf("after INT: %q", out)
	}
	if text, isErr := r.call("terminal_signal", map[string]any{"id": id, "signal": "USR1"}); !isErr || !strings.Contains(text, "signal") {
		t.Fatalf("an unknown signal: %q (error %v)", text, isErr)
	}
}

func TestBadArguments(t *testing.T) {
	r := newRig(t, rigOptions{})
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"terminal_open", map[string]any{"command": " "}, "non-empty"},
		{"terminal_open", map[string]any{"command": "cat", "rows": 5000}, "between 1 and 1000"},
		{"terminal_read", map[string]any{"id": "pty-nope"}, "no such terminal"},
		{"terminal_send", map[string]any{"id": "pty-nope", "text": "x"}, "no such terminal"},
	} {
		text, isErr := r.call(c.tool, c.args)
		if !isErr || !strings.Contains(text, c.want) {
			t.Fatalf("%s %v = %q (error %v), want an error saying %q", c.tool, c.args, text, isErr, c.want)
		}
	}
	id, _ := r.open(map[string]any{"command": "cat"})
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"terminal_send", map[string]any{"id": id, "keys": []string{"Hyper"}}, `unknown key "Hyper"`},
		{"terminal_send", map[string]any{"id": id}, "give text, keys"},
		{"terminal_read", map[string]any{"id": id, "waitFor": "("}, "waitFor"},
	} {
		text, isErr := r.call(c.tool, c.args)
		if !isErr || !strings.Contains(text, c.want) {
			t.Fatalf("%s %v = %q (error %v), want an error saying %q", c.tool, c.args, text, isErr, c.want)
		}
	}
}
