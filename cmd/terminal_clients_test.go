//go:build linux

package dshcmd

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedSteps is an Anthropic Messages API on loopback that plays a
// model working through a script of tool calls: each response calls the
// next step's tool with arguments made from the results so far, and once
// the script is done it answers with the last result as its text.
type scriptedSteps struct {
	steps []func(results []string) (tool string, input map[string]any)
	mu    sync.Mutex
	seen  []string // the tool results of the longest conversation
}

func (m *scriptedSteps) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := readMessagesRequest(w, r)
	if !ok {
		return
	}
	offered := req.offers("mcp__dsh__terminal_open")
	var results []string
	for _, msg := range req.Messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(msg.Content, &blocks) // a string content has no blocks
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			var parts []struct {
				Text string `json:"text"`
			}
			var text string
			if json.Unmarshal(b.Content, &parts) == nil && len(parts) > 0 {
				text = parts[0].Text
			} else {
				json.Unmarshal(b.Content, &text)
			}
			results = append(results, text)
		}
	}
	m.mu.Lock()
	if len(results) >= len(m.seen) {
		m.seen = results
	}
	m.mu.Unlock()
	var events [][2]string
	switch step := len(results); {
	case !offered && step == 0:
		events = textEvents("ok")
	case step < len(m.steps):
		tool, args := m.steps[step](results)
		events = toolUseEvents(step, "mcp__dsh__"+tool, args)
	default:
		events = textEvents("the tool said: " + results[len(results)-1])
	}
	writeMessage(w, req.Model, events)
}

var terminalID = regexp.MustCompile(`(?m)^id: (pty-\w+)$`)

// TestClaudeCodeEditsWithVim: Claude Code, driven by a scripted model,
// edits a file with vim through dsh's terminal tools (the interactive
// deployment, over stdio): open vim, type a line, save and quit.
func TestClaudeCodeEditsWithVim(t *testing.T) {
	t.Parallel()
	claude := clientPath(t, "DSH_TEST_CLAUDE", "Claude Code")
	if _, err := exec.LookPath("vim"); err != nil {
		t.Skip("vim is not installed")
	}
	id := func(results []string) string {
		if m := terminalID.FindStringSubmatch(results[0]); m != nil {
			return m[1]
		}
		return "no-id-in-" + results[0]
	}
	model := &scriptedSteps{steps: []func([]string) (string, map[string]any){
		func([]string) (string, map[string]any) {
			return "terminal_open", map[string]any{"command": "vim --clean note.txt"}
		},
		func(r []string) (string, map[string]any) {
			return "terminal_send", map[string]any{"id": id(r), "text": "ihello from claude", "keys": []string{"Escape"}}
		},
		func(r []string) (string, map[string]any) {
			return "terminal_send", map[string]any{"id": id(r), "text": ":wq", "keys": []string{"Enter"}}
		},
		func(r []string) (string, map[string]any) {
			return "terminal_read", map[string]any{"id": id(r)}
		},
	}}
	api := httptest.NewServer(model)
	defer api.Close()

	deployment, err := filepath.Abs("../deployments/interactive.yaml")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	env := append(claudeEnv(claude, t.TempDir(), api.URL), "XDG_RUNTIME_DIR="+t.TempDir())
	add := exec.Command(claude, "mcp", "add", "dsh", "--", dshBinary(t), "serve", "--deployment", deployment)
	add.Env, add.Dir = env, work
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("claude mcp add: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, claude, "-p", "Write hello from claude into note.txt with vim.",
		"--allowedTools", "mcp__dsh__terminal_open,mcp__dsh__terminal_send,mcp__dsh__terminal_read", "--output-format", "text")
	run.Env, run.Dir = env, work
	out, err := run.CombinedOutput()
	model.mu.Lock()
	seen := model.seen
	model.mu.Unlock()
	if err != nil || !strings.Contains(string(out), "[exited with code 0]") {
		t.Fatalf("claude -p: %v\n%s\nthe model was given: %q", err, out, seen)
	}
	data, err := os.ReadFile(filepath.Join(work, "note.txt"))
	if err != nil || string(data) != "hello from claude\n" {
		t.Fatalf("note.txt = %q, %v; the model was given: %q", data, err, seen)
	}
}
