//go:build linux

package dshcmd

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// TestCheckCatchesWhatLoadCanKnow: dsh check refuses deployments that load
// but cannot work, naming the file, the line and the entry.
func TestCheckCatchesWhatLoadCanKnow(t *testing.T) {
	t.Setenv(checkInvariantsEnv, "0")
	tests := []struct {
		name, yaml, want string
	}{
		{
			"a typo in backendType",
			"- id: terminal\n  name: terminal\n- id: terminal-bash\n  name: terminal-bash\n- id: bash\n  name: tool-bash-persistent\n  config:\n    timeoutMs: 5000\n    backendType: shel\n",
			`:9: entry "bash" (tool-bash-persistent): backendType "shel": no backend of that type in its terminals service (registered: shell)`,
		},
		{
			"no backend entry",
			"- id: terminal\n  name: terminal\n- id: bash\n  name: tool-bash-persistent\n",
			`:3: entry "bash" (tool-bash-persistent): backendType "shell": no backend of that type in its terminals service (none is registered)`,
		},
		{"an empty file", "", `: no entries: a deployment is a YAML list of plugin entries`},
		{"only comments", "# nothing yet\n", `: no entries`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.yaml)
			code, out, errOut := runCLI(t, "check", "-d", path)
			if code != 2 || out != "" || !strings.HasPrefix(errOut, "dsh: "+path+tt.want) || strings.Count(errOut, "\n") != 1 {
				t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant exit 2 and dsh: %s%s", code, out, errOut, path, tt.want)
			}
		})
	}
}

// backendBinaries builds the backend executables once per test binary.
var backendBinaries struct {
	once sync.Once
	dir  string
	err  error
}

func buildBackend(t testing.TB, name string) string {
	t.Helper()
	backendBinaries.once.Do(func() {
		if backendBinaries.dir, backendBinaries.err = os.MkdirTemp("", "dsh-check-"); backendBinaries.err != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", backendBinaries.dir+"/", "./dsh-backend-ssh", "./dsh-backend-docker").CombinedOutput()
		if err != nil {
			backendBinaries.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if backendBinaries.err != nil {
		t.Fatal(backendBinaries.err)
	}
	return filepath.Join(backendBinaries.dir, name)
}

// sshd is a real OpenSSH server on 127.0.0.1, as the current user, with a
// host key of its own and a user key authorized.
type sshd struct {
	port       int
	user       string
	identity   string
	knownHosts string // lists the server's host key
}

func writeSSHKey(t *testing.T, path string) ssh.PublicKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sshPub
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startSSHD(t *testing.T) *sshd {
	t.Helper()
	const path = "/usr/sbin/sshd"
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no OpenSSH server at %s (.ci/run installs openssh-server)", path)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &sshd{port: freeLoopbackPort(t), user: me.Username, identity: filepath.Join(dir, "user_key"), knownHosts: filepath.Join(dir, "known_hosts")}
	hostPub := writeSSHKey(t, filepath.Join(dir, "host_key"))
	userPub := writeSSHKey(t, s.identity)
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(userPub), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(s.port))
	if err := os.WriteFile(s.knownHosts, []byte(knownhosts.Line([]string{addr}, hostPub)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf("ListenAddress 127.0.0.1\nPort %d\nHostKey %[2]s/host_key\nAuthorizedKeysFile %[2]s/authorized_keys\nPidFile %[2]s/sshd.pid\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\nPrintMotd no\nPrintLastLog no\n", s.port, dir)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		os.MkdirAll("/run/sshd", 0o755)
	}
	cmd := exec.Command(path, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var log syncBuffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	log.waitFor(t, "Server listening on 127.0.0.1", 30*time.Second)
	return s
}

// sshDeployment is a deployment of the ssh backend out of process, at
// the port, with the identity and known hosts given.
func sshDeployment(t *testing.T, port int, user, identity, knownHosts string) string {
	t.Helper()
	return writeFile(t, fmt.Sprintf(`- id: terminal
  name: terminal
- id: remote
  name: %s
  config:
    host: 127.0.0.1
    port: %d
    user: %s
    identityFile: %s
    knownHostsFile: %s
    connectTimeoutSeconds: 10
- id: bash
  name: tool-bash-persistent
  config: { backendType: ssh }
`, buildBackend(t, "dsh-backend-ssh"), port, user, identity, knownHosts))
}

var probeLine = regexp.MustCompile(`(?m)^  (ok    |FAILED) (\S+):(\d+): entry "remote" \(\S+\): backend "ssh"(.*)$`)

// TestCheckProbe: dsh check --probe connects to every backend as a first
// call would, and names the entry and line of one that does not work:
// an SSH host that refuses the connection, one whose key is not trusted;
// and says ok for one that works. Without --probe, check says ok for all
// three: nothing connects at load.
func TestCheckProbe(t *testing.T) {
	t.Setenv(checkInvariantsEnv, "0")
	srv := startSSHD(t)
	untrusted := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(untrusted, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		port     int
		known    string
		ok       bool
		wantNote string
	}{
		{"refused", freeLoopbackPort(t), srv.knownHosts, false, "connection refused"},
		{"untrusted host key", srv.port, untrusted, false, "host key is not trusted"},
		{"works", srv.port, srv.knownHosts, true, "a session started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := sshDeployment(t, tt.port, srv.user, srv.identity, tt.known)
			if code, out, errOut := runCLI(t, "check", "-d", path); code != 0 || !strings.HasSuffix(out, "ok\n") {
				t.Fatalf("check without --probe: exit %d\n%s%s", code, out, errOut)
			}
			code, out, errOut := runCLI(t, "check", "-d", path, "--probe")
			m := probeLine.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no probe line for the ssh backend in:\n%s%s", out, errOut)
			}
			if m[2] != path || m[3] != "3" {
				t.Errorf("probe line names %s:%s, want %s:3 (the entry's line)", m[2], m[3], path)
			}
			switch {
			case tt.ok && (code != 0 || m[1] != "ok    " || !strings.HasSuffix(out, "ok\n")):
				t.Errorf("exit %d, stdout:\n%s%s", code, out, errOut)
			case !tt.ok && (code != 1 || m[1] != "FAILED" || strings.HasSuffix(out, "ok\n") || errOut != "dsh: 1 of 1 probes failed\n"):
				t.Errorf("exit %d, stdout:\n%s%s", code, out, errOut)
			}
			if !strings.Contains(m[4], tt.wantNote) {
				t.Errorf("probe line %q lacks %q", m[0], tt.wantNote)
			}
		})
	}
}

// TestCheckProbeSandbox: the probe of a sandboxed shell backend starts a
// confined shell and says the mode and the Landlock ABI it uses.
func TestCheckProbeSandbox(t *testing.T) {
	t.Setenv(checkInvariantsEnv, "0")
	path := writeFile(t, "- id: terminal\n  name: terminal\n- id: terminal-bash\n  name: terminal-bash\n  config:\n    sandbox: {mode: workspace-write, network: false}\n- id: bash\n  name: tool-bash-persistent\n")
	code, out, errOut := runCLI(t, "check", "-d", path, "--probe", "-w", t.TempDir())
	if code == 2 && os.Getenv("DSH_REQUIRE_SANDBOX") != "1" {
		t.Skipf("no sandbox here: %s", errOut)
	}
	want := regexp.MustCompile(`(?m)^  ok     \S+:3: entry "terminal-bash" \(terminal-bash\): backend "shell", in \S+: a session started \(pid \d+\): /bin/bash, sandbox workspace-write with Landlock ABI \d+, network off$`)
	if code != 0 || !want.MatchString(out) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
