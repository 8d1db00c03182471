//go:build linux

package dshcmd

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bashtool "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

// rawStdio is dsh serve driven by hand, one line at a time, so that a test
// can send what no SDK client would.
type rawStdio struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startRawStdio(t *testing.T) *rawStdio {
	t.Helper()
	cmd := exec.Command(dshBinary(t), "serve", "-w", t.TempDir())
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &rawStdio{t: t, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("dsh serve: %v\n%s", err, stderr.String())
		}
	})
	return r
}

func (r *rawStdio) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatalf("write %.60q: %v", line, err)
	}
}

// reply is one line of dsh's output, decoded.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// recv reads the next reply. A dsh that answers nothing within the
// deadline fails the test rather than hanging it.
func (r *rawStdio) recv() reply {
	r.t.Helper()
	type result struct {
		line []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		line, err := r.out.ReadBytes('\n')
		got <- result{line, err}
	}()
	var line []byte
	select {
	case res := <-got:
		if res.err != nil {
			r.t.Fatalf("read a reply: %v (dsh ended?)", res.err)
		}
		line = res.line
	case <-time.After(deadline):
		r.cmd.Process.Kill()
		r.t.Fatalf("no reply within %s", deadline)
	}
	var rep reply
	if err := json.Unmarshal(line, &rep); err != nil {
		r.t.Fatalf("reply %q: %v", line, err)
	}
	return rep
}

func (r *rawStdio) call(id int, command string) string {
	r.t.Helper()
	args, _ := json.Marshal(map[string]any{"name": "bash", "arguments": map[string]string{"command": command}})
	r.send(`{"jsonrpc":"2.0","id":` + jsonInt(id) + `,"method":"tools/call","params":` + string(args) + `}`)
	rep := r.recv()
	if string(rep.ID) != jsonInt(id) || rep.Error != nil {
		r.t.Fatalf("call %d: %+v", id, rep)
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(rep.Result, &res); err != nil || len(res.Content) == 0 {
		r.t.Fatalf("call %d result %s: %v", id, rep.Result, err)
	}
	return res.Content[0].Text
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestE2EStdioSurvivesBadInput: no line on stdin ends the session. Each
// bad one gets the JSON-RPC error the specification prescribes, and the
// shell, with its state, is there for the next call.
func TestE2EStdioSurvivesBadInput(t *testing.T) {
	r := startRawStdio(t)
	r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if rep := r.recv(); rep.Error != nil {
		t.Fatalf("initialize: %+v", rep.Error)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r.call(1, "export KEEP=kept")

	tests := []struct {
		name, line string
		code       int
		id         string
	}{
		{"malformed", `{"jsonrpc":"2.0","id":5,"method":`, -32700, "null"},
		{"truncated", `{"jsonrpc":"2.0","id":5,"method":"tools/list","par`, -32700, "null"},
		{"not JSON", `hello`, -32700, "null"},
		{"two objects on a line", `{"jsonrpc":"2.0","id":6,"method":"ping"}{"jsonrpc":"2.0","id":7,"method":"ping"}`, -32700, "null"},
		{"batch", `[{"jsonrpc":"2.0","id":8,"method":"ping"}]`, -32600, "null"},
		{"empty batch", `[]`, -32600, "null"},
		{"number", `42`, -32600, "null"},
		{"null", `null`, -32600, "null"},
		{"empty object", `{}`, -32600, "null"},
		{"version 1.0", `{"jsonrpc":"1.0","id":9,"method":"ping"}`, -32600, "9"},
		{"object as id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, "null"},
		{"empty method", `{"jsonrpc":"2.0","id":"x","method":""}`, -32600, `"x"`},
		{"oversize", `{"jsonrpc":"2.0","id":10,"method":"ping","params":{"pad":"` + strings.Repeat("x", 17<<20) + `"}}`, -32600, "null"},
	}
	for _, tt := range tests {
		r.send(tt.line)
		rep := r.recv()
		if rep.Error == nil || rep.Error.Code != tt.code || string(rep.ID) != tt.id {
			t.Errorf("%s: reply %+v (id %s), want code %d with id %s", tt.name, rep.Error, rep.ID, tt.code, tt.id)
		}
	}
	r.send("") // blank lines are nothing at all
	if got := r.call(2, `echo "$KEEP"`); !strings.HasPrefix(got, "kept") {
		t.Errorf("after the bad lines the shell says %q, want its state intact", got)
	}
}

// TestE2EStdioCancelledRequestGetsNoResponse: once the client cancels a
// request, dsh sends nothing for it (a client may take a late answer for
// an unknown id and drop the connection). The calls of one owner run one
// at a time, so the next call's answer comes after whatever the cancelled
// one would have sent.
func TestE2EStdioCancelledRequestGetsNoResponse(t *testing.T) {
	r := startRawStdio(t)
	r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if rep := r.recv(); rep.Error != nil {
		t.Fatalf("initialize: %+v", rep.Error)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	started := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]any{"name": "bash", "arguments": map[string]string{"command": "echo > " + started + "; sleep 100"}})
	r.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":` + string(args) + `}`)
	f, err := os.Open(started) // the command runs
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	r.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"the user pressed Esc"}}`)
	args, _ = json.Marshal(map[string]any{"name": "bash", "arguments": map[string]string{"command": "echo after"}})
	r.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + string(args) + `}`)
	for {
		rep := r.recv()
		if string(rep.ID) == `"slow"` {
			t.Fatalf("the cancelled request was answered: %s", rep.Result)
		}
		if string(rep.ID) == "7" {
			if rep.Error != nil || !strings.Contains(string(rep.Result), "after") {
				t.Fatalf("the next call: %+v %s", rep.Error, rep.Result)
			}
			return
		}
	}
}

// TestE2EServerInstructions: the initialize result carries the bash tool's
// instructions, which clients show the model: on the embedded default, the
// default ones told for its timeout action (background).
func TestE2EServerInstructions(t *testing.T) {
	cs, cmd, _ := startStdio(t)
	if got, want := cs.InitializeResult().Instructions, bashtool.DefaultInstructionsFor(bashtool.TimeoutBackground); got != want {
		t.Errorf("instructions = %q, want %q", got, want)
	}
	closeAndWait(t, cs, cmd)
}
