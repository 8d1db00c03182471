//go:build linux

package dshcmd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/plugins/terminal-docker/dockertest"
)

// remoteKeep is a backend executable's deployment for the kill -9 story,
// and how the story reaches its shell.
type remoteKeep struct {
	deployment string
	// inShell is where a file of the dsh's workdir is, as the shell sees
	// it.
	inShell func(work, name string) string
	// gone checks that nothing of the shell is left once its keeper
	// ended it and exited: shell is what `echo $$` printed.
	gone func(t *testing.T, runtime, shell string)
	// containers are the containers of the keepers under runtime (docker
	// only).
	containers func(t *testing.T, runtime string) []string
}

// TestE2EStdioSSHSessionSurvivesKill: the ssh backend executable keeps
// its shell in a keeper of its own, which holds the SSH connection: dsh
// serve --session is killed with SIGKILL while a command runs, and a dsh
// started again gets the command's end, then the same shell, in the
// directory and with the environment it had.
func TestE2EStdioSSHSessionSurvivesKill(t *testing.T) {
	srv := startSSHD(t)
	testRemoteSurvivesKill(t, sshKeep(t, srv))
}

// TestE2EStdioSSHSessionExpires: with --keep-shells 2s the keeper ends
// the remote shell no dsh took back (it closes the connection; sshd's
// shell and what it ran end), and exits.
func TestE2EStdioSSHSessionExpires(t *testing.T) {
	srv := startSSHD(t)
	testRemoteExpires(t, sshKeep(t, srv))
}

func sshKeep(t *testing.T, srv *sshd) remoteKeep {
	return remoteKeep{
		deployment: sshDeployment(t, srv.port, srv.user, srv.identity, srv.knownHosts),
		// The server is this machine, as this user.
		inShell: func(work, name string) string { return filepath.Join(work, name) },
		gone: func(t *testing.T, _, shell string) {
			var pid int
			if _, err := fmt.Sscan(shell, &pid); err != nil {
				t.Fatalf("shell pid %q: %v", shell, err)
			}
			waitExit(t, pid, "the remote shell")
		},
	}
}

// testRemoteSurvivesKill is issue 28's story on a backend executable:
// cd /tmp; export X=1; then a command that runs when dsh is killed; a dsh
// started again with the same session name gets its output and status
// first, then the same shell's directory and environment.
func testRemoteSurvivesKill(t *testing.T, rk remoteKeep) {
	env, runtime := keepEnv(t)
	work := t.TempDir()
	started := mkfifos(t, work, "unit-started")[0]
	args := []string{"--deployment", rk.deployment, "--session", "remote", "--workdir", work}

	cs, cmd := startRemoteSession(t, env, args...)
	if out, _ := bash(t, cs, "cd /tmp; export X=1"); out != "" {
		t.Fatalf("cd; export: %q", out)
	}
	shell, _ := bash(t, cs, "echo $$")
	keepers := keeperPIDs(t, runtime)
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one: the backend executable's", keepers)
	}
	lost := make(chan struct{})
	go func() {
		defer close(lost)
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": fmt.Sprintf("echo > %s; sleep 5; echo done; (exit 3)", rk.inShell(work, "unit-started")),
		}})
	}()
	if _, err := os.ReadFile(started); err != nil {
		t.Fatal(err)
	}
	killDsh(t, cs, cmd)
	<-lost
	if err := unix.Kill(keepers[0], 0); err != nil {
		t.Fatalf("the keeper died with dsh: %v", err)
	}

	cs, cmd = startRemoteSession(t, env, args...)
	out, isErr := bash(t, cs, `echo "$X"; pwd; echo $$`)
	if isErr {
		t.Fatalf("first call after the restart is an error: %q", out)
	}
	first, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(first, "[dsh restarted; this shell was kept") {
		t.Errorf("first line %q, want the kept-shell notice", first)
	}
	for _, want := range []string{"\ndone\n", "\n[exit code: 3]\n"} {
		if strings.Count(out, want) != 1 {
			t.Errorf("first result has %q %d times, want once:\n%s", want, strings.Count(out, want), out)
		}
	}
	if !strings.HasSuffix(out, "\n[exit code: 3]\n1\n/tmp\n"+shell) {
		t.Errorf("want the lost command's status, then 1, /tmp and the same shell (%s):\n%s", shell, out)
	}
	if out, _ := bash(t, cs, "echo again"); out != "again" {
		t.Errorf("second result %q, want only its own output", out)
	}
	closeAndWait(t, cs, cmd)
	if keepers := keeperPIDs(t, runtime); len(keepers) != 1 {
		t.Errorf("keepers %v after stdin's end, want the one that keeps the shell", keepers)
	}
}

// testRemoteExpires: with --keep-shells 2s, the keeper of a backend
// executable ends the shell no dsh takes back, and exits, leaving only its
// lock file and the record of the shell it ended; the next dsh of the
// session says so on its first call.
func testRemoteExpires(t *testing.T, rk remoteKeep) {
	env, runtime := keepEnv(t)
	args := []string{"--deployment", rk.deployment, "--session", "brief", "--keep-shells", "2s", "--workdir", t.TempDir()}
	cs, cmd := startRemoteSession(t, env, args...)
	shell, _ := bash(t, cs, "echo $$")
	keepers := keeperPIDs(t, runtime)
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one", keepers)
	}
	killDsh(t, cs, cmd)
	waitExit(t, keepers[0], "the keeper")
	rk.gone(t, runtime, shell)
	checkExpiredKeeperLeft(t, runtime)

	cs, cmd = startRemoteSession(t, env, args...)
	if out, _ := bash(t, cs, "echo must-not-run"); out != expiredResult {
		t.Errorf("first result after the keeper ended the shell:\n%s\nwant:\n%s", out, expiredResult)
	}
	closeAndWait(t, cs, cmd)
}

// TestE2EStdioDockerSessionSurvivesKill: the docker backend executable
// keeps its shell in a keeper of its own, which holds the exec stream and
// the container.
func TestE2EStdioDockerSessionSurvivesKill(t *testing.T) {
	testRemoteSurvivesKill(t, dockerKeep(t))
}

// TestE2EStdioDockerSessionExpires: with --keep-shells 2s the keeper
// removes the container of the shell no dsh took back, and exits.
func TestE2EStdioDockerSessionExpires(t *testing.T) {
	testRemoteExpires(t, dockerKeep(t))
}

// TestE2EStdioDockerKeeperLostContainerRemoved: a keeper killed with dsh
// leaves its container running; the next dsh of the session says the
// shell could not be kept, and the keeper it starts removes that
// container, found by its labels.
func TestE2EStdioDockerKeeperLostContainerRemoved(t *testing.T) {
	rk := dockerKeep(t)
	env, runtime := keepEnv(t)
	args := []string{"--deployment", rk.deployment, "--session", "lost", "--workdir", t.TempDir()}
	cs, cmd := startRemoteSession(t, env, args...)
	bash(t, cs, "cd /tmp")
	keepers := keeperPIDs(t, runtime)
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one", keepers)
	}
	before := rk.containers(t, runtime)
	if len(before) != 1 {
		t.Fatalf("containers of the keeper %v, want one", before)
	}
	killDsh(t, cs, cmd)
	if err := unix.Kill(keepers[0], unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, keepers[0], "the keeper")
	if left := rk.containers(t, runtime); len(left) != 1 || left[0] != before[0] {
		t.Fatalf("containers after the keeper's death %v, want %v left", left, before)
	}

	cs, cmd = startRemoteSession(t, env, args...)
	out, _ := bash(t, cs, "echo must-not-run")
	if !strings.HasPrefix(out, "[dsh restarted, and this shell could not be kept: its keeper had ended too. The command was not run.]") {
		t.Errorf("first result after the keeper died:\n%s", out)
	}
	if out, _ := bash(t, cs, "echo fresh"); out != "fresh" {
		t.Errorf("the call after: %q", out)
	}
	after := rk.containers(t, runtime)
	if len(after) != 1 || after[0] == before[0] {
		t.Errorf("containers %v, want only the fresh shell's, not %s", after, before[0])
	}
	closeAndWait(t, cs, cmd)
}

func dockerKeep(t testing.TB) remoteKeep {
	host := dockertest.Daemon(t)
	api, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	deployment := writeFile(t, fmt.Sprintf(`- id: terminal
  name: terminal
- id: remote
  name: %s
  config:
    backendType: docker
    host: %s
    image: %s
    network: none
- id: bash
  name: tool-bash-persistent
  config: { backendType: docker }
`, buildBackend(t, "dsh-backend-docker"), host, dockertest.Image))
	rk := remoteKeep{
		deployment: deployment,
		// The workspace is mounted at /workspace.
		inShell: func(_, name string) string { return "/workspace/" + name },
	}
	rk.containers = func(t *testing.T, runtime string) []string {
		t.Helper()
		var ids []string
		for _, dir := range keeperDirs(runtime) {
			res, err := api.ContainerList(t.Context(), client.ContainerListOptions{
				All: true, Filters: make(client.Filters).Add("label", "dsh.keeper="+filepath.Join(dir, "remote")),
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Items {
				ids = append(ids, c.ID)
			}
		}
		return ids
	}
	rk.gone = func(t *testing.T, runtime, _ string) {
		if left := rk.containers(t, runtime); len(left) != 0 {
			t.Errorf("containers left by the keeper: %v", left)
		}
	}
	return rk
}

// startRemoteSession is startSession, with dsh killed when the test ends,
// if it still runs: a test that failed half way must not leave a dsh that
// holds the test's sshd connection open, nor its shell.
func startRemoteSession(t *testing.T, env []string, args ...string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cs, cmd := startSession(t, env, args...)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cs.Close()
		}
	})
	return cs, cmd
}

// TestE2EStdioSSHKeeperLost: what a keeper of SSH shells that dies leaves
// on the remote host. The connection drops, sshd hangs up the shell, and
// the shell ends with its jobs; what it started in a session of its own
// stays (the README says so). The next dsh says the shell could not be
// kept.
func TestE2EStdioSSHKeeperLost(t *testing.T) {
	srv := startSSHD(t)
	rk := sshKeep(t, srv)
	env, runtime := keepEnv(t)
	work := t.TempDir()
	fifos := mkfifos(t, work, "job", "daemon")
	args := []string{"--deployment", rk.deployment, "--session", "lost", "--workdir", work}
	cs, cmd := startRemoteSession(t, env, args...)
	shell := bashPid(t, cs)
	bash(t, cs, fmt.Sprintf("sh -c 'echo $$ > %s; exec sleep 1000' &", fifos[0]))
	job := readPid(t, fifos[0])
	bash(t, cs, fmt.Sprintf("setsid sh -c 'echo $$ > %s; exec sleep 1000' &", fifos[1]))
	daemon := readPid(t, fifos[1])
	t.Cleanup(func() { _ = unix.Kill(daemon, unix.SIGKILL) })
	keepers := keeperPIDs(t, runtime)
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one", keepers)
	}
	killDsh(t, cs, cmd)
	if err := unix.Kill(keepers[0], unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, keepers[0], "the keeper")
	waitExit(t, shell, "the remote shell of a killed keeper")
	waitExit(t, job, "the remote shell's job")
	if err := unix.Kill(daemon, 0); err != nil {
		t.Errorf("the job the remote shell started in a session of its own ended too: %v (the README says it stays)", err)
	}

	cs, cmd = startRemoteSession(t, env, args...)
	out, _ := bash(t, cs, "echo must-not-run")
	if !strings.HasPrefix(out, "[dsh restarted, and this shell could not be kept: its keeper had ended too. The command was not run.]") {
		t.Errorf("first result after the keeper died:\n%s", out)
	}
	closeAndWait(t, cs, cmd)
}

// TestE2EHTTPDockerSessionSurvivesKill: over HTTP with --keep-shells, a
// Docker shell survives kill -9 of dsh in its keeper; the client that had
// the session goes on with the same shell and container.
func TestE2EHTTPDockerSessionSurvivesKill(t *testing.T) {
	rk := dockerKeep(t)
	runtime := t.TempDir()
	t.Cleanup(func() { stopKeepers(t, runtime) })
	env := []string{"XDG_RUNTIME_DIR=" + runtime}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	args := []string{"--http", addr, "--token-file", tokens, "--keep-shells", "1h", "--deployment", rk.deployment, "--workdir", t.TempDir()}

	d := startHTTPEnv(t, env, args...)
	d.client.Transport = bearer{testToken, d.client.Transport}
	cs := d.connect(t)
	if out, _ := bash(t, cs, "cd /tmp; export X=1"); out != "" {
		t.Fatalf("cd; export: %q", out)
	}
	shell, _ := bash(t, cs, "echo $$")
	containers := rk.containers(t, runtime)
	if len(containers) != 1 {
		t.Fatalf("containers %v, want one", containers)
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited

	d2 := startHTTPEnv(t, env, args...)
	out, isErr := bash(t, cs, `echo "$X"; pwd; echo $$`)
	if isErr || !strings.HasPrefix(out, "[dsh restarted; this shell was kept") || !strings.HasSuffix(out, "\n1\n/tmp\n"+shell) {
		t.Fatalf("first call after the restart (error %v):\n%s", isErr, out)
	}
	if after := rk.containers(t, runtime); len(after) != 1 || after[0] != containers[0] {
		t.Errorf("containers %v, want the same one, %s", after, containers[0])
	}
	// A session that ends ends its shell and removes its container.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	d2.stop(t, os.Interrupt)
	if left := rk.containers(t, runtime); len(left) != 0 {
		t.Errorf("containers left after the session ended: %v", left)
	}
}

// BenchmarkE2EStdioDockerSessionReattach is BenchmarkE2EStdioSessionReattach
// on the docker backend: dsh starts, its keeper (the docker executable) is
// found and configured, and the first call takes the kept shell back.
// BenchmarkE2EStdioDockerSessionFresh is the same round without
// --session: a fresh plugin, container and shell each time.
func BenchmarkE2EStdioDockerSessionReattach(b *testing.B) {
	benchSessionRound(b, "--deployment", dockerKeep(b).deployment, "--session", "bench")
}

func BenchmarkE2EStdioDockerSessionFresh(b *testing.B) {
	benchSessionRound(b, "--deployment", dockerKeep(b).deployment)
}
