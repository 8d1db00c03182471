//go:build linux

package terminalbash

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestControlChannelCannotBeTakenOver: the shell opens its FIFOs by name
// for every command. A command deletes the control directory (rm -rf
// /dev/shm/dsh-*, a tmp cleaner), and another user re-creates it with a
// FIFO of their own: the shell would run what they write, as dsh's user.
// The directory lives below dsh's private directory, where nobody else can
// create anything. Acting as another user needs root, so the test runs in
// CI and is skipped elsewhere.
func TestControlChannelCannotBeTakenOver(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as another user")
	}
	home := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", home)
	// Let nobody walk down to the cache directory, so that only its own
	// mode can stop them.
	for d := home; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			mode := fi.Mode().Perm()
			os.Chmod(d, mode|0o001)
			t.Cleanup(func() { os.Chmod(d, mode) })
		}
	}
	s := spawn(t, newTestBackend(t, nil), t.TempDir())
	dir := s.ctl.dir
	if !strings.HasPrefix(dir, filepath.Join(home, ".cache", "dsh")+"/") {
		t.Fatalf("control directory %s is not in dsh's private directory", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	attacker := exec.Command("sh", "-c", `mkdir "$1" && mkfifo "$1/in"`, "sh", dir)
	attacker.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := attacker.CombinedOutput(); err == nil {
		t.Fatalf("another user re-created %s", dir)
	} else {
		t.Logf("as nobody: %s", strings.TrimSpace(string(out)))
	}
}
