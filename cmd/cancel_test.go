//go:build linux

package dshcmd

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestE2ECancelKeepsTheShell: a client's notifications/cancelled (what
// Esc in Claude Code sends) interrupts the command and keeps the shell,
// over stdio and HTTP; the owner's next result starts with a line saying
// the previous command was cancelled, after how long, what was done to it,
// and what it printed. The test logs how long after the cancel the next
// call was answered.
func TestE2ECancelKeepsTheShell(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			var cs *mcp.ClientSession
			if transport == "stdio" {
				cs, _, _ = startStdio(t)
			} else {
				d := startHTTP(t)
				cs = d.connect(t)
			}
			defer cs.Close()
			dir := t.TempDir()
			pid, _ := bash(t, cs, fmt.Sprintf("cd %q && export K=kept && echo $$", dir))

			gate := fifo(t)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
					"command": fmt.Sprintf("echo compiling; echo $$ > %q; sleep 600", gate),
				}})
				errc <- err
			}()
			readPid(t, gate)
			cancel()
			start := time.Now()
			recv(t, errc, "the cancelled call to return")
			got, isErr := bash(t, cs, "echo $$ K=$K $PWD")
			took := time.Since(start)
			want := regexp.MustCompile(`^\[The previous command was cancelled after [0-9.]+ seconds and interrupted with SIGINT\. The shell and its state are kept\. Its output until then:\]\ncompiling\n` + regexp.QuoteMeta(strings.TrimSpace(pid)+" K=kept "+dir) + `$`)
			if isErr || !want.MatchString(got) {
				t.Fatalf("the result after the cancel:\n%s", got)
			}
			t.Logf("%s: the next call was answered %v after the cancel:\n%s", transport, took, got)
		})
	}
}
