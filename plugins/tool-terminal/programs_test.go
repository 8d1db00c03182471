package terminaltool_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// These tests drive real programs through the MCP front with the terminal
// tools alone, as a model would: what they assert is what the program did
// (a file written, a history rewritten), read back from outside.

var exitedOK = regexp.MustCompile(`\[exited with code 0\]$`)

func TestVimEditsAFile(t *testing.T) {
	need(t, "vim")
	r := newRig(t, rigOptions{})
	id, first := r.open(map[string]any{"command": "vim --clean notes.txt"})
	if !strings.Contains(first, "[screen 80x24") || !strings.Contains(first, `"notes.txt"`) {
		t.Fatalf("vim's first screen:\n%s", first)
	}
	r.send(id, "ihello from the agent", "Escape")
	if out := r.read(id); !strings.Contains(out, " 1|hello from the agent") {
		t.Fatalf("after typing, the screen is:\n%s", out)
	}
	r.send(id, ":wq", "Enter")
	if out := r.read(id); !exitedOK.MatchString(out) {
		t.Fatalf("after :wq:\n%s", out)
	}
	data, err := os.ReadFile(filepath.Join(r.workdir, "notes.txt"))
	if err != nil || string(data) != "hello from the agent\n" {
		t.Fatalf("notes.txt = %q, %v; want the typed line", data, err)
	}
}

func TestGitRebaseInteractiveReorders(t *testing.T) {
	need(t, "git", "vim")
	r := newRig(t, rigOptions{})
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.org"}, args...)...)
		cmd.Dir = r.workdir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	for _, c := range []string{"first", "second", "third"} {
		if err := os.WriteFile(filepath.Join(r.workdir, c), []byte(c+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", c)
		git("commit", "-q", "-m", c)
	}
	id, screen := r.open(map[string]any{"command": "git -c user.name=t -c user.email=t@example.org -c core.editor='vim --clean' rebase -i HEAD~2"})
	if todo := regexp.MustCompile(`(?m)^ 2\|pick \w+ third`); !todo.MatchString(screen) {
		screen = r.readUntil(id, `pick \w+ third`, todo)
	}
	if !strings.Contains(screen, " 1|pick ") {
		t.Fatalf("the todo list:\n%s", screen)
	}
	// Swap the two lines, save and quit.
	r.send(id, "ddp")
	if out := r.read(id); !regexp.MustCompile(`(?m)^ 1\|pick \w+ third\n 2\|pick \w+ second`).MatchString(out) {
		t.Fatalf("after ddp:\n%s", out)
	}
	r.send(id, ":wq", "Enter")
	out := r.read(id)
	if !exitedOK.MatchString(out) || !strings.Contains(out, "Successfully rebased") {
		t.Fatalf("after :wq:\n%s", out)
	}
	if log := git("log", "--format=%s"); log != "second\nthird\nfirst\n" {
		t.Fatalf("git log after the rebase = %q, want second, third, first", log)
	}
}

func TestPythonREPLOverThreeReads(t *testing.T) {
	need(t, "python3")
	r := newRig(t, rigOptions{})
	id, first := r.open(map[string]any{"command": "python3 -i -q"})
	if !strings.HasSuffix(first, ">>> \n[waiting for input]") {
		t.Fatalf("python's first read:\n%s", first)
	}
	r.send(id, "def f(x):", "Enter")
	if out := r.read(id); !strings.HasSuffix(out, "... \n[waiting for input]") {
		t.Fatalf("read 1:\n%s", out)
	}
	r.send(id, "    return x * 7", "Enter", "Enter")
	if out := r.read(id); !strings.HasSuffix(out, ">>> \n[waiting for input]") {
		t.Fatalf("read 2:\n%s", out)
	}
	r.send(id, "f(6)", "Enter")
	if out := r.read(id); out != ">>> f(6)\n42\n>>> \n[waiting for input]" {
		t.Fatalf("read 3: %q", out)
	}
	r.send(id, "", "C-d")
	if out := r.read(id); !exitedOK.MatchString(out) {
		t.Fatalf("after C-d:\n%s", out)
	}
}

func TestHtopScreenValue(t *testing.T) {
	need(t, "htop")
	r := newRig(t, rigOptions{})
	id, screen := r.open(map[string]any{"command": "htop"})
	if tasks := regexp.MustCompile(`Tasks: \d+`); !tasks.MatchString(screen) {
		screen = r.readUntil(id, tasks.String(), tasks)
	}
	m := regexp.MustCompile(`Tasks: (\d+)`).FindStringSubmatch(screen)
	if n, err := strconv.Atoi(m[1]); err != nil || n < 1 {
		t.Fatalf("tasks on htop's screen: %q", m[1])
	}
	if !regexp.MustCompile(`(?m)^\s*\d+\|\s*PID USER`).MatchString(screen) {
		t.Fatalf("htop's process header is not on the screen:\n%s", screen)
	}
	r.send(id, "q")
	if out := r.read(id); !exitedOK.MatchString(out) {
		t.Fatalf("after q:\n%s", out)
	}
}

func TestLessPagesTwice(t *testing.T) {
	need(t, "less")
	r := newRig(t, rigOptions{})
	var lines strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	if err := os.WriteFile(filepath.Join(r.workdir, "long.txt"), []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	id, first := r.open(map[string]any{"command": "less long.txt"})
	if !strings.Contains(first, " 1|line 1\n") || !strings.Contains(first, "23|line 23\n") {
		t.Fatalf("less's first page:\n%s", first)
	}
	r.send(id, " ")
	if out := r.read(id); !strings.Contains(out, " 1|line 24\n") {
		t.Fatalf("after one page:\n%s", out)
	}
	r.send(id, "", "PageDown")
	if out := r.read(id); !strings.Contains(out, " 1|line 47\n") {
		t.Fatalf("after two pages:\n%s", out)
	}
	r.send(id, "q")
	if out := r.read(id); !exitedOK.MatchString(out) {
		t.Fatalf("after q:\n%s", out)
	}
}

// TestSSHPassphraseByElicitation logs in to a local sshd with a key whose
// passphrase only the person at the client knows: the client is asked,
// ssh gets it, and the model's view never holds it.
func TestSSHPassphraseByElicitation(t *testing.T) {
	need(t, "ssh", "ssh-keygen", "/usr/sbin/sshd")
	const passphrase = "correct horse battery staple 7Q"
	var asked []string
	r := newRig(t, rigOptions{elicit: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, req.Params.Message)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"secret": passphrase}}, nil
	}})
	srv := startSSHD(t, passphrase)
	id, out := r.open(map[string]any{"command": srv.command("echo remote:$((6*7))")})
	for i := 0; i < 5 && !strings.Contains(out, "[exited"); i++ {
		t.Logf("read: %s", out)
		out += "\n" + r.read(id, "timeoutMs", 20000)
	}
	if !exitedOK.MatchString(out) || !strings.Contains(out, "remote:42") || !strings.Contains(out, "the user gave it") {
		t.Fatalf("ssh through the terminal:\n%s\nsshd:\n%s", out, srv.log())
	}
	if len(asked) != 1 || !strings.Contains(asked[0], "Enter passphrase for key") {
		t.Fatalf("the client was asked %q, want once for the key's passphrase", asked)
	}
	if strings.Contains(out, passphrase) || strings.Contains(r.logs.String(), passphrase) {
		t.Fatal("the passphrase reached a result or a log")
	}
}

// sshd is OpenSSH's server on 127.0.0.1 for one test, with a user key
// protected by a passphrase.
type sshd struct {
	dir, key, known string
	port            int
	cmd             *exec.Cmd
	stderr          *syncBuffer
}

func startSSHD(t *testing.T, passphrase string) *sshd {
	t.Helper()
	dir := t.TempDir()
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	s := &sshd{dir: dir, key: filepath.Join(dir, "id_test"), known: filepath.Join(dir, "known_hosts"), stderr: &syncBuffer{}}
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "host_key"))
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", s.key)
	pub, err := os.ReadFile(s.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	hostPub, err := os.ReadFile(filepath.Join(dir, "host_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	known := fmt.Sprintf("[127.0.0.1]:%d %s", s.port, hostPub)
	if err := os.WriteFile(s.known, []byte(known), 0o600); err != nil {
		t.Fatal(err)
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
PrintMotd no
PrintLastLog no
`, s.port, dir)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.cmd = exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	s.cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	s.cmd.Stderr = s.stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		_ = s.cmd.Wait()
	})
	end := time.Now().Add(deadline)
	for !strings.Contains(s.stderr.String(), "Server listening on 127.0.0.1") {
		if time.Now().After(end) || s.cmd.ProcessState != nil {
			t.Fatalf("sshd did not start:\n%s", s.stderr.String())
		}
		time.Sleep(10 * time.Millisecond) // sshd says it listens only in its log
	}
	return s
}

func (s *sshd) log() string { return s.stderr.String() }

// command is the ssh command line that runs remote on the server.
func (s *sshd) command(remote string) string {
	return fmt.Sprintf("ssh -F /dev/null -o IdentitiesOnly=yes -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -i %s -p %d %s@127.0.0.1 '%s'",
		s.known, s.key, s.port, currentUser(), remote)
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}
