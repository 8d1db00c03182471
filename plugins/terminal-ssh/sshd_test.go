package terminalssh

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// sshdPath is OpenSSH's server, which the tests run on 127.0.0.1.
const sshdPath = "/usr/sbin/sshd"

// testServer is a real OpenSSH server on 127.0.0.1, run as the current
// user, with its own host key, the test user's key authorized, and
// everything in a temporary directory.
type testServer struct {
	dir        string
	port       int
	user       string
	identity   string        // the authorized user key
	knownHosts string        // lists the server's host key
	hostKey    ssh.PublicKey // the server's host key
	cmd        *exec.Cmd
	logMu      sync.Mutex
	log        strings.Builder
	logDone    chan struct{}
	stopOnce   sync.Once
}

// startServer starts sshd and returns once it listens. dir must exist and
// be empty. The server, and every session it serves, sees an empty
// directory at each of hide: a mount namespace of its own, with a tmpfs
// on each, makes it another machine as far as those are concerned.
func startServer(dir string, hide ...string) (*testServer, error) {
	if _, err := os.Stat(sshdPath); err != nil {
		return nil, fmt.Errorf("the ssh backend's tests need OpenSSH's server at %s: install openssh-server (apt-get install openssh-server): %w", sshdPath, err)
	}
	me, err := currentUser()
	if err != nil {
		return nil, err
	}
	srv := &testServer{dir: dir, user: me, logDone: make(chan struct{})}
	hostPub, err := writeKey(filepath.Join(dir, "host_key"))
	if err != nil {
		return nil, err
	}
	srv.hostKey = hostPub
	srv.identity = filepath.Join(dir, "user_key")
	userPub, err := writeKey(srv.identity)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(userPub), 0o600); err != nil {
		return nil, err
	}
	if srv.port, err = freePort(); err != nil {
		return nil, err
	}
	srv.knownHosts = filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(srv.knownHosts, []byte(knownhosts.Line([]string{srv.addr()}, hostPub)+"\n"), 0o600); err != nil {
		return nil, err
	}
	config := fmt.Sprintf(`ListenAddress 127.0.0.1
Port %d
HostKey %[2]s/host_key
AuthorizedKeysFile %[2]s/authorized_keys
PidFile %[2]s/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
# Whatever a client could ask to forward or set is allowed, so the tests
# show that the backend asks for none of it.
AcceptEnv *
AllowAgentForwarding yes
PrintMotd no
PrintLastLog no
`, srv.port, dir)
	configPath := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// Debian's sshd refuses to start as root without its privilege
		// separation directory, which the service unit normally creates.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			return nil, err
		}
	}
	srv.cmd = exec.Command(sshdPath, "-D", "-e", "-f", configPath)
	if len(hide) > 0 {
		script := ""
		for _, h := range hide {
			script += "mount -t tmpfs -o mode=0700 tmpfs '" + h + "' && "
		}
		srv.cmd = exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script+`exec "$@"`, "sh", sshdPath, "-D", "-e", "-f", configPath)
	}
	// A clean environment: nothing of the test process can reach the
	// sessions through the server.
	srv.cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	srv.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := srv.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := srv.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", sshdPath, err)
	}
	// sshd -e logs to stderr and says when it listens: wait for that line,
	// or for its exit.
	listening := make(chan struct{})
	go func() {
		defer close(srv.logDone)
		sc := bufio.NewScanner(stderr)
		announced := false
		for sc.Scan() {
			srv.logMu.Lock()
			srv.log.WriteString(sc.Text() + "\n")
			srv.logMu.Unlock()
			if !announced && strings.HasPrefix(sc.Text(), "Server listening on 127.0.0.1") {
				announced = true
				close(listening)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case <-listening:
		return srv, nil
	case <-srv.logDone:
	case <-time.After(30 * time.Second):
	}
	srv.stop()
	return nil, fmt.Errorf("sshd did not start listening:\n%s", srv.logText())
}

func (srv *testServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.port)) }

func (srv *testServer) logText() string {
	srv.logMu.Lock()
	defer srv.logMu.Unlock()
	return srv.log.String()
}

// config is a backend config for this server.
func (srv *testServer) config() *Config {
	cfg := DefaultConfig()
	cfg.Host, cfg.Port, cfg.User = "127.0.0.1", srv.port, srv.user
	cfg.IdentityFile, cfg.KnownHostsFile = srv.identity, srv.knownHosts
	cfg.SpawnCwd = true // the server is this machine: local paths exist there
	return cfg
}

// stop kills the server and every connection it serves, and waits for it.
func (srv *testServer) stop() {
	srv.stopOnce.Do(func() {
		srv.killServing()
		_ = syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGKILL)
		_ = srv.cmd.Wait()
		<-srv.logDone
	})
}

// killServing kills, with SIGKILL, the server's processes that serve
// connections (every descendant named sshd), as if the server machine went
// away: the remote shells lose their terminal, the clients their TCP
// connection.
func (srv *testServer) killServing() {
	for _, pid := range descendants(srv.cmd.Process.Pid) {
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.HasPrefix(string(comm), "sshd") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// The parent is the second field after the command's ")".
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// writeKey writes a new ed25519 private key (OpenSSH format) and its
// public half (.pub), and returns the public key.
func writeKey(path string) (ssh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return sshPub, os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(sshPub), 0o644)
}

// freePort finds a port nobody listens on, by listening on port 0.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func currentUser() (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("find the current user: %w", err)
	}
	return u.Username, nil
}

// newServer starts a server of the test's own, stopped when the test ends:
// for tests that kill it.
func newServer(t *testing.T) *testServer {
	t.Helper()
	srv, err := startServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	return srv
}

// newServerHiding is newServer with hide out of the server's sight (see
// startServer).
func newServerHiding(t *testing.T, hide ...string) *testServer {
	t.Helper()
	srv, err := startServer(t.TempDir(), hide...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	return srv
}
