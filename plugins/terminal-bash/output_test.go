//go:build linux

package terminalbash

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/screen"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// TestRendering: output is shown as a terminal would show it. The sleeps
// inside the commands split the output across reads.
func TestRendering(t *testing.T) {
	tests := []struct {
		name, cmd string
		want      []string
	}{
		{"invalid UTF-8", `printf '\xff\xfe\n'`, []string{"\uFFFD\uFFFD"}},
		{"truncated rune", `printf 'a\xe2\x82\n'`, []string{"a\uFFFD\uFFFD"}},
		{"escape split across reads", `printf '\e[3'; sleep 0.01; printf '1mred\e[0m\n'`, []string{"red"}},
		{"CRLF split across reads", `printf 'a\r'; sleep 0.01; printf '\nb\n'`, []string{"a", "b"}},
		{"progress bar", `printf '10%%\r20%%\r30%%\n'`, []string{"30%"}},
		{"erase line", `printf 'downloading\r\e[Kdone\n'`, []string{"done"}},
		{"title and colours", `printf '\e]0;title\a\e[1;32mok\e[0m\n'`, []string{"ok"}},
		{"unterminated OSC does not eat the prompt", `printf '\e]junk'`, nil},
		{"UTF-8", `printf '中文 ✓\n'`, []string{"中文 ✓"}},
	}
	s := spawn(t, newTestBackend(t, nil), "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustPrompt(t, s, tt.cmd)
			if got := outputLines(res.Viewport); !slices.Equal(got, tt.want) {
				t.Errorf("output %q, want %q (viewport %q)", got, tt.want, res.Viewport)
			}
		})
	}
}

// TestHugeOutputWithoutStream: a caller that does not stream gets the
// newest maxReadBytes, flagged as truncated.
func TestHugeOutputWithoutStream(t *testing.T) {
	const limit = 64 << 10
	s := spawn(t, newTestBackend(t, func(c *Config) { c.MaxReadBytes = limit }), "")
	res := mustPrompt(t, s, "seq 1 200000")
	if !res.Truncated || len(res.Viewport) > limit {
		t.Errorf("truncated %v, viewport %d bytes (limit %d)", res.Truncated, len(res.Viewport), limit)
	}
	if !strings.HasSuffix(res.Viewport, "\n199999\n200000\n") {
		t.Errorf("viewport does not end with the newest output: %q", screen.Tail(res.Viewport, 80))
	}
	// Nothing of it leaks into the next send.
	res = mustPrompt(t, s, "echo next")
	if res.Truncated || outputLines(res.Viewport)[0] != "next" {
		t.Errorf("next send: truncated %v, %q", res.Truncated, res.Viewport)
	}
}

// TestStreamDeliversEverything: a streaming caller gets every line exactly
// once, in order, although it is far more than maxReadBytes: the terminal
// is held back while the caller is behind.
func TestStreamDeliversEverything(t *testing.T) {
	const n = 200000
	s := spawn(t, newTestBackend(t, func(c *Config) { c.MaxReadBytes = 16 << 10 }), "")
	sn := start(t, s, "seq 1 "+strconv.Itoa(n), sendOpts{stream: true})
	out := drainOutput(t, sn)
	res := wait(t, sn)
	if res.Reason != termapi.WaitStdinRead || res.Truncated || !strings.HasSuffix(out, res.Viewport) {
		t.Errorf("settled %s, truncated %v, viewport ending %q", res.Reason, res.Truncated, screen.Tail(res.Viewport, 80))
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	for i, line := range lines {
		if line != strconv.Itoa(i+1) {
			t.Fatalf("line %d is %q", i+1, line)
		}
	}
}

// TestOutputBetweenSends: output produced while no send is live goes to
// the next send, before that send's own output.
func TestOutputBetweenSends(t *testing.T) {
	dir := t.TempDir()
	s := spawn(t, newTestBackend(t, nil), dir)
	mustPrompt(t, s, "mkfifo go ack; (read _ < go; echo late; echo > ack) &")
	writeFIFO(t, filepath.Join(dir, "go"))
	readFIFO(t, filepath.Join(dir, "ack"))
	res := mustPrompt(t, s, "echo next")
	lines := strings.Split(res.Viewport, "\n")
	late := slices.Index(lines, "late")
	next := slices.Index(lines, "next")
	if late < 0 || next < late {
		t.Errorf("viewport %q: want the late line, then the next send's", res.Viewport)
	}
}

func writeFIFO(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
}

func readFIFO(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		t.Fatalf("read %s: %q, %v", path, data, err)
	}
}

// TestOutputPull: Output returns complete lines as they come, then io.EOF
// after the send settles. The viewport holds what was not pulled when the
// send settled (so it overlaps what Output returns afterwards), plus the
// line being written.
func TestOutputPull(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	sn := start(t, s, "echo one; read x; echo two", sendOpts{})
	awaitLine(t, sn, "one")
	if res := wait(t, sn); res.Reason != termapi.WaitStdinRead || res.Viewport != "" {
		t.Fatalf("read x: %s %q", res.Reason, res.Viewport)
	}
	sn = start(t, s, "x", sendOpts{})
	out := drainOutput(t, sn)
	res := wait(t, sn)
	if out != "two\n" || !strings.HasSuffix(out, res.Viewport) || !res.Prompt {
		t.Errorf("output %q, viewport %q", out, res.Viewport)
	}
	if _, err := sn.Output(context.Background()); err == nil {
		t.Error("Output after EOF returned no error")
	}
}
