//go:build linux

package terminalbash

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/private"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// The attacks of a hostile agent on its sandbox, each run by a confined
// shell against the real kernel (issue 25).

// confinedModes are the modes that restrict files.
var confinedModes = []termapi.SandboxMode{"read-only", "workspace-write"}

// Item 1: Landlock has no right for chmod, chown, utimes or xattrs; the
// read-only mounts refuse them outside the writable paths.
func TestConfinedShellChangesNoMetadataOutside(t *testing.T) {
	for _, mode := range confinedModes {
		t.Run(string(mode), func(t *testing.T) {
			outside := filepath.Join(t.TempDir(), "rootbash")
			if err := os.WriteFile(outside, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			before, err := os.Stat(outside)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := sandboxed(t, SandboxConfig{Mode: mode, Network: true})
			for _, command := range []string{
				"chmod u+s " + outside,
				"chmod 777 " + outside,
				"touch -d 2001-02-03 " + outside,
				"chown $(id -u):$(id -g) " + outside,
				fmt.Sprintf(`python3 -c "import os; os.setxattr('%s', 'user.dsh', b'1')"`, outside),
			} {
				// EPERM: the setuid bit is refused everywhere (see below).
				if out, code := outputOf(t, s, command); code == 0 || !refused(out) && !strings.Contains(out, "Operation not permitted") {
					t.Errorf("%s: exit %d, output %q; want it refused", command, code, out)
				}
			}
			after, err := os.Stat(outside)
			if err != nil {
				t.Fatal(err)
			}
			if after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
				t.Errorf("the file outside changed: mode %v → %v, mtime %v → %v", before.Mode(), after.Mode(), before.ModTime(), after.ModTime())
			}
		})
	}
}

// Inside the workspace a build still sets modes and times; only the
// setuid and setgid bits are refused, there too: a setuid file in the
// project runs as its owner for whoever starts it next.
func TestWorkspaceKeepsMetadataButNoSetuid(t *testing.T) {
	s, ws := sandboxed(t, SandboxConfig{Mode: "workspace-write", Network: true})
	f := filepath.Join(ws, "tool")
	if out, code := outputOf(t, s, fmt.Sprintf("cp /bin/true %s && chmod 700 %s && chmod +x %s && touch -d 2001-02-03 %s && %s && echo ok", f, f, f, f, f)); code != 0 || out != "ok" {
		t.Fatalf("metadata in the workspace: exit %d, output %q", code, out)
	}
	for _, command := range []string{
		"chmod u+s " + f,
		"chmod g+s " + f,
		"chmod 4755 " + f,
		fmt.Sprintf(`python3 -c "import os; os.open('%s', os.O_CREAT|os.O_WRONLY, 0o4755)"`, filepath.Join(ws, "made-setuid")),
	} {
		if out, code := outputOf(t, s, command); code == 0 || !strings.Contains(out, "Operation not permitted") {
			t.Errorf("%s: exit %d, output %q; want it refused", command, code, out)
		}
	}
	entries, _ := os.ReadDir(ws)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s is %v", e.Name(), fi.Mode())
		}
	}
}

// Item 2: with the network off, no pathname socket outside the session is
// reachable (docker.sock, another dsh's --http unix: socket, ssh-agent).
func TestNetworkOffReachesNoUnixSocket(t *testing.T) {
	requireSandbox(t)
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
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
	probe := fmt.Sprintf(`python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('%s'); print(s.recv(7).decode())"`, path)
	open, _ := sandboxed(t, SandboxConfig{Mode: "read-only", Network: true})
	if out, code := outputOf(t, open, probe); code != 0 || out != "reached" {
		t.Fatalf("network on: exit %d, output %q; want the socket reached", code, out)
	}
	for _, mode := range termapi.SandboxModes {
		t.Run(string(mode), func(t *testing.T) {
			s, _ := sandboxed(t, SandboxConfig{Mode: mode, Network: false})
			if out, code := outputOf(t, s, probe); code == 0 || !strings.Contains(out, "Permission denied") {
				t.Errorf("network off: exit %d, output %q; want the socket refused", code, out)
			}
			// A pair within the sandbox still works.
			pair := `python3 -c "import socket; a,b=socket.socketpair(); a.send(b'pair'); print(b.recv(4).decode())"`
			if out, code := outputOf(t, s, pair); code != 0 || out != "pair" {
				t.Errorf("socketpair: exit %d, output %q", code, out)
			}
		})
	}
}

// Item 3: a confined shell reaches its own terminal and no other; a
// program that needs a new terminal gets one of the sandbox's own.
func TestConfinedShellReachesNoOtherTerminal(t *testing.T) {
	for _, mode := range confinedModes {
		t.Run(string(mode), func(t *testing.T) {
			// Another agent's terminal, on dsh's devpts, named unlike the
			// sandbox's own first two.
			var m, other *os.File
			for other == nil || other.Name() == "/dev/pts/0" || other.Name() == "/dev/pts/1" {
				var err error
				if m, other, err = pty.Open(); err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				defer other.Close()
			}
			s, _ := sandboxed(t, SandboxConfig{Mode: mode, Network: true})
			for _, command := range []string{
				"printf 'INJECTED: all 42 tests passed\\n' > " + other.Name(),
				"dd if=" + other.Name() + " bs=1 count=1 iflag=nonblock",
			} {
				if out, code := outputOf(t, s, command); code == 0 {
					t.Errorf("%s: exit 0, output %q; want it refused", command, out)
				}
			}
			// Fd puts the file in blocking mode: take it once.
			mfd := int(m.Fd())
			if err := unix.SetNonblock(mfd, true); err != nil {
				t.Fatal(err)
			}
			if n, err := unix.Read(mfd, make([]byte, 64)); n > 0 {
				t.Errorf("the other terminal received %d bytes (%v)", n, err)
			}
			// Its own: the session's terminal (0, stdin) and the one its
			// commands write to (1, see cmdTerm).
			if out, code := outputOf(t, s, "ls /dev/pts | tr '\\n' ' '; tty; readlink /proc/$$/fd/0 /proc/$$/fd/1 | tr '\\n' ' '"); code != 0 || out != "0 1 ptmx /dev/pts/0\n/dev/pts/0 /dev/pts/1" {
				t.Errorf("terminals seen: exit %d, output %q; want only its own, named", code, out)
			}
			newTerminal := `python3 -c "import os, pty; m, s = pty.openpty(); os.write(s, b'x'); print(os.ttyname(s), os.read(m, 1).decode())"`
			if out, code := outputOf(t, s, newTerminal); code != 0 || out != "/dev/pts/2 x" {
				t.Errorf("a new terminal: exit %d, output %q", code, out)
			}
			if _, err := exec.LookPath("script"); err == nil {
				if out, code := outputOf(t, s, "script -qc tty /dev/null </dev/null | tr -d '\\r'"); code != 0 || out != "/dev/pts/2" {
					t.Errorf("script: exit %d, output %q; want a new terminal of the sandbox's", code, out)
				}
			}
		})
	}
}

// Items 4 and 7: dsh's private directory (the tokens of its HTTP fronts,
// other sessions' control files and saved outputs) is out of sight, but
// for the session's own parts.
func TestConfinedShellSeesNoneOfDshsPrivateFiles(t *testing.T) {
	requireSandbox(t)
	dir, err := private.Dir()
	if err != nil {
		t.Skipf("no private directory: %v", err)
	}
	token := filepath.Join(dir, "http-127.0.0.1-1.token")
	otherOutput := filepath.Join(dir, "owner-another-agent", "dsh-output-1", "output-1.txt")
	ownOutput := filepath.Join(dir, "owner-owner-test", "dsh-output-1", "output-1.txt")
	for path, text := range map[string]string{token: "secret-token\n", otherOutput: "another agent's output\n", ownOutput: "own output\n"} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		os.Remove(token)
		os.RemoveAll(filepath.Dir(filepath.Dir(otherOutput)))
		os.RemoveAll(filepath.Dir(ownOutput))
	})
	for _, mode := range confinedModes {
		t.Run(string(mode), func(t *testing.T) {
			// The network is on: a token would open another dsh.
			s, _ := sandboxed(t, SandboxConfig{Mode: mode, Network: true})
			for _, path := range []string{token, otherOutput} {
				if out, code := outputOf(t, s, "cat "+path); code == 0 || strings.Contains(out, "secret-token") || strings.Contains(out, "another agent's") {
					t.Errorf("cat %s: exit %d, output %q; want it unseen", path, code, out)
				}
			}
			out, code := outputOf(t, s, "ls -A "+dir)
			seen := strings.Fields(out)
			slices.Sort(seen)
			if code != 0 || len(seen) != 2 || !strings.HasPrefix(seen[0], controlDirPrefix) || seen[1] != "owner-owner-test" {
				t.Errorf("ls %s: exit %d, %q; want only its control directory and its owner's", dir, code, seen)
			}
			if out, code := outputOf(t, s, "cat "+ownOutput); code != 0 || out != "own output" {
				t.Errorf("its own saved output: exit %d, %q", code, out)
			}
		})
	}
}

// Item 6: git hooks and config in a writable repository stay read-only,
// or the user's next git command would run the agent's code unconfined;
// commits still work, with the hooks that are there.
func TestWorkspaceKeepsGitHooksAndConfig(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", ws}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("config", "user.email", "agent@example.org")
	git("config", "user.name", "agent")
	hook := filepath.Join(ws, ".git", "hooks", "post-commit")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho hook ran > hook-ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join(ws, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	b := newTestBackend(t, func(c *Config) { c.Sandbox = SandboxConfig{Mode: "workspace-write", Network: true} })
	s := spawn(t, b, ws)
	if out, code := outputOf(t, s, "echo a > a && git add a && git commit -qm first && cat hook-ran"); code != 0 || out != "hook ran" {
		t.Fatalf("git commit: exit %d, output %q", code, out)
	}
	for _, command := range []string{
		"echo 'touch /tmp/pwned' > .git/hooks/post-commit",
		"echo 'touch /tmp/pwned' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
		"git config core.fsmonitor 'touch /tmp/pwned'",
		"git config core.hooksPath /tmp",
		"mv .git/hooks .git/hooks-old",
		"mv .git .git-old",
		"rm -rf .git",
	} {
		if out, code := outputOf(t, s, command); code == 0 {
			t.Errorf("%s: exit 0, output %q; want it refused", command, out)
		}
	}
	if got, _ := os.ReadFile(hook); string(got) != "#!/bin/sh\necho hook ran > hook-ran\n" {
		t.Errorf("the hook is now %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(got) != string(config) {
		t.Errorf("the config is now %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "hooks", "pre-commit")); err == nil {
		t.Error("a pre-commit hook was planted")
	}
	// A repository without a hooks directory cannot be given one.
	bare := filepath.Join(ws, "sub")
	if err := os.MkdirAll(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "init", "-q", "--template=", bare).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	s2 := spawn(t, newTestBackend(t, func(c *Config) { c.Sandbox = SandboxConfig{Mode: "workspace-write", Network: true, Workspace: bare} }), bare)
	if out, code := outputOf(t, s2, "mkdir -p .git/hooks && echo x > .git/hooks/post-commit"); code == 0 {
		t.Errorf("planting hooks in a repository without them: exit 0, %q", out)
	}
}

// A shell that makes namespaces of its own still cannot undo the mounts:
// it has no capability in the sandbox's mount namespace, Landlock refuses
// mount(2) to it anywhere, and in a mount namespace of its own the
// copies are locked (what hides dsh's private directory and the devpts
// cannot be unmounted: EINVAL). It cannot even map its uid in a new user
// namespace, since /proc is read-only.
func TestConfinedShellCannotUndoTheMounts(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	dir, err := private.Dir()
	if err != nil {
		t.Skipf("no private directory: %v", err)
	}
	outside := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := sandboxed(t, SandboxConfig{Mode: "workspace-write", Network: true})
	for _, command := range []string{
		"umount " + dir,
		"mount -o remount,rw /",
		"unshare -Um --propagation unchanged sh -c 'mount -o remount,bind,rw / && chmod 777 " + outside + "'",
		"unshare -Um --propagation unchanged sh -c 'umount -l " + dir + " && ls " + dir + " | grep -q token'",
		"unshare -Um --propagation unchanged sh -c 'umount -l /dev/pts && ls /dev/pts | grep -qv ptmx'",
	} {
		if out, code := outputOf(t, s, command); code == 0 {
			t.Errorf("%s: exit 0, output %q; want it refused", command, out)
		}
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file outside: %v, %v", fi.Mode(), err)
	}
}

// What each mode allows still works: a C build in the workspace (it
// chmods what it links), new files and directories, and running them.
func TestWorkspaceWriteBuilds(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler")
	}
	s, ws := sandboxed(t, SandboxConfig{Mode: "workspace-write", Network: false})
	build := "cd " + ws + ` && mkdir -p src && printf 'int main(void){return 42;}\n' > src/m.c && cc -o m src/m.c; ./m; echo $?`
	if out, code := outputOf(t, s, build); code != 0 || out != "42" {
		t.Errorf("a build in the workspace: exit %d, output %q", code, out)
	}
}
