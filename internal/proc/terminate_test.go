//go:build linux

package proc

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testGrace is long enough for a TERM handler in bash to run, and short
// enough that the TERM-ignoring case does not drag.
const testGrace = 2 * time.Second

// stubborn starts, from sh, the processes Terminate must end, and returns
// them with the FIFO on which one of them reports the child it forks when
// it gets SIGTERM.
//   - IGN ignores TERM and HUP: only SIGKILL ends it;
//   - NOHUP is nohup'd and disowned;
//   - DOUBLE is double-forked out of the tree;
//   - FORKER forks a new sleep on TERM (reported on the FIFO) and ignores
//     TERM from then on.
func stubborn(t *testing.T, sh *shell) ([]Identity, *os.File) {
	t.Helper()
	forked := newFIFO(t, t.TempDir()+"/forked")
	sh.run(`bash -c 'trap "" TERM HUP; echo "IGN=$$"; exec sleep 1000' &`)
	ign := sh.expectPID("IGN")
	sh.run(`nohup sleep 1000 >/dev/null 2>&1 & echo "NOHUP=$!"; disown`)
	nohup := sh.expectPID("NOHUP")
	sh.run(`( (sleep 1000 & echo "DOUBLE=$!") )`)
	double := sh.expectPID("DOUBLE")
	sh.run(`bash -c 'trap "sleep 1000 & echo \$! >` + forked.Name() + `; trap \"\" TERM" TERM; trap "" HUP; echo "FORKER=$$"; sleep 1000 & while :; do wait; done' &`)
	forker := sh.expectPID("FORKER")
	return []Identity{ign, nohup, double, forker}, forked
}

// forkedDuringTerm reads the pids FORKER reported, which it has written by
// the time Terminate returns, if it ever forked. Terminate signals both the
// process and its group, so the trap may run more than once before it
// disarms itself: every reported pid is returned.
func forkedDuringTerm(t *testing.T, f *os.File) []Identity {
	t.Helper()
	buf := make([]byte, 256)
	n := 0
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) { n, _ = unix.Read(int(fd), buf) }) // non-blocking
	fields := strings.Fields(string(buf[:max(n, 0)]))
	if len(fields) == 0 {
		t.Fatal("FORKER did not fork on TERM")
	}
	var ids []Identity
	for _, field := range fields {
		pid, err := strconv.Atoi(field)
		if err != nil {
			t.Fatalf("FORKER reported %q", buf[:n])
		}
		st, err := ReadStat(pid)
		if err != nil {
			ids = append(ids, Identity{PID: pid}) // already gone
			continue
		}
		ids = append(ids, Identity{PID: pid, StartTime: st.StartTime})
	}
	return ids
}

func TestTerminate(t *testing.T) {
	for _, withCgroup := range []bool{false, true} {
		name := "tracker only"
		if withCgroup {
			name = "tracker and cgroup"
		}
		t.Run(name, func(t *testing.T) {
			fds := fdCount(t)
			var cg *Cgroup
			if withCgroup {
				cg = testCgroup(t)
			}
			sh := startShell(t, cg)
			tr := NewTracker(sh.id)
			victims, forked := stubborn(t, sh)
			if withCgroup {
				// The tracker cannot find this one; the cgroup can.
				sh.run(`setsid sh -c 'echo "SETSID=$$"; exec sleep 1000' &`)
				victims = append(victims, sh.expectPID("SETSID"))
			}
			tr.Refresh(scan(t)) // what the session's polls do all along
			sh.hangUp()

			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			if err := Terminate(ctx, Target{Shell: sh.id, Tracker: tr, Cgroup: cg, Grace: testGrace}); err != nil {
				t.Fatalf("Terminate: %v", err)
			}
			victims = append(victims, forkedDuringTerm(t, forked)...)
			for _, id := range victims {
				if id.Alive() {
					t.Errorf("%v survived Terminate", id)
				}
			}
			if m := tr.Members(); len(m) != 0 {
				t.Errorf("tracker still lists %v", m)
			}
			if cg != nil {
				if _, err := os.Stat(cg.Path()); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("cgroup %s not removed: %v", cg.Path(), err)
				}
			}
			// Terminate again: nothing left, nothing to do.
			if err := Terminate(ctx, Target{Shell: sh.id, Tracker: tr, Cgroup: cg, Grace: testGrace}); err != nil {
				t.Errorf("a second Terminate: %v", err)
			}
			forked.Close()
			sh.close()
			if got := fdCount(t); got != fds {
				t.Errorf("open descriptors: %d before, %d after", fds, got)
			}
		})
	}
}

// TestTerminateWithoutPidfd runs the kill(2) and timer fallback.
func TestTerminateWithoutPidfd(t *testing.T) {
	withoutPidfd(t)
	sh := startShell(t, nil)
	tr := NewTracker(sh.id)
	sh.run(`bash -c 'trap "" TERM HUP; echo "IGN=$$"; exec sleep 1000' &`)
	ign := sh.expectPID("IGN")
	sh.run(`nohup sleep 1000 >/dev/null 2>&1 & echo "NOHUP=$!"; disown`)
	nohup := sh.expectPID("NOHUP")
	tr.Refresh(scan(t))
	sh.hangUp()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := Terminate(ctx, Target{Shell: sh.id, Tracker: tr, Grace: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []Identity{ign, nohup} {
		if id.Alive() {
			t.Errorf("%v survived", id)
		}
	}
}

// TestTerminateShellIgnoringHangup: a shell that outlives the hangup is
// ended by Terminate's shell phase. It is our child, so "gone" means
// exited, not reaped.
func TestTerminateShellIgnoringHangup(t *testing.T) {
	sh := startShell(t, nil)
	fifo := newFIFO(t, t.TempDir()+"/never")
	// Blocked reading a FIFO, the shell does not notice the terminal going
	// away, and it ignores the signals that say so.
	sh.run(`trap "" HUP TERM; echo "RE""ADY"; read -r x <` + fifo.Name())
	sh.expect(regexp.MustCompile(`READY\r?\n`))
	sh.master.Close()
	<-sh.readDone
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := Terminate(ctx, Target{Shell: sh.id, Tracker: NewTracker(sh.id), Grace: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	<-sh.reaped
	if ws := sh.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != unix.SIGKILL {
		t.Errorf("shell ended with %v, want SIGKILL", sh.cmd.ProcessState)
	}
}

func TestTerminateRespectsContext(t *testing.T) {
	sh := startShell(t, nil)
	tr := NewTracker(sh.id)
	sh.run(`bash -c 'trap "" TERM HUP; echo "IGN=$$"; exec sleep 1000' &`)
	ign := sh.expectPID("IGN")
	tr.Refresh(scan(t))
	sh.hangUp()
	target := Target{Shell: sh.id, Tracker: tr, Grace: time.Hour}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Terminate(ctx, target); !errors.Is(err, context.Canceled) {
		t.Fatalf("Terminate with a cancelled context: %v", err)
	}
	// Cancelled while it waits out the grace period for ign.
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Terminate(ctx, target) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Terminate cancelled: %v", err)
	}
	if !ign.Alive() {
		t.Fatal("the TERM-ignoring process died, but nobody got to SIGKILL")
	}

	// A later call starts over.
	target.Grace = 100 * time.Millisecond
	ctx, cancel = context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := Terminate(ctx, target); err != nil {
		t.Fatal(err)
	}
	if ign.Alive() {
		t.Error("the retry left the process alive")
	}
}

func TestTerminateNow(t *testing.T) {
	cg, _ := newTestCgroup(t) // with one where possible; the tracker alone otherwise
	sh := startShell(t, cg)
	tr := NewTracker(sh.id)
	victims, _ := stubborn(t, sh)
	tr.Refresh(scan(t))
	TerminateNow(Target{Shell: sh.id, Tracker: tr, Cgroup: cg})
	<-sh.reaped
	for _, id := range victims {
		waitGone(t, id)
	}
	TerminateNow(Target{}) // nothing to do, and no panic
}

func TestTerminateNothing(t *testing.T) {
	ctx := context.Background()
	if err := Terminate(ctx, Target{}); err != nil {
		t.Errorf("empty target: %v", err)
	}
	cmd := startChild(t, "true")
	id, err := IdentityOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if err := Terminate(ctx, Target{Shell: id, Tracker: NewTracker(id)}); err != nil {
		t.Errorf("a shell already reaped: %v", err)
	}
}

func TestSurvivorsError(t *testing.T) {
	err := error(&SurvivorsError{PIDs: []int{124, 125}})
	if got, want := err.Error(), "terminal cleanup failed; surviving pids: 124, 125"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrSurvivors) {
		t.Error("does not wrap ErrSurvivors")
	}
	cause := &SurvivorsError{PIDs: []int{7}, Err: unix.EPERM}
	if got, want := cause.Error(), "terminal cleanup failed; surviving pids: 7 (operation not permitted)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(cause, unix.EPERM) || !errors.Is(cause, ErrSurvivors) {
		t.Error("does not wrap both ErrSurvivors and its cause")
	}
	var se *SurvivorsError
	if wrapped := error(cause); !errors.As(wrapped, &se) || !slices.Equal(se.PIDs, []int{7}) {
		t.Error("errors.As does not find the pids")
	}
}

// v1Freezer is a cgroup v1 freezer group. A process frozen there does not
// die from SIGKILL until it is thawed, the one survivor that can be made on
// purpose (the cgroup v2 freezer lets fatal signals through).
type v1Freezer string

func newV1Freezer(t *testing.T) v1Freezer {
	t.Helper()
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Skip(err)
	}
	for line := range strings.Lines(string(mountinfo)) {
		pre, post, _ := strings.Cut(line, " - ")
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(fs) < 3 || fs[0] != "cgroup" || !slices.Contains(strings.Split(fs[2], ","), "freezer") {
			continue
		}
		dir := v1Freezer(filepath.Join(fields[4], "dsh-test-"+strconv.Itoa(os.Getpid())))
		if err := os.Mkdir(string(dir), 0o755); err != nil {
			t.Skipf("cgroup v1 freezer not writable: %v", err)
		}
		t.Cleanup(func() {
			dir.write(t, "freezer.state", "THAWED")
			// The frozen processes die of their pending SIGKILL once
			// thawed, and only an empty group can be removed.
			eventually(t, "the freezer group to empty", func() bool { return os.Remove(string(dir)) == nil })
		})
		return dir
	}
	t.Skip("no cgroup v1 freezer: cannot make a process that survives SIGKILL")
	return ""
}

func (f v1Freezer) write(t *testing.T, file, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(string(f), file), []byte(value), 0); err != nil {
		t.Fatal(err)
	}
}

func (f v1Freezer) freeze(t *testing.T, pid int) {
	t.Helper()
	f.write(t, "cgroup.procs", strconv.Itoa(pid))
	f.write(t, "freezer.state", "FROZEN")
	// Freezing completes asynchronously and has no event.
	eventually(t, "the freezer to freeze", func() bool {
		state, err := os.ReadFile(filepath.Join(string(f), "freezer.state"))
		return err == nil && strings.TrimSpace(string(state)) == "FROZEN"
	})
}

// TestTerminateReportsSurvivors: a process that outlives SIGKILL is
// reported, and a later call succeeds once it can die.
func TestTerminateReportsSurvivors(t *testing.T) {
	for _, withCgroup := range []bool{false, true} {
		t.Run("cgroup="+strconv.FormatBool(withCgroup), func(t *testing.T) {
			freezer := newV1Freezer(t)
			var cg *Cgroup
			if withCgroup {
				cg = testCgroup(t)
			}
			sh := startShell(t, cg)
			tr := NewTracker(sh.id)
			sh.run(`sleep 1000 & echo "JOB=$!"`)
			job := sh.expectPID("JOB")
			tr.Refresh(scan(t))
			freezer.freeze(t, job.PID)
			sh.hangUp()

			target := Target{Shell: sh.id, Tracker: tr, Cgroup: cg, Grace: 100 * time.Millisecond}
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			err := Terminate(ctx, target)
			var se *SurvivorsError
			if !errors.As(err, &se) || !errors.Is(err, ErrSurvivors) || !slices.Equal(se.PIDs, []int{job.PID}) {
				t.Fatalf("Terminate = %v, want survivors [%d]", err, job.PID)
			}
			if want := "terminal cleanup failed; surviving pids: " + strconv.Itoa(job.PID); err.Error() != want {
				t.Errorf("message %q, want %q", err.Error(), want)
			}

			freezer.write(t, "freezer.state", "THAWED")
			if err := Terminate(ctx, target); err != nil {
				t.Fatalf("retry after the survivor could die: %v", err)
			}
			if job.Alive() {
				t.Error("job alive after a successful Terminate")
			}
			if cg != nil {
				if _, err := os.Stat(cg.Path()); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("cgroup not removed by the retry: %v", err)
				}
			}
		})
	}
}
