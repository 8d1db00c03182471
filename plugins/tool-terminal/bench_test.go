package terminaltool_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolBudget is what the six tool definitions may cost together, in
// characters of their JSON as tools/list gives them: every request of the
// agent carries them.
const toolBudget = 1500

func TestToolDefinitionsFitTheBudget(t *testing.T) {
	r := newRig(t, rigOptions{})
	res, err := r.cs.ListTools(t.Context(), &mcp.ListToolsParams{})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, tool := range res.Tools {
		if !strings.HasPrefix(tool.Name, "terminal_") {
			continue
		}
		data, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		total += utf8.RuneCount(data)
	}
	t.Logf("the six tool definitions: %d characters", total)
	if total > toolBudget {
		t.Fatalf("the six tool definitions take %d characters, over the budget of %d", total, toolBudget)
	}
}

// BenchmarkScreenRead measures the text of one read of a full-screen
// program at 80x24 (chars/read), the screen shown whole.
func BenchmarkScreenRead(b *testing.B) {
	for _, prog := range []struct{ name, command, waitFor string }{
		{"vim", "vim --clean notes.txt", `~`},
		{"htop", "htop", `Tasks: \d+`},
	} {
		b.Run(prog.name, func(b *testing.B) {
			need(b, strings.Fields(prog.command)[0])
			r := newRig(b, rigOptions{})
			id, first := r.open(map[string]any{"command": prog.command})
			if ready := regexp.MustCompile(prog.waitFor); !ready.MatchString(first) {
				r.readUntil(id, prog.waitFor, ready)
			}
			var chars, bytes int
			for b.Loop() {
				// Resizing makes every row count as changed: each read shows
				// the whole screen.
				r.ok("terminal_send", map[string]any{"id": id, "rows": 24, "cols": 79})
				r.ok("terminal_send", map[string]any{"id": id, "rows": 24, "cols": 80})
				out := r.read(id, "waitFor", prog.waitFor)
				chars, bytes = utf8.RuneCountInString(out), len(out)
			}
			b.ReportMetric(float64(chars), "chars/read")
			b.ReportMetric(float64(bytes), "bytes/read")
			b.ReportMetric(0, "ns/op")
		})
	}
}

var stamp = regexp.MustCompile(`(?m)^@(\d+)\.(\d{6})$`)

// BenchmarkWaitToRead measures the time from a program starting to wait
// for input to terminal_read returning, over the MCP front: the program
// prints the time right before it reads (bash's read, proven from /proc),
// and the read returns the line.
func BenchmarkWaitToRead(b *testing.B) {
	r := newRig(b, rigOptions{})
	id, _ := r.open(map[string]any{"command": `while :; do printf '@%s\n' "$EPOCHREALTIME"; read -r x || break; done`})
	var lat []time.Duration
	for b.Loop() {
		r.send(id, "x", "Enter")
		out := r.read(id)
		got := time.Now()
		m := stamp.FindAllStringSubmatch(out, -1)
		if len(m) == 0 {
			b.Fatalf("no stamp in %q", out)
		}
		last := m[len(m)-1]
		sec, _ := strconv.ParseInt(last[1], 10, 64)
		usec, _ := strconv.ParseInt(last[2], 10, 64)
		lat = append(lat, got.Sub(time.Unix(sec, usec*1000)))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "ms-p90")
}
