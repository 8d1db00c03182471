//go:build linux

package proc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// withoutPidfd makes the package behave as on a kernel without pidfd
// (Linux < 5.3) for the rest of the test.
func withoutPidfd(t *testing.T) {
	saved := pidfdOpen
	pidfdOpen = func(int, int) (int, error) { return -1, unix.ENOSYS }
	t.Cleanup(func() { pidfdOpen = saved })
}

// pidfdModes runs f once with pidfd and once as on a kernel without it.
func pidfdModes(t *testing.T, f func(t *testing.T)) {
	t.Run("pidfd", f)
	t.Run("no pidfd", func(t *testing.T) {
		withoutPidfd(t)
		f(t)
	})
}

// exitSignal waits for cmd and returns the signal that ended it.
func exitSignal(t *testing.T, cmd *exec.Cmd) syscall.Signal {
	t.Helper()
	cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		t.Fatalf("child was not ended by a signal: %v", cmd.ProcessState)
	}
	return ws.Signal()
}

func TestIdentityRecycledPidIsNeverSignalled(t *testing.T) {
	pidfdModes(t, func(t *testing.T) {
		cmd := startChild(t, "sleep", "1000")
		real, err := IdentityOf(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		// The same pid with another start time is what a recycled pid
		// looks like to a holder of the old identity.
		stale := Identity{PID: real.PID, StartTime: real.StartTime - 1}
		if stale.Alive() {
			t.Error("an identity with a wrong start time is alive")
		}
		if err := stale.Signal(unix.SIGKILL); err != nil {
			t.Errorf("Signal on a recycled identity: %v, want nil (nothing to do)", err)
		}
		if !real.Alive() {
			t.Fatal("the process behind the stale identity was killed")
		}
		// Had the SIGKILL been delivered, the child would have died of
		// KILL, not of the TERM sent now.
		if err := real.Signal(unix.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if sig := exitSignal(t, cmd); sig != unix.SIGTERM {
			t.Errorf("child died of %v, want SIGTERM", sig)
		}
	})
}

func TestIdentityZombieIsNotAlive(t *testing.T) {
	pidfdModes(t, func(t *testing.T) {
		cmd := startChild(t, "sleep", "1000")
		id, err := IdentityOf(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if !id.Alive() {
			t.Fatal("a running child is not alive")
		}
		if err := id.Signal(unix.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// waitid with WNOWAIT blocks until the child has exited but leaves
		// it unreaped: a zombie.
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PID, id.PID, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
			t.Fatal(err)
		}
		if st, err := ReadStat(id.PID); err != nil || !st.Dead() {
			t.Fatalf("child is not a zombie: %+v, %v", st, err)
		}
		if id.Alive() {
			t.Error("a zombie is alive")
		}
		if err := id.Signal(unix.SIGTERM); err != nil {
			t.Errorf("Signal on a zombie: %v, want nil", err)
		}
	})
}

func TestIdentityGoneProcess(t *testing.T) {
	cmd := startChild(t, "true")
	id, err := IdentityOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if id.Alive() {
		t.Error("a reaped process is alive")
	}
	if err := id.Signal(unix.SIGKILL); err != nil {
		t.Errorf("Signal on a reaped process: %v, want nil", err)
	}
}

func TestIdentityProtected(t *testing.T) {
	self, err := IdentityOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	initID, err := IdentityOf(1)
	if err != nil {
		t.Skipf("pid 1 not visible: %v", err)
	}
	// Signal 0 delivers nothing, so a broken guard cannot hurt here.
	for _, id := range []Identity{{}, self, initID} {
		if err := id.Signal(0); !errors.Is(err, ErrProtected) {
			t.Errorf("Signal(%v) = %v, want ErrProtected", id, err)
		}
	}
	h := &pidHandle{id: Identity{PID: unix.Getpgrp()}, pgrp: unix.Getpgrp()}
	if err := h.signalGroup(0); !errors.Is(err, ErrProtected) {
		t.Errorf("signal to our own process group = %v, want ErrProtected", err)
	}
}
