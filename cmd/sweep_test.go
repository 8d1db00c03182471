//go:build linux

package dshcmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// shellDirs lists the dsh-shell-* directories in dir.
func shellDirs(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "dsh-shell-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSweepAfterKill9: a dsh killed with SIGKILL leaves its shells'
// control directories in the private directory; the next dsh to start a
// shell removes them, and leaves those of a dsh that still runs.
func TestSweepAfterKill9(t *testing.T) {
	runtime := t.TempDir()
	private := filepath.Join(runtime, "dsh")
	env := []string{"XDG_RUNTIME_DIR=" + runtime}

	// One dsh that stays, with a shell.
	live := startHTTPEnv(t, env, "--no-auth")
	cs := live.connect(t)
	defer cs.Close()
	bash(t, cs, "true")
	liveDirs := shellDirs(t, private)
	if len(liveDirs) != 1 {
		t.Fatalf("live dsh: %q", liveDirs)
	}

	// One that is killed outright.
	doomed := startHTTPEnv(t, env, "--no-auth")
	dcs := doomed.connect(t)
	bash(t, dcs, "true")
	if n := len(shellDirs(t, private)); n != 2 {
		t.Fatalf("%d control directories, want 2", n)
	}
	if err := doomed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-doomed.exited
	dcs.Close()
	if n := len(shellDirs(t, private)); n != 2 {
		t.Fatalf("%d control directories after SIGKILL, want 2 (the dead one's left behind)", n)
	}
	// A directory of another format (an older dsh) is left alone.
	old := filepath.Join(private, "dsh-shell-123456")
	if err := os.Mkdir(old, 0o700); err != nil {
		t.Fatal(err)
	}

	// The next dsh that starts a shell sweeps.
	call := exec.Command(dshBinary(t), "call", "bash", `{"command":"true"}`)
	call.Env = append(os.Environ(), env...)
	if out, err := call.CombinedOutput(); err != nil {
		t.Fatalf("dsh call: %v\n%s", err, out)
	}
	got := shellDirs(t, private)
	want := append(liveDirs, old)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after the next start: %q, want the live dsh's and the old-format one: %q", got, want)
	}
	// The live dsh's shell still works.
	if text, _ := bash(t, cs, "echo still"); text != "still" {
		t.Fatalf("live shell: %q", text)
	}
}
