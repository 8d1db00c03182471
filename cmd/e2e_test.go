//go:build linux

package dshcmd

// End-to-end tests: the real dsh binary, its embedded default deployment and
// the real bash tool, driven by real MCP clients over stdio and HTTP and by
// a pipe into `dsh repl`.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// built is the dsh binary of the end-to-end tests, built once per run.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// dshBinary builds dsh and checks that its default deployment has the bash
// tool.
func dshBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "dsh-e2e-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "dsh")
		out, err := exec.Command("go", "build", "-o", built.path, "./dsh").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		out, err = exec.Command(built.path, "tools", "--json").Output()
		if err != nil {
			built.err = fmt.Errorf("dsh tools: %w", err)
			return
		}
		var tools []struct{ Name string }
		if err := json.Unmarshal(out, &tools); err != nil {
			built.err = fmt.Errorf("dsh tools --json: %w", err)
			return
		}
		if !slices.ContainsFunc(tools, func(t struct{ Name string }) bool { return t.Name == "bash" }) {
			built.err = fmt.Errorf("the default deployment has no bash tool (yet?); dsh tools lists %v", tools)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

func newE2EClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "dsh-e2e", Version: "v0"}, nil)
}

// bash runs one bash call and returns its text.
func bash(t testing.TB, cs *mcp.ClientSession, command string) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
	if err != nil {
		t.Fatalf("bash %q: %v", command, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("bash %q: %d content blocks, want 1", command, len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("bash %q: content is %T, want text", command, res.Content[0])
	}
	return tc.Text, res.IsError
}

// bashPid runs `echo $$` and returns the shell's pid.
func bashPid(t testing.TB, cs *mcp.ClientSession) int {
	t.Helper()
	text, _ := bash(t, cs, "echo $$")
	pid, err := strconv.Atoi(strings.TrimSpace(text))
	if err != nil {
		t.Fatalf("echo $$: %q", text)
	}
	return pid
}

// assertGone fails for every pid that is still alive. A zombie is dead: a
// killed grandchild of dsh is reparented to init, which reaps it in its own
// time.
func assertGone(t *testing.T, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Errorf("process %d: %v", pid, err)
			continue
		}
		// The state follows the command name, which is in parentheses.
		if _, rest, ok := strings.Cut(string(stat), ") "); ok && strings.HasPrefix(rest, "Z") {
			continue
		}
		t.Errorf("process %d is still running after dsh exited: %s", pid, stat)
	}
}

// fifo makes a named pipe a command can write to, so a test learns that the
// command is running without polling.
func fifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// readPid blocks until a command writes its pid into the fifo.
func readPid(t *testing.T, path string) int {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(path)
		got <- string(b)
	}()
	s := recv(t, got, "the command to start")
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("fifo: %q", s)
	}
	return pid
}

// sleeper is a command that reports its pid to the fifo and then sleeps
// until it is killed.
func sleeper(fifo string) string {
	return fmt.Sprintf(`sh -c 'echo $$ > %s; exec sleep 1000'`, fifo)
}

// startStdio starts `dsh serve` as an MCP client would.
func startStdio(t *testing.T, args ...string) (*mcp.ClientSession, *exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(dshBinary(t), append([]string{"serve"}, args...)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	// A long grace: a dsh that ignored EOF would show up as a timeout
	// below, not be hidden by the transport's SIGTERM.
	cs, err := newE2EClient().Connect(t.Context(), &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * deadline}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %q)", err, stderr.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dsh stderr:\n%s", stderr.String())
		}
	})
	return cs, cmd, stderr
}

// closeAndWait closes the client (stdin EOF) and waits for dsh to exit 0.
func closeAndWait(t *testing.T, cs *mcp.ClientSession, cmd *exec.Cmd) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- cs.Close() }()
	if err := recv(t, closed, "dsh to exit after stdin EOF"); err != nil {
		t.Fatalf("close: %v", err)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("dsh exited with %d", code)
	}
}

func TestE2EStdio(t *testing.T) {
	dir := t.TempDir()
	cs, cmd, _ := startStdio(t, "--workdir", dir)

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(tools.Tools, func(tool *mcp.Tool) bool { return tool.Name == "bash" })
	if i < 0 {
		t.Fatalf("tools/list has no bash: %+v", tools.Tools)
	}
	schema, _ := json.Marshal(tools.Tools[i].InputSchema)
	if !strings.Contains(string(schema), `"command"`) || tools.Tools[i].Description == "" {
		t.Fatalf("bash tool: description %q, schema %s", tools.Tools[i].Description, schema)
	}

	// Persistence: cwd, variables and the shell itself carry across calls.
	pid := bashPid(t, cs)
	if text, isErr := bash(t, cs, "mkdir -p sub && cd sub && export X=42"); isErr {
		t.Fatalf("cd: %q", text)
	}
	if text, _ := bash(t, cs, "pwd; echo $X; echo $$"); text != fmt.Sprintf("%s/sub\n42\n%d", dir, pid) {
		t.Fatalf("state was not kept: %q", text)
	}
	// Bash adds job notices ("[1] PID") around the output of a job.
	bg, _ := bash(t, cs, `sleep 1000 & echo "bg=$!"`)
	m := regexp.MustCompile(`(?m)^bg=(\d+)$`).FindStringSubmatch(bg)
	if m == nil {
		t.Fatalf("background job: %q", bg)
	}
	bgPid, _ := strconv.Atoi(m[1])

	// A failure is a result, not a protocol error.
	if text, isErr := bash(t, cs, ""); !isErr || text == "" {
		t.Fatalf("empty command: %q (isError %v), want an error result", text, isErr)
	}

	// The client's cancellation stops the running command.
	started := fifo(t)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": sleeper(started)}})
		errc <- err
	}()
	sleepPid := readPid(t, started)
	cancel()
	if err := recv(t, errc, "the cancelled call to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if text, _ := bash(t, cs, "echo after"); !strings.HasSuffix(text, "after") {
		t.Fatalf("after cancel: %q", text)
	}
	newPid := bashPid(t, cs)

	closeAndWait(t, cs, cmd)
	assertGone(t, pid, bgPid, sleepPid, newPid)
}

func TestE2EStdioSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cs, cmd, stderr := startStdio(t)
			pid := bashPid(t, cs)
			// Mid-call, so shutdown has a running command to stop.
			started := fifo(t)
			go cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": sleeper(started)}})
			sleepPid := readPid(t, started)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- cs.Wait() }()
			recv(t, waited, "dsh to close the session")
			closeAndWait(t, cs, cmd)
			assertGone(t, pid, sleepPid)
			if s := stderr.String(); s != "" {
				t.Errorf("stderr: %q", s)
			}
		})
	}
}

func TestE2EStdioEOFMidCall(t *testing.T) {
	// The pipes by hand, not CommandTransport: a vanishing client does not
	// wait for its calls before its stdin closes.
	cmd := exec.Command(dshBinary(t), "serve")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	cs, err := newE2EClient().Connect(t.Context(), &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := bashPid(t, cs)
	started := fifo(t)
	go cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": sleeper(started)}})
	sleepPid := readPid(t, started)
	// The client dies: both its pipes close. (A client that only closes
	// stdin gets the answers to what it sent first: TestServePipedSession.)
	stdin.Close()
	stdout.Close()
	if err := recv(t, exited, "dsh to exit at stdin EOF"); err != nil {
		t.Fatalf("dsh: %v (stderr %q)", err, stderr.String())
	}
	cs.Close()
	assertGone(t, pid, sleepPid)
}

// httpDsh is `dsh serve --http` on a free local port.
type httpDsh struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	exited chan error
	client *http.Client
	// authLine is what dsh said about authentication.
	authLine string
	// metricsURL is where --metrics serves, when it was given.
	metricsURL string
}

var servingLine = regexp.MustCompile(`^dsh: serving MCP \(streamable HTTP\) at (https?://\S+/mcp)$`)

// testToken is the bearer token startHTTP's servers accept.
const testToken = "e2e-test-token-0123456789abcdefghijklmnop"

// startHTTP starts `dsh serve --http` with args, accepting testToken from
// a --token-file; the returned client sends it.
func startHTTP(t testing.TB, args ...string) *httpDsh {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startHTTPRaw(t, append([]string{"--token-file", tokenFile}, args...)...)
	d.client.Transport = bearer{testToken, d.client.Transport}
	return d
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// startHTTPRaw starts `dsh serve --http 127.0.0.1:0` with args as given.
func startHTTPRaw(t testing.TB, args ...string) *httpDsh {
	t.Helper()
	return startHTTPEnv(t, nil, args...)
}

// startHTTPEnv is startHTTPRaw with env added to dsh's environment. The
// first two lines dsh prints (the address, then how clients authenticate)
// are read before it returns.
func startHTTPEnv(t testing.TB, env []string, args ...string) *httpDsh {
	t.Helper()
	cmd := exec.Command(dshBinary(t), append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &httpDsh{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1), client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}}
	br := bufio.NewReader(pipe)
	first, err := br.ReadString('\n')
	m := servingLine.FindStringSubmatch(strings.TrimSuffix(first, "\n"))
	if m == nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("first stderr line %q (%v), want the serving address", first, err)
	}
	d.url = m[1]
	if d.authLine, err = br.ReadString('\n'); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("second stderr line %q: %v", d.authLine, err)
	}
	d.authLine = strings.TrimSuffix(d.authLine, "\n")
	if slices.Contains(args, "--metrics") {
		for d.metricsURL == "" {
			line, err := br.ReadString('\n')
			if err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("no metrics address on stderr (%v)", err)
			}
			if m := sideLine.FindStringSubmatch(line); m != nil && m[1] == "metrics" {
				d.metricsURL = m[2]
			}
		}
	}
	go func() {
		io.Copy(d.stderr, br)
		d.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		d.client.CloseIdleConnections()
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("dsh stderr:\n%s", d.stderr.String())
		}
	})
	return d
}

func (d *httpDsh) connect(t testing.TB) *mcp.ClientSession {
	t.Helper()
	cs, err := newE2EClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url, HTTPClient: d.client}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cs
}

// stop sends sig and waits for a clean exit.
func (d *httpDsh) stop(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, d.exited, "dsh to exit"); err != nil {
		t.Fatalf("dsh: %v", err)
	}
}

func TestE2EHTTPSessionsAreIsolated(t *testing.T) {
	dir := t.TempDir()
	d := startHTTP(t, "--workdir", dir)
	a := d.connect(t)
	b := d.connect(t)
	pidA, _ := bash(t, a, "cd / && export X=a && echo $$")
	pidB, _ := bash(t, b, "echo $$")
	if pidA == pidB {
		t.Fatalf("both sessions got shell %s", pidA)
	}
	if text, _ := bash(t, b, `echo "[$X]"; pwd`); text != "[]\n"+dir {
		t.Fatalf("session b sees session a's shell: %q", text)
	}
	if text, _ := bash(t, a, "echo $X; pwd; echo $$"); text != "a\n/\n"+pidA {
		t.Fatalf("session a lost its state: %q", text)
	}
	// Ending a session (DELETE) closes its shell and only that one.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	pb, _ := strconv.Atoi(pidB)
	assertGone(t, pb)
	if text, _ := bash(t, a, "echo $$"); text != pidA {
		t.Fatalf("session a's shell changed: %q, want %s", text, pidA)
	}
	// SIGTERM with a session open: exit 0, no shell left.
	started := fifo(t)
	go a.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": sleeper(started)}})
	sleepPid := readPid(t, started)
	d.stop(t, syscall.SIGTERM)
	a.Close()
	pa, _ := strconv.Atoi(pidA)
	assertGone(t, pa, sleepPid)
}

// TestE2EHTTPClientVanishesMidCall: a POST dropped mid-call, with no
// notifications/cancelled, is a cancel: its command is interrupted, the
// shell is kept, and nothing outlives dsh.
func TestE2EHTTPClientVanishesMidCall(t *testing.T) {
	d := startHTTP(t)
	cs := d.connect(t)
	defer cs.Close()
	pid := bashPid(t, cs)
	// A raw POST, as any client sends it, dropped mid-call: no
	// notifications/cancelled, the connection just goes.
	started := fifo(t)
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": "vanishing", "method": "tools/call",
		"params": map[string]any{"name": "bash", "arguments": map[string]any{"command": sleeper(started)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
	posted := make(chan error, 1)
	go func() {
		resp, err := d.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		posted <- err
	}()
	sleepPid := readPid(t, started)
	cancel()
	recv(t, posted, "the POST to end")
	// The owner's calls run in order: this one runs once the dropped call
	// has interrupted its command, which is a cancel: the shell is kept.
	if text, _ := bash(t, cs, "echo next"); !strings.HasSuffix(text, "next") {
		t.Fatalf("after the dropped call: %q", text)
	}
	assertGone(t, sleepPid)
	if now := bashPid(t, cs); now != pid {
		t.Errorf("the shell after the dropped call is %d, want %d kept", now, pid)
	}
	d.stop(t, syscall.SIGTERM)
	assertGone(t, pid)
}

func TestE2ERepl(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(dshBinary(t), "repl", "--workdir", dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	started := fifo(t)
	fmt.Fprintf(stdin, "export X=42; echo $$\necho x=$X; pwd\n%s\n", sleeper(started))
	sleepPid := readPid(t, started)
	// Ctrl-C interrupts the running command (SIGINT to it); the shell
	// and its state stay.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(stdin, "echo after $X; echo $$\n")
	stdin.Close()
	if err := recv(t, exited, "the REPL to exit at EOF"); err != nil {
		t.Fatalf("repl: %v (stderr %q)", err, stderr.String())
	}
	out := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(out) < 5 || out[1] != "x=42" || out[2] != dir || out[len(out)-2] != "after 42" || out[len(out)-1] != out[0] {
		t.Fatalf("stdout %q: want the same shell, with X, after the Ctrl-C", stdout.String())
	}
	var status []string
	for _, l := range strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n") {
		if statusLine.MatchString(l) {
			status = append(status, l)
		}
	}
	if len(status) != 4 || !strings.Contains(stderr.String(), "[SIGINT sent to the command") {
		t.Fatalf("stderr %q: want 4 status lines and the interrupt's note", stderr.String())
	}
	pid1, _ := strconv.Atoi(out[0])
	assertGone(t, pid1, sleepPid)
}

// A client that dies takes every pipe with it, stderr included: dsh must
// still shut down cleanly rather than die of SIGPIPE on its next log line.
func TestE2EStdioClientDiesWithStderr(t *testing.T) {
	cmd := exec.Command(dshBinary(t), "serve", "--log-level", "debug")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := make(chan struct{})
	go func() {
		defer close(logs)
		io.Copy(io.Discard, stderr)
	}()
	cs, err := newE2EClient().Connect(t.Context(), &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := bashPid(t, cs)
	// Stderr first: the session's end at stdin EOF is logged (debug).
	stderr.Close()
	<-logs
	stdout.Close()
	stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := recv(t, exited, "dsh to exit"); err != nil {
		t.Fatalf("dsh: %v", err)
	}
	cs.Close()
	assertGone(t, pid)
}

var tokenLine = regexp.MustCompile(`^dsh: clients must send "Authorization: Bearer <token>"; the token is in (\S+) \(kept for the next start: --rotate-token makes a new one, --token-file (\S+) serves it on another address\)$`)

// TestE2EHTTPTokenByDefault: serving HTTP makes a token, writes it where
// only this user can read it, says where, and refuses every request
// without it, with a 401 that names the Bearer scheme. The file is kept
// for the next start (TestE2EHTTPTokenKeptAcrossRestarts).
func TestE2EHTTPTokenByDefault(t *testing.T) {
	runtime := t.TempDir()
	d := startHTTPEnv(t, []string{"XDG_RUNTIME_DIR=" + runtime})
	m := tokenLine.FindStringSubmatch(d.authLine)
	if m == nil {
		t.Fatalf("auth line %q", d.authLine)
	}
	path := m[1]
	if filepath.Dir(path) != filepath.Join(runtime, "dsh") {
		t.Fatalf("token file %s is not in $XDG_RUNTIME_DIR/dsh", path)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode() != want {
			t.Fatalf("%s: mode %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(data))
	if len(token) != 43 {
		t.Fatalf("token %q: want 256 bits in base64url", token)
	}

	// Without the token (or with a wrong one) nothing is served.
	for _, auth := range []string{"", "Bearer " + strings.Repeat("x", 43), "Basic " + token} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := d.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("Authorization %q: %s, want 401", auth, resp.Status)
		}
		// RFC 6750: without the challenge, clients take the 401 for a
		// server that wants OAuth.
		if c := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(c, "Bearer") {
			t.Fatalf("Authorization %q: WWW-Authenticate %q, want Bearer", auth, c)
		}
	}
	d.client.Transport = bearer{token, d.client.Transport}
	cs := d.connect(t)
	if text, _ := bash(t, cs, "echo authenticated"); text != "authenticated" {
		t.Fatalf("with the token: %q", text)
	}
	cs.Close()
	d.stop(t, syscall.SIGTERM)
	if m[2] != path {
		t.Fatalf("--token-file %s is not the token's file %s", m[2], path)
	}
}

// TestE2EHTTPNoAuthIsLoud: --no-auth serves on loopback, and says what it
// gives away.
func TestE2EHTTPNoAuthIsLoud(t *testing.T) {
	d := startHTTPRaw(t, "--no-auth")
	if !strings.HasPrefix(d.authLine, "dsh: WARNING: --no-auth: any local user") {
		t.Fatalf("auth line %q", d.authLine)
	}
	cs := d.connect(t)
	defer cs.Close()
	if text, _ := bash(t, cs, "echo open"); text != "open" {
		t.Fatalf("without auth: %q", text)
	}
}

// TestShellsCannotReadDsh: a shell runs as dsh's user, but dsh (and a
// backend plugin, the shell's parent when the backend is out of process)
// is not dumpable, so the shell cannot read its parent's environment (every
// secret its own environment was scrubbed of) or memory through /proc. As
// root the read would succeed anyway (CAP_SYS_PTRACE), so as root the test
// runs dsh as nobody.
func TestShellsCannotReadDsh(t *testing.T) {
	dir, err := os.MkdirTemp("", "dsh-nondumpable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "dsh")
	data, err := os.ReadFile(dshBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	plugin := filepath.Join(dir, "plugin.yaml")
	for _, err := range []error{
		os.WriteFile(bin, data, 0o755),
		os.Chmod(dir, 0o755),
		os.Mkdir(work, 0o777),
		os.Chmod(work, 0o777),
		os.WriteFile(plugin, []byte("- id: terminal\n  name: terminal\n- id: shell\n  name: ./dsh-backend-bash\n- id: bash\n  name: tool-bash-persistent\n"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "dsh-backend-bash"), "./dsh-backend-bash").CombinedOutput(); err != nil {
		t.Fatalf("build dsh-backend-bash: %v\n%s", err, out)
	}
	const secret = "s3cr3t-only-dsh-knows"
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"in process", nil},
		{"backend plugin", []string{"-d", plugin}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, append(append([]string{"call", "-w", work}, tt.args...), "bash",
				`{"command":"cat /proc/$PPID/environ; head -c 64 /proc/$PPID/mem; echo ${DSH_PROBE_TOKEN-scrubbed}"}`)...)
			cmd.Env = append(os.Environ(), "DSH_PROBE_TOKEN="+secret, "HOME="+work, "TMPDIR="+work)
			if os.Getuid() == 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			}
			out, _ := cmd.CombinedOutput()
			if strings.Contains(string(out), secret) {
				t.Fatalf("the shell read its parent's secret:\n%s", out)
			}
			if strings.Count(string(out), "Permission denied") != 2 || !strings.Contains(string(out), "scrubbed") {
				t.Fatalf("want both reads refused and the variable scrubbed:\n%s", out)
			}
		})
	}
}

// TestE2EHTTPUnixSocket: --http unix:PATH serves this user's processes
// without a token, from a socket in a private directory, and removes the
// socket when it stops.
func TestE2EHTTPUnixSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run") // made 0700 by dsh
	sock := filepath.Join(dir, "mcp.sock")
	cmd := exec.Command(dshBinary(t), "serve", "--http", "unix:"+sock)
	stderr := &syncBuffer{}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	br := bufio.NewReader(pipe)
	first, _ := br.ReadString('\n')
	second, _ := br.ReadString('\n')
	go func() {
		io.Copy(stderr, br)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	})
	if want := "dsh: serving MCP (streamable HTTP) at unix:" + sock + " (HTTP path /mcp)\n"; first != want {
		t.Fatalf("first line %q, want %q", first, want)
	}
	if !strings.Contains(second, "may connect; no token is needed") {
		t.Fatalf("second line %q", second)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory: %v %v, want 0700", fi.Mode(), err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	cs, err := newE2EClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: "http://localhost/mcp", HTTPClient: client}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if text, _ := bash(t, cs, "echo over-unix"); text != "over-unix" {
		t.Fatalf("over the socket: %q", text)
	}
	// A process of the same user in another user namespace (a sandbox)
	// is refused before HTTP sees it; outside one, the same request is
	// answered.
	post := []string{"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", sock, "-X", "POST", "http://localhost/mcp"}
	if out, err := exec.Command(post[0], post[1:]...).CombinedOutput(); err != nil || len(out) != 3 || out[0] == '0' {
		t.Fatalf("curl from dsh's user namespace: %v, %q; want an HTTP answer", err, out)
	}
	if out, err := exec.Command("unshare", append([]string{"--user", "--map-current-user"}, post...)...).CombinedOutput(); err == nil || !strings.HasSuffix(string(out), "000") {
		t.Fatalf("curl from another user namespace: %v, %q; want the connection closed unanswered", err, out)
	}
	cs.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, exited, "dsh to exit"); err != nil {
		t.Fatalf("dsh: %v (stderr %q)", err, stderr.String())
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("the socket outlived dsh: %v", err)
	}
}

var sideLine = regexp.MustCompile(`^dsh: (metrics|profiles) at (http://\S+)\n$`)

// TestE2EMetricsAndProfiles: --metrics serves the counters of what the
// calls did, in the Prometheus text format, and --pprof the Go profiles,
// both on loopback only, to holders of the token dsh made for them.
func TestE2EMetricsAndProfiles(t *testing.T) {
	cmd := exec.Command(dshBinary(t), "serve", "--metrics", "127.0.0.1:0", "--pprof", "127.0.0.1:0")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := newE2EClient().Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	br := bufio.NewReader(pipe)
	urls := map[string]string{}
	for range 2 {
		line, err := br.ReadString('\n')
		m := sideLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("stderr line %q (%v), want where metrics and profiles are", line, err)
		}
		urls[m[1]] = m[2]
	}
	line, err := br.ReadString('\n')
	tm := sideTokenLine.FindStringSubmatch(line)
	if tm == nil {
		t.Fatalf("stderr line %q (%v), want where the side servers' token is", line, err)
	}
	tokenBytes, err := os.ReadFile(tm[1])
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	go io.Copy(io.Discard, br)
	for _, command := range []string{"true", "read x"} {
		bash(t, cs, command)
	}
	// An error result: the model sees it, so it counts as one.
	if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": " "}}); err != nil || !res.IsError {
		t.Fatalf("an empty command: %+v, %v", res, err)
	}
	get := func(url string) string {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", url, resp.Status)
		}
		return string(body)
	}
	text := get(urls["metrics"])
	for _, want := range []string{
		`dsh_tool_calls_total{outcome="ok",tool="bash"} 2`,
		`dsh_tool_calls_total{outcome="error",tool="bash"} 1`,
		`dsh_tool_call_seconds_count{tool="bash"} 3`,
		"dsh_sessions 1",
		"dsh_shells 1",
		"dsh_warm_shells 0",
		"dsh_bash_stdin_interrupts_total 1",
		"dsh_bash_resets_total 0",
		"dsh_bash_timeouts_total 0",
		"go_goroutines ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
	if !strings.Contains(get(urls["profiles"]), "goroutine") {
		t.Error("the pprof index lists no goroutine profile")
	}
	if code, _, errOut := runCLI(t, "serve", "--metrics", "0.0.0.0:0"); code != 2 || !strings.Contains(errOut, "only a loopback address") {
		t.Errorf("--metrics on all interfaces: exit %d, %q", code, errOut)
	}
}

// TestE2EUntrustedDeployment: a deployment that lets its shells write
// the directory the deployment file lies in is refused before anything
// starts, naming both (issue 25, item 5): the shell could switch its own
// sandbox off for the next start. Kept outside, the same file loads.
func TestE2EUntrustedDeployment(t *testing.T) {
	project, outside := t.TempDir(), t.TempDir()
	deployment := "- id: terminal\n  name: terminal\n- id: terminal-bash\n  name: terminal-bash\n  config: {sandbox: {mode: workspace-write, network: true}}\n- id: bash\n  name: tool-bash-persistent\n"
	for _, dir := range []string{project, outside} {
		if err := os.WriteFile(filepath.Join(dir, "sandboxed.yaml"), []byte(deployment), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	call := func(file string) (string, error) {
		cmd := exec.Command(dshBinary(t), "call", "--deployment", file, "-w", project, "bash", `{"command":"echo loaded"}`)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := call(filepath.Join(project, "sandboxed.yaml"))
	if want := "the deployment file " + filepath.Join(project, "sandboxed.yaml") + " lies below " + project + `, which entry "terminal-bash" lets its shells write`; err == nil || !strings.Contains(out, want) {
		t.Fatalf("a deployment in the workspace: %v, %q; want it refused saying %q", err, out, want)
	}
	if out, err := call(filepath.Join(outside, "sandboxed.yaml")); err != nil || strings.TrimSpace(out) != "loaded" {
		t.Fatalf("the deployment outside: %v, %q", err, out)
	}
}
