//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// sandboxed starts a session under sc, in a fresh workspace it returns.
func sandboxed(t *testing.T, sc SandboxConfig) (*session, string) {
	t.Helper()
	requireSandbox(t)
	ws := t.TempDir()
	b := newTestBackend(t, func(c *Config) { c.Sandbox = sc })
	return spawn(t, b, ws), ws
}

// requireSandbox skips where the kernel has no Landlock ABI 3, unless CI
// demands the sandbox (DSH_REQUIRE_SANDBOX=1, set by .ci/run), where
// that is a failure.
func requireSandbox(t *testing.T) {
	t.Helper()
	_, err := checkSandbox(&SandboxConfig{Mode: "read-only", Network: false})
	if err == nil {
		return
	}
	if os.Getenv("DSH_REQUIRE_SANDBOX") == "1" {
		t.Fatalf("the sandbox is required here (DSH_REQUIRE_SANDBOX=1) but cannot be enforced: %v", err)
	}
	t.Skipf("this machine cannot enforce the sandbox: %v", err)
}

// refused reports whether a command's output says the kernel refused a
// write: Landlock's EACCES, or EROFS from the read-only mounts, which the
// kernel checks first.
func refused(out string) bool {
	return strings.Contains(out, "Permission denied") || strings.Contains(out, "Read-only file system")
}

// lastLine is the command's output without the prompt line.
func outputOf(t *testing.T, s *session, command string) (string, int) {
	t.Helper()
	out, res := mustExec(t, s, command)
	return strings.TrimSpace(out), res.Exec.ExitCode
}

func TestWorkspaceWriteConfinesWrites(t *testing.T) {
	outside := t.TempDir()
	s, ws := sandboxed(t, SandboxConfig{Mode: "workspace-write", Network: true})
	cases := []struct {
		name, command string
		wantExit      int
	}{
		{"write in the workspace", "echo hi > " + filepath.Join(ws, "f") + " && cat " + filepath.Join(ws, "f"), 0},
		{"make a tree in the workspace", "mkdir -p " + ws + "/a/b && mv " + ws + "/a/b " + ws + "/c && ls " + ws, 0},
		{"write in TMPDIR", `f=$(mktemp) && echo x > "$f" && rm "$f"`, 0},
		{"write outside", "echo x > " + filepath.Join(outside, "f"), 1},
		{"truncate outside", "truncate -s0 /etc/hostname", 1},
		{"remove outside", "rmdir " + outside, 1},
		{"write /tmp", "echo x > /tmp/dsh-sandbox-test-$$", 1},
		{"read everything", "head -c1 /etc/passwd >/dev/null", 0},
		{"the null device", "echo x > /dev/null", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := outputOf(t, s, tc.command)
			if code != tc.wantExit {
				t.Fatalf("%s: exit %d, want %d; output %q", tc.command, code, tc.wantExit, out)
			}
			if tc.wantExit != 0 && !refused(out) {
				t.Errorf("%s: output %q, want a permission error", tc.command, out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file outside the workspace exists (%v)", err)
	}
}

func TestReadOnlyWritesNothing(t *testing.T) {
	s, ws := sandboxed(t, SandboxConfig{Mode: "read-only", Network: true})
	for _, command := range []string{
		"echo x > " + filepath.Join(ws, "f"),
		"mkdir " + filepath.Join(ws, "d"),
		"touch /tmp/dsh-sandbox-test-$$",
	} {
		out, code := outputOf(t, s, command)
		if code == 0 || !refused(out) {
			t.Errorf("%s: exit %d, output %q; want a permission error", command, code, out)
		}
	}
	// The shell still works: state, pipes, its terminal.
	if out, code := outputOf(t, s, `x=41; echo $((x+1)) | cat; stty size`); code != 0 || !strings.HasPrefix(out, "42") {
		t.Errorf("read-only shell: exit %d, output %q", code, out)
	}
}

func TestNetworkOffReachesNothing(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("reached\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	probe := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && head -1 <&3`, port)

	open, _ := sandboxed(t, SandboxConfig{Mode: "danger-full-access", Network: true})
	if out, code := outputOf(t, open, probe); code != 0 || out != "reached" {
		t.Fatalf("network on: exit %d, output %q; want the host's listener reached", code, out)
	}

	closed, _ := sandboxed(t, SandboxConfig{Mode: "danger-full-access", Network: false})
	if out, code := outputOf(t, closed, probe); code == 0 || !strings.Contains(out, "Connection refused") {
		t.Errorf("network off: exit %d, output %q; want the connection refused", code, out)
	}
	// Only loopback exists (/proc/net/dev is the namespace's own), and it
	// is up: a server of the shell's own is reachable.
	out, code := outputOf(t, closed, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)
	if code != 0 || out != "lo" {
		t.Errorf("network off: interfaces %q (exit %d), want only lo", out, code)
	}
	loopback := `python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); socket.create_connection(s.getsockname()); print('loopback works')"`
	if out, code := outputOf(t, closed, loopback); code != 0 || out != "loopback works" {
		t.Errorf("network off: loopback: exit %d, output %q", code, out)
	}
	// Even a root shell cannot join dsh's network namespace again.
	if os.Getuid() == 0 {
		if out, code := outputOf(t, closed, "nsenter -t 1 -n true"); code == 0 {
			t.Errorf("nsenter into pid 1's network succeeded: %q", out)
		}
	}
}

func TestSandboxedShellCannotSignalOutside(t *testing.T) {
	requireSandbox(t)
	abi, err := checkSandbox(&SandboxConfig{Mode: "read-only", Network: true})
	if err != nil {
		t.Fatal(err)
	}
	if abi < 6 {
		t.Skipf("Landlock ABI %d cannot scope signals (ABI 6 can)", abi)
	}
	s, _ := sandboxed(t, SandboxConfig{Mode: "read-only", Network: true})
	// dsh itself (here the test process), from inside the sandbox.
	out, code := outputOf(t, s, fmt.Sprintf("kill -0 %d", os.Getpid()))
	if code == 0 || !strings.Contains(out, "Operation not permitted") {
		t.Errorf("kill -0 dsh: exit %d, output %q; want it refused", code, out)
	}
	// Another session's shell, started by the same user.
	other := spawn(t, newTestBackend(t, nil), "")
	out, code = outputOf(t, s, fmt.Sprintf("kill -0 %d", other.pid))
	if code == 0 || !strings.Contains(out, "Operation not permitted") {
		t.Errorf("kill -0 of another session: exit %d, output %q; want it refused", code, out)
	}
	// Its own jobs it still signals.
	if out, code := outputOf(t, s, "sleep 100 & kill $!; wait $!; echo $?"); code != 0 || !strings.HasSuffix(out, "143") {
		t.Errorf("kill of its own job: exit %d, output %q", code, out)
	}
}

func TestSandboxConfigErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		sc    SandboxConfig
		field string
		msg   string
	}{
		{"mode", SandboxConfig{Mode: "strict", Network: true}, "sandbox.mode", `terminal-bash: sandbox.mode must be one of danger-full-access, workspace-write, read-only; got "strict"`},
		{"relative workspace", SandboxConfig{Mode: "workspace-write", Workspace: "src"}, "sandbox.workspace", `terminal-bash: sandbox.workspace: "src" is not an absolute path`},
		{"workspace file", SandboxConfig{Mode: "workspace-write", Workspace: file}, "sandbox.workspace", "terminal-bash: sandbox.workspace: " + file + " is not a directory"},
		{"writable missing", SandboxConfig{Mode: "workspace-write", Writable: []string{"/nonexistent-dsh"}}, "sandbox.writable", "terminal-bash: sandbox.writable: stat /nonexistent-dsh: no such file or directory"},
		{"writable read-only", SandboxConfig{Mode: "read-only", Writable: []string{"/tmp"}}, "sandbox.mode", `terminal-bash: sandbox.workspace and sandbox.writable need mode "workspace-write"; mode is "read-only"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Sandbox = tc.sc
			err := cfg.Validate()
			fe, ok := errors.AsType[*config.FieldError](err)
			if !ok || fe.Field != tc.field || err.Error() != tc.msg {
				t.Fatalf("got %v (%T), want field %s: %s", err, err, tc.field, tc.msg)
			}
		})
	}
}

// A spawn may ask for another mode than the configured one (the owner's,
// set through the terminals service): the shell runs in it, and says so.
func TestSpawnAsksForAMode(t *testing.T) {
	requireSandbox(t)
	b := newTestBackend(t, nil) // configured: danger-full-access
	ws := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	ts, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-ro", OwnerID: "owner", Cwd: ws, Policy: termapi.Policy{Sandbox: "read-only"}})
	if err != nil {
		t.Fatal(err)
	}
	s := ts.(*session)
	defer s.Close(context.Background(), "test over")
	if got := s.Capabilities().Sandbox; got != "read-only" {
		t.Errorf("Capabilities().Sandbox = %q", got)
	}
	if out, code := outputOf(t, s, "touch "+filepath.Join(ws, "f")); code == 0 || !refused(out) {
		t.Errorf("write under read-only: exit %d, %q", code, out)
	}
	if got := spawn(t, b, ws).Capabilities().Sandbox; got != "danger-full-access" {
		t.Errorf("a spawn that asks for nothing runs in %q", got)
	}
	if _, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-bad", Policy: termapi.Policy{Sandbox: "strict"}}); !errors.Is(err, termapi.ErrSandboxUnsupported) {
		t.Errorf("an unknown mode: %v", err)
	}
}
