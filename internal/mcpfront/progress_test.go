package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/host"
)

// TestNoProgressAfterResponse: a client forgets a progress token once the
// call's response has come (Claude Code then logs "Received a progress
// notification for an unknown token"), so no progress notification for a
// call may follow its response, whichever path answers it.
func TestNoProgressAfterResponse(t *testing.T) {
	for _, sdkOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("sdkOnly=%v", sdkOnly), func(t *testing.T) {
			r := newRig(t)
			s := r.serveRaw(t, sdkOnly)
			s.send(fastCallScripts[0].opening[0])
			s.next()
			s.send(fastCallScripts[0].opening[1])
			const calls = 300
			for i := range calls {
				s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"progressToken":%d},"name":"echo","arguments":{"text":"x"}}}`, i, i))
			}
			answered := map[float64]bool{}
			for len(answered) < calls {
				line := s.next()
				var msg struct {
					ID     *float64 `json:"id"`
					Method string   `json:"method"`
					Params struct {
						ProgressToken float64 `json:"progressToken"`
					} `json:"params"`
				}
				if err := json.Unmarshal([]byte(line), &msg); err != nil {
					t.Fatal(err)
				}
				switch {
				case msg.ID != nil:
					answered[*msg.ID] = true
				case msg.Method == "notifications/progress" && answered[msg.Params.ProgressToken]:
					t.Fatalf("progress for call %v after its response: %s", msg.Params.ProgressToken, line)
				}
			}
		})
	}
}

// TestStdioProgressReadBeforeResponse: over stdio a call's response is
// written only once the client has read the progress reports before it.
// Claude Code's client handles a notification a microtask after the
// message it was read with, so a report read in one chunk with its call's
// response names a token the response has retired, and the client logs
// "Received a progress notification for an unknown token" (issue 27, item
// 7b; TestClaudeCodeProgressOverStdio shows it with the real client). The
// client here reads nothing while the call ends, as a busy client would
// not: the response must wait for it. A quick call reports no progress at
// all.
func TestStdioProgressReadBeforeResponse(t *testing.T) {
	for _, sdkOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("sdkOnly=%v", sdkOnly), func(t *testing.T) {
			r := newRig(t)
			release := make(chan struct{})
			register(t, r.h, "wait", "Wait until released.", func(ctx context.Context, _ *host.Owner, _ noArgs) (string, error) {
				select {
				case <-release:
					return "released", nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			})
			r.f = New(r.h, Options{Workdir: r.workdir, ProgressInterval: 5 * time.Millisecond})
			c := serveSocket(t, r, sdkOnly)
			c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
			c.readLines(1)
			c.send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)

			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"echo","arguments":{"text":"quick"}}}`)
			if line := c.readLines(1)[0]; !strings.Contains(line, `"id":1`) {
				t.Fatalf("a quick call's first line: %s", line)
			}

			c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":2},"name":"wait"}}`)
			c.awaitUnread()
			close(release)
			// The client reads nothing for a while: the response must not
			// come while the reports wait to be read.
			for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
				if peeked := c.peek(); strings.Contains(peeked, `"id":2`) {
					t.Fatalf("the response was written before the client read the progress before it:\n%s", peeked)
				}
				time.Sleep(5 * time.Millisecond)
			}
			var lines []string
			for !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, `"id":2`) }) {
				chunk := c.readChunk()
				if strings.Contains(chunk, `"id":2`) && strings.Contains(chunk, "notifications/progress") {
					t.Fatalf("a progress report in the same read as the response:\n%s", chunk)
				}
				lines = append(lines, strings.Split(strings.TrimSpace(chunk), "\n")...)
			}
			if !strings.Contains(lines[len(lines)-1], "released") {
				t.Fatalf("the last line is not the response: %q", lines)
			}
		})
	}
}

// socketClient is a stdio client the way Node runs one: the server's
// output is a unix socket, its input a pipe.
type socketClient struct {
	t   *testing.T
	in  *os.File
	out int // the client's end of the socket
	buf []byte
}

func serveSocket(t *testing.T, r *rig, sdkOnly bool) *socketClient {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sr, cw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	sw := os.NewFile(uintptr(fds[0]), "server-out")
	st := &StdioTransport{Reader: sr, Writer: sw, sdkOnly: sdkOnly}
	done := make(chan error, 1)
	go func() { done <- r.f.Serve(context.Background(), st) }()
	t.Cleanup(func() {
		cw.Close()
		if err := recv(t, done, "Serve to return"); err != nil {
			t.Errorf("Serve: %v", err)
		}
		sw.Close()
		unix.Close(fds[1])
	})
	return &socketClient{t: t, in: cw, out: fds[1]}
}

func (c *socketClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// awaitUnread waits until the server has written something the client
// has not read.
func (c *socketClient) awaitUnread() {
	c.t.Helper()
	fds := []unix.PollFd{{Fd: int32(c.out), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, int(deadline/time.Millisecond)); n != 1 || err != nil {
		c.t.Fatalf("nothing to read: %d, %v", n, err)
	}
}

// peek returns what the client has not read, leaving it unread.
func (c *socketClient) peek() string {
	buf := make([]byte, 1<<16)
	n, _, err := unix.Recvfrom(c.out, buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// readChunk returns what one read(2) returns.
func (c *socketClient) readChunk() string {
	c.t.Helper()
	c.awaitUnread()
	buf := make([]byte, 1<<16)
	n, err := unix.Read(c.out, buf)
	if err != nil || n == 0 {
		c.t.Fatalf("read: %d, %v", n, err)
	}
	return string(buf[:n])
}

// readLines reads until n whole lines have come and returns them.
func (c *socketClient) readLines(n int) []string {
	c.t.Helper()
	for strings.Count(string(c.buf), "\n") < n {
		c.buf = append(c.buf, c.readChunk()...)
	}
	lines := strings.SplitAfterN(string(c.buf), "\n", n+1)
	c.buf = []byte(strings.Join(lines[n:], ""))
	return lines[:n]
}

// TestProgressCarriesLastOutput: a progress report says what the call
// printed last (the last three lines, the one being written included),
// not only how long it has run.
func TestProgressCarriesLastOutput(t *testing.T) {
	r := newRig(t)
	release := make(chan struct{})
	register(t, r.h, "chatty", "Print, then wait until released.", func(ctx context.Context, _ *host.Owner, _ noArgs) (string, error) {
		host.Output(ctx, "one\ntwo\n")
		host.Output(ctx, "three\nfour\n")
		host.Output(ctx, strings.Repeat("x", 300))
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	r.f = New(r.h, Options{Workdir: r.workdir, ProgressInterval: 5 * time.Millisecond})
	c := serveSocket(t, r, false)
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	c.readLines(1)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p"},"name":"chatty"}}`)
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Message string `json:"message"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(c.readLines(1)[0]), &msg); err != nil || msg.Method != "notifications/progress" {
		t.Fatalf("first line: %+v, %v", msg, err)
	}
	want := "; last output:\nthree\nfour\n" + strings.Repeat("x", 200) + "…"
	if !strings.HasPrefix(msg.Params.Message, "running for ") || !strings.HasSuffix(msg.Params.Message, want) {
		t.Fatalf("progress message %q, want it to end with %q", msg.Params.Message, want)
	}
	close(release)
	for {
		if line := c.readLines(1)[0]; strings.Contains(line, `"id":1`) {
			break
		}
	}
}
