package backendplugin_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// keeperBuiltin is the builtin this test binary serves as a keeper.
const keeperBuiltin = "bash"

// keeperDir is a private directory for a test's keepers, whose keepers
// are stopped when the test ends.
func keeperDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if name, ok := strings.CutSuffix(e.Name(), ".json"); ok {
				if err := backendplugin.StopKeeper(ctx, dir, name); err != nil {
					t.Errorf("stop keeper %s: %v", name, err)
				}
			}
		}
	})
	return dir
}

func keeperOptions(t *testing.T, dir string) backendplugin.KeeperOptions {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return backendplugin.KeeperOptions{Dir: dir, Name: "shell", Path: self, Builtin: keeperBuiltin, Config: []byte(`{"idleSilenceMs": 600000}`)}
}

func openKeeper(t *testing.T, opts backendplugin.KeeperOptions) *backendplugin.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	c, err := backendplugin.OpenKeeper(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// keeperHost is a dsh stand-in in a process of its own: it opens the
// keeper of dir, spawns a session and runs commands in it, the last one
// without waiting for it when leave is set; then it prints the shell's
// pid and waits to be killed.
func keeperHost(t *testing.T, dir string, leave bool, commands ...string) (host *exec.Cmd, shell int) {
	t.Helper()
	if !leave {
		commands = append(commands, "")
	}
	host = exec.Command(os.Args[0], commands...)
	host.Env = append(os.Environ(), pluginMode+"=keeperhost", keeperDirEnv+"="+dir)
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	host.Stderr = os.Stderr
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		host.Process.Kill()
		host.Wait()
	})
	if _, err := fmt.Fscan(bufio.NewReader(out), &shell); err != nil {
		t.Fatalf("the host did not report its shell: %v", err)
	}
	return host, shell
}

const keeperDirEnv = "DSH_TEST_KEEPER_DIR"

// runKeeperHost is the process keeperHost starts.
func runKeeperHost() int {
	self, _ := os.Executable()
	ctx := context.Background()
	c, err := backendplugin.OpenKeeper(ctx, backendplugin.KeeperOptions{Dir: os.Getenv(keeperDirEnv), Name: "shell", Path: self, Builtin: keeperBuiltin, Config: []byte(`{"idleSilenceMs": 600000}`)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "owner-1", Cwd: "/"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	commands := os.Args[1:]
	leave := commands[len(commands)-1] != ""
	if !leave {
		commands = commands[:len(commands)-1]
	}
	for i, command := range commands {
		sn, err := s.Exec(ctx, termapi.ExecRequest{Command: command, Stream: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if leave && i == len(commands)-1 {
			break // left running: its answer is never read
		}
		for {
			if _, err := sn.Output(ctx); err != nil {
				break
			}
		}
		if _, err := sn.Wait(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println(s.PID())
	select {}
}

// drainSend reads a send's output to its end and returns it with the
// result.
func drainSend(t *testing.T, sn termapi.Send) (string, termapi.SendResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	var out strings.Builder
	for {
		text, err := sn.Output(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(text)
	}
	res, err := sn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), res
}

func execOut(t *testing.T, s termapi.Session, command string) (string, termapi.SendResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	sn, err := s.Exec(ctx, termapi.ExecRequest{Command: command, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	return drainSend(t, sn)
}

// findKept lists the keeper's sessions and returns id's.
func findKept(t *testing.T, c *backendplugin.Client, id string) termapi.Info {
	t.Helper()
	infos, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.ID == id {
			return in
		}
	}
	t.Fatalf("session %s is not listed: %+v", id, infos)
	panic("unreachable")
}

// TestKeeperOutlivesItsHost: a host killed outright (kill -9) while a
// command runs leaves its shell with the keeper. The next host finds it
// with the command's unit and its owner, takes it back, resumes the unit
// (its output from the start, and its exit status, exactly once), and the
// shell's state is as the commands left it.
func TestKeeperOutlivesItsHost(t *testing.T) {
	dir := keeperDir(t)
	host, shell := keeperHost(t, dir, true, "cd /tmp; export X=1", "echo before; sleep 1; echo done; (exit 3)")
	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	host.Wait()
	if err := unix.Kill(shell, 0); err != nil {
		t.Fatalf("the shell died with its host: %v", err)
	}

	c := openKeeper(t, keeperOptions(t, dir))
	in := findKept(t, c, "s1")
	if in.OwnerID != "owner-1" || in.Kept == nil || in.Kept.Unit == nil || in.Kept.Unit.Command != "echo before; sleep 1; echo done; (exit 3)" || !in.Capabilities.Keep {
		t.Fatalf("kept session: %+v, kept %+v", in, in.Kept)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := c.Attach(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if s.PID() != shell {
		t.Fatalf("attached pid %d, want the shell %d", s.PID(), shell)
	}
	if _, err := s.Exec(ctx, termapi.ExecRequest{Command: "true"}); !errors.Is(err, termapi.ErrUnresumed) {
		t.Fatalf("a command before the lost one is resumed: %v, want ErrUnresumed", err)
	}
	sn, err := s.Resume(ctx, termapi.SendRequest{Stream: true, Timeout: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	out, res := drainSend(t, sn)
	// A send that settled before the command's end is waited on again.
	for res.Exec != nil && res.Exec.State == termapi.ExecRunning {
		sn, err := s.StartSend(ctx, termapi.SendRequest{Stream: true, Timeout: waitLong})
		if err != nil {
			t.Fatal(err)
		}
		more, r := drainSend(t, sn)
		out, res = out+more, r
	}
	if out != "before\r\ndone\r\n" && out != "before\ndone\n" {
		t.Errorf("resumed output %q, want before and done once each", out)
	}
	if res.Exec == nil || res.Exec.State != termapi.ExecCompleted || res.Exec.ExitCode != 3 {
		t.Errorf("resumed result %+v (exec %+v), want completed with 3", res, res.Exec)
	}
	if _, err := s.Resume(ctx, termapi.SendRequest{Stream: true}); !errors.Is(err, termapi.ErrNoUnit) {
		t.Errorf("a second resume: %v, want ErrNoUnit", err)
	}
	if out, _ := execOut(t, s, `echo "$X"; pwd`); !strings.Contains(out, "1") || !strings.Contains(out, "/tmp") {
		t.Errorf("state after the host's death: %q", out)
	}
	if err := s.Close(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	pidGone(t, shell)
}

// TestKeeperJournalsBackground: what a background job prints while no
// host holds the session reaches the next host once, as the background
// output of its next command, and never again.
func TestKeeperJournalsBackground(t *testing.T) {
	dir := keeperDir(t)
	fifos := t.TempDir()
	gate, printed := filepath.Join(fifos, "gate"), filepath.Join(fifos, "printed")
	for _, f := range []string{gate, printed} {
		if err := unix.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	host, _ := keeperHost(t, dir, false, fmt.Sprintf("(read x < %s; echo bg-while-away; echo > %s) &", gate, printed))
	host.Process.Kill()
	host.Wait()
	// The job prints now, with no host: it waits for the gate, and says
	// when it has printed.
	if err := os.WriteFile(gate, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(printed); err != nil {
		t.Fatal(err)
	}

	c := openKeeper(t, keeperOptions(t, dir))
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	t.Logf("kept: %+v", findKept(t, c, "s1").Kept)
	s, err := c.Attach(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	_, res := execOut(t, s, "echo next")
	if res.Exec == nil || strings.Count(res.Exec.Background, "bg-while-away") != 1 {
		t.Fatalf("background of the next command: %+v", res.Exec)
	}
	_, res = execOut(t, s, "echo again")
	if res.Exec == nil || strings.Contains(res.Exec.Background, "bg-while-away") {
		t.Fatalf("background output delivered twice: %+v", res.Exec)
	}
	if err := s.Close(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "shell.d")); len(entries) != 0 {
		t.Errorf("files of a closed session stay: %v", entries)
	}
}

// TestKeeperRefusesAnotherUser: the keeper's socket admits this user
// only; a process of another uid that reaches it is refused before any
// call.
func TestKeeperRefusesAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	// A directory the other user can reach; the keeper does not rely on
	// that being impossible.
	dir, err := os.MkdirTemp("", "keeper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		backendplugin.StopKeeper(ctx, dir, "shell")
		os.RemoveAll(dir)
	})
	openKeeper(t, keeperOptions(t, dir))
	sock := filepath.Join(dir, "shell.sock")
	if err := os.Chmod(dir, 0o755); err != nil { // let the other user reach the socket
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	// nobody connects and sends a byte; the keeper closes the connection.
	cmd := exec.Command("/usr/bin/python3", "-c", `
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(20)
try:
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    print(len(s.recv(100)))
except (ConnectionResetError, BrokenPipeError):
    print(0)
`, sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the other user's client: %v: %s", err, out)
	}
	if strings.TrimSpace(string(out)) != "0" {
		t.Fatalf("the keeper answered another user: %s", out)
	}
}

// TestKeeperGetsItsEnvironment: a keeper runs with the environment its
// options give (a backend executable's filtered one), not the host's, and
// passes it on to its shells.
func TestKeeperGetsItsEnvironment(t *testing.T) {
	// Names the shell backend passes on to its shells (Inherit core).
	t.Setenv("LC_DSH_TEST_HOST_ONLY", "host")
	opts := keeperOptions(t, keeperDir(t))
	opts.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LC_DSH_TEST_KEEPER_ONLY=keeper"}
	c := openKeeper(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "env", OwnerID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background(), "test")
	out, _ := execOut(t, s, `echo "${LC_DSH_TEST_KEEPER_ONLY:-none} ${LC_DSH_TEST_HOST_ONLY:-none}"`)
	if strings.TrimSpace(out) != "keeper none" {
		t.Errorf("the shell's environment: %q, want the keeper's (keeper none)", out)
	}
}

// TestOpenKeeperOfExecutableWithoutKeepers: an executable that does not
// serve as a keeper (one built before keepers: go-plugin's Serve turns
// away a start without its handshake) makes OpenKeeper fail with
// ErrKeeperUnsupported, leaving no keeper, so that its caller can start it
// as a plugin instead.
func TestOpenKeeperOfExecutableWithoutKeepers(t *testing.T) {
	dir := keeperDir(t)
	// The script starts the test binary under its own name: a plugin that
	// knows nothing of keepers.
	opts := backendplugin.KeeperOptions{Dir: dir, Name: "old", Path: pluginScript(t, "bash")}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	c, err := backendplugin.OpenKeeper(ctx, opts)
	if err == nil {
		c.Close(ctx)
		t.Fatal("OpenKeeper of an executable without keepers succeeded")
	}
	if !errors.Is(err, backendplugin.ErrKeeperUnsupported) {
		t.Fatalf("OpenKeeper: %v, want ErrKeeperUnsupported", err)
	}
	// Only the lock file stays, as after a keeper.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "old.lock" {
			t.Errorf("OpenKeeper of an executable without keepers left %s", e.Name())
		}
	}
}
