package terminaltool_test

import (
	"testing"
)

func TestSmokeScreens(t *testing.T) {
	r := newRig(t, rigOptions{})
	id, out := r.open(map[string]any{"command": "vim --clean notes.txt"})
	t.Logf("vim open (%d chars):\n%s", len(out), out)
	r.send(id, "ihello from the agent", "Escape")
	t.Logf("read1:\n%s", r.read(id))
	r.send(id, ":wq", "Enter")
	t.Logf("read2:\n%s", r.read(id))
	id, out = r.open(map[string]any{"command": "htop"})
	t.Logf("htop open (%d chars):\n%s", len(out), out)
	t.Logf("htop read:\n%s", r.read(id))
	r.send(id, "q")
	t.Logf("htop quit:\n%s", r.read(id))
	id, out = r.open(map[string]any{"command": "top"})
	t.Logf("top open (%d chars):\n%s", len(out), out)
	r.send(id, "q")
	t.Logf("top quit:\n%s", r.read(id))
	id, out = r.open(map[string]any{"command": "seq 1 500 > long.txt; less long.txt"})
	t.Logf("less open (%d chars):\n%s", len(out), out)
	r.send(id, " ")
	t.Logf("less page:\n%s", r.read(id))
	r.send(id, "q")
	t.Logf("less quit:\n%s", r.read(id))
}
