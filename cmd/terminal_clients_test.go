//go:build linux

package dshcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	body, _ := io.ReadAll(r.Body)
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") || strings.HasSuffix(r.URL.Path, "/count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"input_tokens":10}`)
		return
	}
	var req struct {
		Model string `json:"model"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	offered := false
	for _, tool := range req.Tools {
		offered = offered || tool.Name == "mcp__dsh__terminal_open"
	}
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
	start := fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}`, req.Model)
	events := [][2]string{{"message_start", start}}
	switch step := len(results); {
	case !offered && step == 0:
		events = append(events, textEvents("ok")...)
	case step < len(m.steps):
		tool, args := m.steps[step](results)
		input, _ := json.Marshal(args)
		partial, _ := json.Marshal(string(input))
		events = append(events,
			[2]string{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_dsh_%d","name":"mcp__dsh__%s","input":{}}}`, step, tool)},
			[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":` + string(partial) + `}}`},
			[2]string{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			[2]string{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}`})
	default:
		events = append(events, textEvents("the tool said: "+results[len(results)-1])...)
	}
	events = append(events, [2]string{"message_stop", `{"type":"message_stop"}`})
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e[0], e[1])
	}
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
