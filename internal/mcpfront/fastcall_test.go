package mcpfront

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
)

// rawStdio is Serve over a StdioTransport, driven line by line.
type rawStdio struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Scanner
	conn func() *lineConn
	done chan error
}

func (r *rig) serveRaw(t *testing.T, sdkOnly bool) *rawStdio {
	t.Helper()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	st := &StdioTransport{Reader: sr, Writer: sw, sdkOnly: sdkOnly}
	s := &rawStdio{t: t, in: cw, out: bufio.NewScanner(cr), conn: st.conn.Load, done: make(chan error, 1)}
	s.out.Buffer(nil, 1<<20)
	go func() {
		s.done <- r.f.Serve(context.Background(), st)
		cr.Close()
	}()
	t.Cleanup(func() {
		cw.Close()
		if err := recv(t, s.done, "Serve to return"); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func (s *rawStdio) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatalf("send: %v", err)
	}
}

// next returns the next line the server writes.
func (s *rawStdio) next() string {
	s.t.Helper()
	lines := make(chan string, 1)
	go func() {
		if s.out.Scan() {
			lines <- s.out.Text()
		}
		close(lines)
	}()
	line, ok := recv(s.t, lines, "a line from the server"), true
	if line == "" && ok {
		s.t.Fatalf("the server's output ended: %v", s.out.Err())
	}
	return line
}

// The lines a session sends under each protocol: its opening, then
// tools/call requests.
var fastCallScripts = []struct {
	name    string
	opening []string // each answered with one line, unless a notification
	call    string   // a fmt format: id, then params without _meta
	meta    string   // the _meta every call carries
}{
	{
		name: "initialize",
		opening: []string{
			`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
		},
		call: `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{%s}}`,
	},
	{
		name: "per-request",
		opening: []string{
			`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":` + perRequestMeta + `}}`,
		},
		call: `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"_meta":` + perRequestMeta + `,%s}}`,
		meta: perRequestMeta,
	},
}

const perRequestMeta = `{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`

// The calls of the script: what the fast path must answer exactly as the
// SDK does, and what it must leave to the SDK.
var fastCallParams = []string{
	`"name":"echo","arguments":{"text":"hi"}`,
	`"name":"echo","arguments":{"text":"hi"}`,
	`"name":"echo","arguments":{"text":"<a href=\"x\">&amp;</a> ünï \u2028 \t\n"}`,
	"\"name\":\"echo\",\"arguments\":{\"text\":\"bad \xff\xfe utf-8\"}",
	`"name":"empty"`,
	`"name":"fail","arguments":{}`,
	`"name":"boom"`,
	`"name":"echo","arguments":{"text":""}`,
	`"name":"echo","arguments":{"text":5}`,
	`"name":"echo","arguments":null`,
	`"name":"nosuch","arguments":{}`,
	`"name":5`,
	`"name":"echo","arguments":{"text":"x"},"requestState":"s"`,
	`"name":"echo","arguments":{"text":"x"},"inputResponses":{}`,
}

// TestFastCallMatchesSDK: every line the stdio transport writes when it
// answers tools/call itself is the line the SDK writes for it.
func TestFastCallMatchesSDK(t *testing.T) {
	if noFastPath {
		t.Skip("DSH_MCP_FAST_PATH=false: there is no fast path to compare with the SDK")
	}
	for _, sc := range fastCallScripts {
		t.Run(sc.name, func(t *testing.T) {
			run := func(sdkOnly bool) (lines []string, served int) {
				r := newRig(t)
				s := r.serveRaw(t, sdkOnly)
				for _, line := range sc.opening {
					s.send(line)
					if strings.Contains(line, `"id"`) {
						lines = append(lines, s.next())
					}
				}
				ids := []string{`7`, `"s-1"`, `9007199254740993`, `"<&>"`}
				for i, params := range fastCallParams {
					s.send(fmt.Sprintf(sc.call, ids[i%len(ids)], params))
					lines = append(lines, s.next())
				}
				// A call while the front closes is a protocol error.
				r.f.mu.Lock()
				r.f.closing = true
				r.f.mu.Unlock()
				s.send(fmt.Sprintf(sc.call, `8`, `"name":"echo","arguments":{"text":"late"}`))
				lines = append(lines, s.next())
				r.f.mu.Lock()
				r.f.closing = false
				r.f.mu.Unlock()
				if sc.meta == "" {
					// A progress token: over stdio a quick call reports no
					// progress (see TestStdioProgressReadBeforeResponse).
					s.send(fmt.Sprintf(sc.call, `"p"`, `"_meta":{"progressToken":"tok"},"name":"echo","arguments":{"text":"p"}`))
					lines = append(lines, s.next())
				}
				if c := s.conn(); c != nil {
					c.pendingMu.Lock()
					served = c.calls.served
					c.pendingMu.Unlock()
				}
				return lines, served
			}
			want, _ := run(true)
			got, served := run(false)
			if served < 8 {
				t.Errorf("the fast path answered %d calls, want at least 8:\n%s", served, strings.Join(got, "\n"))
			}
			if !slices.Equal(got, want) {
				for i := range max(len(got), len(want)) {
					g, w := "", ""
					if i < len(got) {
						g = got[i]
					}
					if i < len(want) {
						w = want[i]
					}
					if g != w {
						t.Errorf("line %d:\n fast %s\n  sdk %s", i, g, w)
					}
				}
			}
		})
	}
}

// A call the client cancels is cancelled, and its answer dropped: the next
// line the client reads answers its next request.
func TestFastCallCancelled(t *testing.T) {
	r := newRig(t)
	s := r.serveRaw(t, false)
	sc := fastCallScripts[0]
	s.send(sc.opening[0])
	s.next()
	s.send(sc.opening[1])
	s.send(fmt.Sprintf(sc.call, `1`, `"name":"block"`))
	recv(t, r.started, "the call to start")
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	if cause := recv(t, r.stopped, "the call to be cancelled"); !errors.Is(cause, context.Canceled) {
		t.Fatalf("the tool saw %v, want context.Canceled", cause)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if got, want := s.next(), `{"jsonrpc":"2.0","id":2,"result":{}}`; got != want {
		t.Fatalf("after the cancellation the client read %s, want %s", got, want)
	}
	c := s.conn()
	c.pendingMu.Lock()
	served := c.calls.served
	c.pendingMu.Unlock()
	if want := 1 - boolInt(noFastPath); served != want {
		t.Fatalf("the fast path took %d calls, want %d", served, want)
	}
}

// A client whose input broke has gone: its call is cancelled, and the
// answer is dropped, not written to what is left of the pipe (the SDK's
// write fails there). TestClientVanishesMidCall saw the answer arrive when
// the client's end of the output closed a moment after its input.
func TestFastCallDroppedOnBrokenInput(t *testing.T) {
	r := newRig(t)
	s := r.serveRaw(t, false)
	sc := fastCallScripts[0]
	s.send(sc.opening[0])
	s.next()
	s.send(sc.opening[1])
	s.send(fmt.Sprintf(sc.call, `1`, `"name":"block"`))
	recv(t, r.started, "the call to start")
	written := make(chan []string, 1)
	go func() {
		var lines []string
		for s.out.Scan() {
			lines = append(lines, s.out.Text())
		}
		written <- lines
	}()
	s.in.CloseWithError(io.ErrUnexpectedEOF)
	recv(t, r.stopped, "the call to be cancelled")
	if err := recv(t, s.done, "Serve to return"); err == nil {
		t.Fatal("Serve returned nil for a broken connection")
	}
	s.done <- nil // for the cleanup
	if lines := recv(t, written, "the server's output to end"); len(lines) != 0 {
		t.Fatalf("after the input broke the server wrote %q", lines)
	}
}

// After a burst of concurrent calls, only maxIdleWorkers workers wait for
// the next; the rest end, and the waiting ones end when the connection
// closes.
func TestWorkersAfterBurst(t *testing.T) {
	c := &lineConn{idle: make(chan func()), closed: make(chan struct{})}
	const burst = 3 * maxIdleWorkers
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	started.Add(burst)
	finished.Add(burst)
	for range burst {
		c.run(func() {
			started.Done()
			<-release
			finished.Done()
		})
	}
	started.Wait() // every call has a worker of its own
	close(release)
	finished.Wait()
	close(c.closed)
	c.workers.Wait()
	if n := c.idleWorkers.Load(); n != maxIdleWorkers {
		t.Fatalf("%d workers waited for another call, want %d", n, maxIdleWorkers)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
