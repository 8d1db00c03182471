package private

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestDirPrefersTheRuntimeDirectory(t *testing.T) {
	run := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", run)
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(run, "dsh") {
		t.Fatalf("Dir = %s, want it in $XDG_RUNTIME_DIR", dir)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v (%v), want 0700", fi.Mode(), err)
	}
}

func TestDirFallsBackToTheCache(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", home)
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(home, ".cache", "dsh") {
		t.Fatalf("Dir = %s, want ~/.cache/dsh", dir)
	}
}

func TestDirNarrowsAWideMode(t *testing.T) {
	run := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", run)
	if err := os.Mkdir(filepath.Join(run, "dsh"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, want 0700", fi.Mode())
	}
}

func TestDirRefusesWhatIsNotPrivate(t *testing.T) {
	run := t.TempDir()
	home := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", run)
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", home)
	// A symlink where the directory should be: the cache is used instead.
	if err := os.Symlink(t.TempDir(), filepath.Join(run, "dsh")); err != nil {
		t.Fatal(err)
	}
	dir, err := Dir()
	if err != nil || dir != filepath.Join(home, ".cache", "dsh") {
		t.Fatalf("Dir = %q, %v; want the cache, past the symlink", dir, err)
	}
	if err := Check(filepath.Join(run, "dsh")); !errors.Is(err, ErrNotPrivate) {
		t.Fatalf("Check(symlink) = %v", err)
	}
	wide := filepath.Join(t.TempDir(), "wide")
	if err := os.Mkdir(wide, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(wide, 0o777)
	if err := Check(wide); !errors.Is(err, ErrNotPrivate) {
		t.Fatalf("Check(0777) = %v", err)
	}
}

// TestAnotherUserCannotRecreateIt: the attack on a shared temporary
// directory. A command deletes dsh's directory (rm -rf); another user
// tries to put their own in its place. Below a private base they cannot.
// It needs a second user, so it runs as root (CI) and is skipped
// otherwise.
func TestAnotherUserCannotRecreateIt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as another user")
	}
	home := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", home)
	// The home's parent chain must be enterable by nobody for the attempt
	// to get as far as the permission check on the cache directory.
	for d := home; d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil && fi.Mode().Perm()&0o001 == 0 {
			os.Chmod(d, fi.Mode().Perm()|0o001)
			t.Cleanup(func() { os.Chmod(d, fi.Mode().Perm()) })
		}
	}
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "dsh-shell-1234")
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(victim); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("mkdir", victim)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("another user re-created %s", victim)
	}
	t.Logf("as nobody: %s", out)
}

func TestOwnerDirIsPrivateAndNamedByTheOwner(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	for _, tt := range []struct{ owner, name string }{
		{"mcp-ABC234", "owner-mcp-ABC234"},
		{"../x", "owner-h"},
		{"", "owner-h"},
	} {
		dir, err := ownerDir(tt.owner)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(filepath.Base(dir), tt.name) || filepath.Dir(dir) != filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "dsh") {
			t.Errorf("ownerDir(%q) = %s", tt.owner, dir)
		}
		if err := Check(dir); err != nil {
			t.Error(err)
		}
		RemoveOwnerDir(tt.owner)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", dir, err)
		}
	}
}

// A held owner's directory stays while anyone holds it, whoever else tries
// to remove it: a sandboxed shell binds it at its start, while another
// shell of the same owner may be closing (TestConformanceSandboxed saw the
// directory gone under a starting shell). The last release removes it.
func TestHeldOwnerDirStays(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dir, releaseA, err := HoldOwnerDir("agent")
	if err != nil {
		t.Fatal(err)
	}
	_, releaseB, err := HoldOwnerDir("agent")
	if err != nil {
		t.Fatal(err)
	}
	releaseA()
	releaseA() // twice is once
	RemoveOwnerDir("agent")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the directory went while held: %v", err)
	}
	releaseB()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the last release left the directory: %v", err)
	}
}

// Processes share the owner's directory: two dsh processes on one machine
// may serve owners of the same id (a harness names its agents), and a test
// binary per package runs at once under go test ./... (TestConformanceSandboxed
// saw the directory removed under a starting shell by another process).
// A hold in one process keeps the directory from a release in another.
func TestHeldOwnerDirStaysAcrossProcesses(t *testing.T) {
	if os.Getenv("DSH_PRIVATE_HOLDER") != "" {
		holdAndCheck(t, 2000)
		return
	}
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	other := exec.Command(exe, "-test.run=^TestHeldOwnerDirStaysAcrossProcesses$")
	other.Env = append(os.Environ(), "DSH_PRIVATE_HOLDER=1")
	var out strings.Builder
	other.Stdout, other.Stderr = &out, &out
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- other.Wait() }()
	// On a failure here, the other process goes before the temporary
	// directory it works in.
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			other.Process.Kill()
			<-waited
		}
	})
	holdAndCheck(t, 2000)
	err = <-waited
	reaped = true
	if err != nil {
		t.Fatalf("the other process: %v\n%s", err, out.String())
	}
}

// holdAndCheck holds and releases the owner's directory n times, and fails
// if it is ever missing while held.
func holdAndCheck(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		dir, release, err := HoldOwnerDir("agent")
		if err != nil {
			t.Fatalf("hold %d: %v", i, err)
		}
		f, err := os.CreateTemp(dir, "held-")
		if err != nil {
			t.Fatalf("hold %d: the held directory is not there: %v", i, err)
		}
		f.Close()
		os.Remove(f.Name())
		release()
	}
}
