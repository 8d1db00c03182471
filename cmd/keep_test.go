//go:build linux

package dshcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
)

// keepEnv is dsh's environment with a runtime directory of the test's
// own, where dsh keeps its keepers; the test stops them when it ends.
func keepEnv(t testing.TB) (env []string, runtime string) {
	t.Helper()
	runtime = t.TempDir()
	t.Cleanup(func() { stopKeepers(t, runtime) })
	return append(os.Environ(), "XDG_RUNTIME_DIR="+runtime), runtime
}

// keeperDirs are the keeper directories under a runtime directory.
func keeperDirs(runtime string) []string {
	dirs, _ := filepath.Glob(filepath.Join(runtime, "dsh", "keep-*"))
	return dirs
}

// keeperPIDs are the pids of the keepers under a runtime directory, from
// their address files.
func keeperPIDs(t testing.TB, runtime string) []int {
	t.Helper()
	var pids []int
	for _, dir := range keeperDirs(runtime) {
		files := keeperAddresses(dir)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			var a struct{ PID int }
			if err := json.Unmarshal(data, &a); err != nil {
				t.Fatalf("keeper address %s: %v", f, err)
			}
			pids = append(pids, a.PID)
		}
	}
	return pids
}

// keeperAddresses are the keepers' address files in dir (not the HTTP
// sessions' store beside them).
func keeperAddresses(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	return slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "sessions.json" })
}

func stopKeepers(t testing.TB, runtime string) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for _, dir := range keeperDirs(runtime) {
		files := keeperAddresses(dir)
		for _, f := range files {
			if err := backendplugin.StopKeeper(ctx, dir, strings.TrimSuffix(filepath.Base(f), ".json")); err != nil {
				t.Errorf("stop keeper %s: %v", f, err)
			}
		}
	}
}

// startSession starts `dsh serve --session NAME` with env, as an MCP client
// would.
func startSession(t testing.TB, env []string, args ...string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(dshBinary(t), append([]string{"serve"}, args...)...)
	cmd.Env = env
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cs, err := newE2EClient().Connect(t.Context(), &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * deadline}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %q)", err, stderr.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dsh %v stderr:\n%s", args, stderr.String())
		}
	})
	return cs, cmd
}

// killDsh kills dsh outright, as a crash or an OOM kill would, and waits
// for it.
func killDsh(t testing.TB, cs *mcp.ClientSession, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- cs.Close() }()
	recv(t, closed, "the client of a killed dsh to close")
}

// waitExit waits, on a pidfd, for a process that is not this one's child
// to end.
func waitExit(t *testing.T, pid int, what string) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return
	}
	if err != nil {
		t.Fatalf("pidfd of %s (%d): %v", what, pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int((3 * deadline).Milliseconds()))
	for err == unix.EINTR {
		n, err = unix.Poll(fds, int((3 * deadline).Milliseconds()))
	}
	if err != nil || n == 0 {
		t.Fatalf("%s (pid %d) did not end: %v", what, pid, err)
	}
}

// writeFifo opens a fifo for writing (which waits for its reader) and
// writes a line.
func writeFifo(t *testing.T, path string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- os.WriteFile(path, []byte("go\n"), 0o600) }()
	if err := recv(t, done, "the reader of "+filepath.Base(path)); err != nil {
		t.Fatal(err)
	}
}

func mkfifos(t *testing.T, dir string, names ...string) []string {
	t.Helper()
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(dir, n)
		if err := unix.Mkfifo(paths[i], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// TestE2EStdioSessionSurvivesKill: dsh serve --session is killed with
// SIGKILL while a command runs, with a background job that prints while
// no dsh is there. A dsh started again with the same name has the same
// shell: the first result starts with the kept-shell line, then the lost
// command's output and exit status, the background output once, and the
// new command's, in the state the old commands left.
func TestE2EStdioSessionSurvivesKill(t *testing.T) {
	testSessionSurvivesKill(t, nil)
}

// TestE2EStdioSandboxedSessionSurvivesKill: the same with the shell in
// its sandbox, which the keeper keeps too.
func TestE2EStdioSandboxedSessionSurvivesKill(t *testing.T) {
	deployment := filepath.Join(t.TempDir(), "sandboxed.yaml")
	if err := os.WriteFile(deployment, []byte("- id: terminal\n  name: terminal\n- id: terminal-bash\n  name: terminal-bash\n  config: {sandbox: {mode: workspace-write, network: false}}\n- id: bash\n  name: tool-bash-persistent\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(dshBinary(t), "check", "--deployment", deployment).CombinedOutput(); err != nil {
		if os.Getenv("DSH_REQUIRE_SANDBOX") != "1" && strings.Contains(string(out), "sandbox") {
			t.Skipf("this machine cannot enforce the sandbox: %s", out)
		}
		t.Fatalf("check: %v: %s", err, out)
	}
	testSessionSurvivesKill(t, func(t *testing.T, cs *mcp.ClientSession) {
		// Still in its sandbox: the deployment's directory is not the
		// workspace.
		probe := filepath.Join(filepath.Dir(deployment), "probe")
		if out, _ := bash(t, cs, "touch "+probe+"; echo rc=$?"); !strings.Contains(out, "rc=1") {
			t.Errorf("the kept shell wrote outside its workspace: %q", out)
		}
	}, "--deployment", deployment)
}

// testSessionSurvivesKill runs the kill -9 and restart story with dsh's
// args; check, when set, runs on the shell after the last restart.
func testSessionSurvivesKill(t *testing.T, check func(*testing.T, *mcp.ClientSession), args ...string) {
	env, _ := keepEnv(t)
	work := t.TempDir()
	paths := mkfifos(t, work, "bg-gate", "bg-printed", "unit-started", "unit-gate")
	bgGate, bgPrinted, unitStarted, unitGate := paths[0], paths[1], paths[2], paths[3]
	args = append(args, "--session", "work", "--workdir", work)

	cs, cmd := startSession(t, env, args...)
	if out, _ := bash(t, cs, "cd /tmp; export X=1"); out != "" {
		t.Fatalf("cd; export: %q", out)
	}
	shell := bashPid(t, cs)
	bash(t, cs, fmt.Sprintf("(read x < %s; echo bg-while-away; echo > %s) &", bgGate, bgPrinted))
	// The command dsh loses: it says it started, then waits for the gate.
	lost := make(chan struct{})
	go func() {
		defer close(lost)
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": fmt.Sprintf("echo before; echo > %s; read x < %s; echo done; (exit 3)", unitStarted, unitGate),
		}})
	}()
	if _, err := os.ReadFile(unitStarted); err != nil {
		t.Fatal(err)
	}
	killDsh(t, cs, cmd)
	<-lost
	if err := unix.Kill(shell, 0); err != nil {
		t.Fatalf("the shell died with dsh: %v", err)
	}
	// While no dsh runs: the lost command ends, then the background job
	// prints.
	writeFifo(t, unitGate)
	writeFifo(t, bgGate)
	if _, err := os.ReadFile(bgPrinted); err != nil {
		t.Fatal(err)
	}

	cs, cmd = startSession(t, env, args...)
	out, isErr := bash(t, cs, `echo "$X"; pwd; echo $$`)
	if isErr {
		t.Fatalf("first call after the restart is an error: %q", out)
	}
	first, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(first, "[dsh restarted; this shell was kept") || !strings.Contains(first, "exit code 3") {
		t.Errorf("first line %q, want the kept-shell notice with the lost command's status", first)
	}
	// The job printed while the lost command ran (which may have been
	// still reading its gate): that is the command's output.
	for _, want := range []string{"\nbefore\n", "\ndone\n", "\n[exit code: 3]\n", "\nbg-while-away\n", fmt.Sprintf("\n1\n/tmp\n%d", shell)} {
		if strings.Count(out, want) != 1 {
			t.Errorf("first result has %q %d times, want once:\n%s", want, strings.Count(out, want), out)
		}
	}
	if i, j, k := strings.Index(out, "\ndone\n"), strings.Index(out, "\n[exit code: 3]\n"), strings.Index(out, "\n/tmp\n"); i < 0 || j < i || k < j {
		t.Errorf("want the lost command's output and status, then the command's:\n%s", out)
	}
	out, _ = bash(t, cs, "echo again")
	if out != "again" {
		t.Errorf("second result %q, want only its own output", out)
	}

	// Killed again between commands: what a job prints then comes with
	// the next command, as background output, once.
	bash(t, cs, fmt.Sprintf("(read x < %s; echo idle-bg; echo > %s) &", bgGate, bgPrinted))
	killDsh(t, cs, cmd)
	writeFifo(t, bgGate)
	if _, err := os.ReadFile(bgPrinted); err != nil {
		t.Fatal(err)
	}
	cs, cmd = startSession(t, env, args...)
	out, _ = bash(t, cs, "pwd")
	first, _, _ = strings.Cut(out, "\n")
	if !strings.HasPrefix(first, "[dsh restarted; this shell was kept") || !strings.Contains(first, "8 bytes of output arrived (1 line)") {
		t.Errorf("first line %q, want the kept-shell notice with the output that arrived", first)
	}
	if strings.Count(out, "\nidle-bg\n") != 1 || !strings.Contains(out, strayHeader) || !strings.Contains(out, "\nidle-bg\n/tmp\n") {
		t.Errorf("result after the second restart:\n%s", out)
	}
	if out, _ = bash(t, cs, "echo again"); out != "again" {
		t.Errorf("result %q, want only its own output", out)
	}
	if check != nil {
		check(t, cs)
	}
	closeAndWait(t, cs, cmd)
	if err := unix.Kill(shell, 0); err != nil {
		t.Fatalf("the shell ended with its session's stdin: %v", err)
	}
}

// strayHeader is the bash tool's header of background output.
const strayHeader = "[output from background jobs since the previous call]"

// TestE2EStdioSessionExpires: with --keep-shells 2s, a shell no dsh takes
// back is ended with what it started (a job in a session of its own, a
// double-forked one, the shell's cgroup leaves), and its keeper exits and
// leaves no files but its lock and the record of the shell it ended. The
// next dsh of the session says so on its first call, with the reset
// notice, and does not run the command; the call after runs in a fresh
// shell in the workspace.
func TestE2EStdioSessionExpires(t *testing.T) {
	env, runtime := keepEnv(t)
	fifos := mkfifos(t, t.TempDir(), "started", "forked")
	work := t.TempDir()
	args := []string{"--session", "brief", "--keep-shells", "2s", "--workdir", work}
	cs, cmd := startSession(t, env, args...)
	shell := bashPid(t, cs)
	leaves := shellCgroupLeaves(t, shell)
	bash(t, cs, "cd /tmp")
	bash(t, cs, fmt.Sprintf("setsid sh -c 'echo $$ > %s; exec sleep 1000' &", fifos[0]))
	job := readPid(t, fifos[0])
	bash(t, cs, fmt.Sprintf("(sh -c 'echo $$ > %s; exec sleep 1000' &)", fifos[1]))
	orphan := readPid(t, fifos[1])
	keepers := keeperPIDs(t, runtime)
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one", keepers)
	}
	killDsh(t, cs, cmd)
	waitExit(t, shell, "the shell")
	waitExit(t, job, "the shell's job in a session of its own")
	waitExit(t, orphan, "the shell's double-forked job")
	waitExit(t, keepers[0], "the keeper")
	for _, leaf := range leaves {
		if _, err := os.Stat(leaf); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the shell's cgroup %s is left (%v)", leaf, err)
		}
	}
	checkExpiredKeeperLeft(t, runtime)

	cs, cmd = startSession(t, env, args...)
	out, _ := bash(t, cs, "echo must-not-run")
	if out != expiredResult {
		t.Errorf("first result after the keeper ended the shell:\n%s\nwant:\n%s", out, expiredResult)
	}
	if out, _ := bash(t, cs, "pwd"); out != work {
		t.Errorf("pwd in the fresh shell: %q, want the workspace %q", out, work)
	}
	closeAndWait(t, cs, cmd)
}

// expiredResult is the first result of a dsh whose shell its keeper ended
// after --keep-shells 2s.
const expiredResult = "[dsh restarted, and this shell could not be kept: no dsh took it back within --keep-shells (2s), so its keeper ended it. The command was not run.]\nThe persistent bash shell was reset; the next bash call starts from the workspace with a fresh current directory and environment."

// checkExpiredKeeperLeft checks what a keeper that ended its one shell
// after --keep-shells and exited leaves: its lock file (empty: a file
// others may hold is not removed) and the record of the shell it ended.
func checkExpiredKeeperLeft(t *testing.T, runtime string) {
	t.Helper()
	for _, dir := range keeperDirs(runtime) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			switch {
			case strings.HasSuffix(e.Name(), ".lock"):
			case strings.HasSuffix(e.Name(), ".expired"):
				records, _ := os.ReadDir(filepath.Join(dir, e.Name()))
				if len(records) != 1 {
					t.Errorf("%s holds %d records, want the ended shell's", e.Name(), len(records))
				}
			default:
				t.Errorf("the keeper left %s in %s", e.Name(), dir)
			}
		}
	}
}

// shellCgroupLeaves are the cgroups dsh made for a shell: those of its
// process that are not dsh's own (the test's).
func shellCgroupLeaves(t *testing.T, pid int) []string {
	t.Helper()
	read := func(pid string) map[string]string {
		data, err := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
		if err != nil {
			t.Fatal(err)
		}
		out := make(map[string]string)
		for line := range strings.Lines(string(data)) {
			parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(parts) == 3 {
				out[parts[1]] = parts[2]
			}
		}
		return out
	}
	mine := read("self")
	var leaves []string
	for controllers, path := range read(strconv.Itoa(pid)) {
		if path == mine[controllers] {
			continue
		}
		dir := "/sys/fs/cgroup/unified"
		if controllers != "" {
			dir = filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(controllers, "name="))
		}
		leaves = append(leaves, filepath.Join(dir, path))
	}
	return leaves
}

// TestE2EStdioSessionKeeperLost: when the keeper dies with dsh, the next
// dsh of the session says the shell could not be kept, with the reset
// notice, and does not run the command; the call after runs in a fresh
// shell in the workspace.
func TestE2EStdioSessionKeeperLost(t *testing.T) {
	env, runtime := keepEnv(t)
	work := t.TempDir()
	args := []string{"--session", "lost", "--workdir", work}
	cs, cmd := startSession(t, env, args...)
	bash(t, cs, "cd /tmp")
	shell := bashPid(t, cs)
	keepers := keeperPIDs(t, runtime)
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one", keepers)
	}
	killDsh(t, cs, cmd)
	if err := unix.Kill(keepers[0], unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, keepers[0], "the keeper")
	waitExit(t, shell, "the shell of a killed keeper")

	cs, cmd = startSession(t, env, args...)
	out, _ := bash(t, cs, "echo must-not-run")
	want := "[dsh restarted, and this shell could not be kept: its keeper had ended too. The command was not run.]\nThe persistent bash shell was reset; the next bash call starts from the workspace with a fresh current directory and environment."
	if out != want {
		t.Errorf("first result after the keeper died:\n%s\nwant:\n%s", out, want)
	}
	if out, _ := bash(t, cs, "pwd"); out != work {
		t.Errorf("pwd in the fresh shell: %q, want the workspace %q", out, work)
	}
	closeAndWait(t, cs, cmd)
}

// TestE2EStdioSessionDurableOff: a deployment whose terminals service
// has durable: false keeps no shell past dsh, --session or not: no
// keeper starts, and the shell ends with dsh.
func TestE2EStdioSessionDurableOff(t *testing.T) {
	env, runtime := keepEnv(t)
	deployment := filepath.Join(t.TempDir(), "plain.yaml")
	if err := os.WriteFile(deployment, []byte("- id: terminal\n  name: terminal\n  config: {durable: false}\n- id: terminal-bash\n  name: terminal-bash\n- id: bash\n  name: tool-bash-persistent\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--deployment", deployment, "--session", "off", "--workdir", t.TempDir()}
	cs, cmd := startSession(t, env, args...)
	shell := bashPid(t, cs)
	if keepers := keeperPIDs(t, runtime); len(keepers) != 0 {
		t.Fatalf("keepers %v with durable: false", keepers)
	}
	killDsh(t, cs, cmd)
	waitExit(t, shell, "the shell of a killed dsh that keeps nothing")
	cs, cmd = startSession(t, env, args...)
	if out, _ := bash(t, cs, "echo fresh"); out != "fresh" {
		t.Errorf("first result of a dsh that keeps nothing: %q", out)
	}
	closeAndWait(t, cs, cmd)
}

// BenchmarkE2EStdioSessionReattach: one round of a named session after a
// kill -9: dsh starts, the client initializes, and the first bash call
// takes the kept shell back and runs. BenchmarkE2EStdioSessionFresh is the
// same round without --session: a fresh shell each time.
func BenchmarkE2EStdioSessionReattach(b *testing.B) { benchSessionRound(b, "--session", "bench") }

func BenchmarkE2EStdioSessionFresh(b *testing.B) { benchSessionRound(b) }

func benchSessionRound(b *testing.B, args ...string) {
	env, _ := keepEnv(b)
	args = append(args, "--workdir", b.TempDir())
	cs, cmd := startSession(b, env, args...)
	bash(b, cs, "export KEPT=1")
	killDsh(b, cs, cmd)
	b.ResetTimer()
	for b.Loop() {
		cs, cmd := startSession(b, env, args...)
		bash(b, cs, "true")
		b.StopTimer()
		killDsh(b, cs, cmd)
		b.StartTimer()
	}
}

// TestE2EHTTPSessionSurvivesKill: dsh serve --http --keep-shells is killed
// with SIGKILL; started again on the same address, it honours the
// session id a client had, for the token that opened it: the same MCP
// client goes on, its next call gets the same shell with the kept-shell
// line. The same id with another token is refused first, and leaves the
// shell alone.
func TestE2EHTTPSessionSurvivesKill(t *testing.T) {
	runtime := t.TempDir()
	t.Cleanup(func() { stopKeepers(t, runtime) })
	env := []string{"XDG_RUNTIME_DIR=" + runtime}
	tokens := filepath.Join(t.TempDir(), "tokens")
	const otherToken = "another-token-of-another-identity-0123456789"
	if err := os.WriteFile(tokens, []byte(testToken+"\n"+otherToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := []string{"--http", addr, "--token-file", tokens, "--keep-shells", "1h", "--workdir", t.TempDir()}

	d := startHTTPEnv(t, env, args...)
	d.client.Transport = bearer{testToken, d.client.Transport}
	cs := d.connect(t)
	if out, _ := bash(t, cs, "cd /tmp; export X=1"); out != "" {
		t.Fatalf("cd; export: %q", out)
	}
	shell := bashPid(t, cs)
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited

	d2 := startHTTPEnv(t, env, args...)
	// Another token presents the session id first: refused.
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo stolen"}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d2.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+otherToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := d2.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the session id with another token: %s, want 403", resp.Status)
	}
	// The client that had it goes on, on the same shell.
	out, isErr := bash(t, cs, `echo "$X"; pwd; echo $$`)
	if isErr || !strings.HasPrefix(out, "[dsh restarted; this shell was kept") || !strings.HasSuffix(out, fmt.Sprintf("\n1\n/tmp\n%d", shell)) {
		t.Fatalf("first call after the restart (error %v):\n%s", isErr, out)
	}
	if out, _ := bash(t, cs, "echo again"); out != "again" {
		t.Errorf("second call %q", out)
	}
	// A service restart (SIGTERM) keeps it too.
	d2.stop(t, syscall.SIGTERM)
	d3 := startHTTPEnv(t, env, args...)
	if out, _ := bash(t, cs, "echo $$"); !strings.HasPrefix(out, "[dsh restarted; this shell was kept") || !strings.HasSuffix(out, fmt.Sprintf("\n%d", shell)) {
		t.Fatalf("first call after SIGTERM and a restart:\n%s", out)
	}
	// A session that ends ends its shell, as without keeping.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, shell, "the shell of an ended session")
	d3.stop(t, os.Interrupt)
}

// TestE2EHTTPSessionExpiredIsSaid: over HTTP with --keep-shells 2s, a
// shell no dsh took back in time is ended by its keeper; the client that
// comes back with its session id to a dsh started again is told so on its
// first call, with the reset notice, and its next call runs in a fresh
// shell in the workspace.
func TestE2EHTTPSessionExpiredIsSaid(t *testing.T) {
	runtime := t.TempDir()
	t.Cleanup(func() { stopKeepers(t, runtime) })
	env := []string{"XDG_RUNTIME_DIR=" + runtime}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	args := []string{"--http", addr, "--token-file", tokens, "--keep-shells", "2s", "--workdir", work}

	d := startHTTPEnv(t, env, args...)
	d.client.Transport = bearer{testToken, d.client.Transport}
	cs := d.connect(t)
	bash(t, cs, "cd /tmp")
	shell := bashPid(t, cs)
	keepers := keeperPIDs(t, runtime)
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one", keepers)
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	waitExit(t, shell, "the shell no dsh took back")
	waitExit(t, keepers[0], "the keeper")

	startHTTPEnv(t, env, args...)
	out, _ := bash(t, cs, "echo must-not-run")
	if out != expiredResult {
		t.Errorf("first result after the keeper ended the shell:\n%s\nwant:\n%s", out, expiredResult)
	}
	if out, _ := bash(t, cs, "pwd"); out != work {
		t.Errorf("pwd in the fresh shell: %q, want the workspace %q", out, work)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestE2EReplSession: dsh repl --session keeps its shell when its input
// ends; the next dsh repl of that name takes it back, and its first result
// says so.
func TestE2EReplSession(t *testing.T) {
	env, _ := keepEnv(t)
	work := t.TempDir()
	repl := func(input string) string {
		cmd := exec.Command(dshBinary(t), "repl", "--session", "r", "--workdir", work)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(input)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("dsh repl: %v\n%s", err, stderr.String())
		}
		return string(out)
	}
	repl("cd /tmp\nexport X=1\n")
	out := repl("echo \"$X\"; pwd\n")
	// The output as it came, then what the model got.
	if !strings.HasSuffix(out, "[dsh restarted; this shell was kept, with its directory, environment and jobs. While dsh was away: nothing ran and nothing was printed.]\n1\n/tmp\n") {
		t.Fatalf("the second repl's output:\n%s", out)
	}
}
