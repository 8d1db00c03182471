package terminaltool_test

import (
	"testing"
)

func TestSmokePython(t *testing.T) {
	r := newRig(t, rigOptions{})
	id, out := r.open(map[string]any{"command": "python3 -i -q"})
	t.Logf("open:\n%s", out)
	r.send(id, "def f(x):", "Enter")
	t.Logf("read1:\n%s", r.read(id))
	r.send(id, "    return x*7", "Enter", "Enter")
	t.Logf("read2:\n%s", r.read(id))
	r.send(id, "f(6)", "Enter")
	t.Logf("read3:\n%s", r.read(id))
	t.Logf("list:\n%s", r.ok("terminal_list", map[string]any{}))
	r.send(id, "", "C-d")
	t.Logf("read4:\n%s", r.read(id))
	t.Logf("list:\n%s", r.ok("terminal_list", map[string]any{}))
}
