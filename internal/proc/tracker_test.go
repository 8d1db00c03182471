//go:build linux

package proc

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func scan(t testing.TB) *Snapshot {
	t.Helper()
	s, err := Scan()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func isDescendant(s *Snapshot, root, pid int) bool {
	return slices.ContainsFunc(s.Descendants(root), func(st Stat) bool { return st.PID == pid })
}

// escapes starts, from the shell, the three ways out of the shell's tree
// and returns them once the setsid and double-forked ones have left it.
func escapes(t *testing.T, sh *shell) (nohup, double, setsid Identity) {
	t.Helper()
	sh.run(`nohup sleep 1000 >/dev/null 2>&1 & echo "NOHUP=$!"; disown`)
	nohup = sh.expectPID("NOHUP")
	sh.run(`( (sleep 1000 & echo "DOUBLE=$!") )`)
	double = sh.expectPID("DOUBLE")
	sh.run(`setsid sh -c 'echo "SETSID=$$"; exec sleep 1000' &`)
	setsid = sh.expectPID("SETSID")
	// Reparenting has no event to wait on.
	eventually(t, "the double fork and the setsid process to leave the shell's tree", func() bool {
		s := scan(t)
		return !isDescendant(s, sh.id.PID, double.PID) && !isDescendant(s, sh.id.PID, setsid.PID)
	})
	return nohup, double, setsid
}

// TestTrackerCapturesEscapes shows which escape the tracker sees after the
// fact: the nohup'd job is still the shell's child, the double-forked one
// has left the tree but not the session, the setsid one has left both, so
// only the cgroup holds it (TestCgroupHoldsEscapes).
func TestTrackerCapturesEscapes(t *testing.T) {
	sh := startShell(t, nil)
	nohup, double, setsid := escapes(t, sh)

	tr := NewTracker(sh.id)
	tr.Refresh(scan(t))
	members := tr.Members()
	for _, want := range []Identity{nohup, double} {
		if !slices.Contains(members, want) {
			t.Errorf("tracker members %v miss %v", members, want)
		}
	}
	if slices.Contains(members, setsid) {
		t.Errorf("tracker adopted %v, which left the shell's session and tree before any refresh", setsid)
	}
	if slices.ContainsFunc(members, func(id Identity) bool { return id.PID == sh.id.PID }) {
		t.Error("the shell is among its own members")
	}
}

// TestTrackerKeepsMembersAfterTheShellIsGone: an adopted member stays
// tracked after reparenting, and anchors the adoption of what it forks after
// the shell has been reaped.
func TestTrackerKeepsMembersAfterTheShellIsGone(t *testing.T) {
	sh := startShell(t, nil)
	tr := NewTracker(sh.id)
	dir := t.TempDir()
	release, report := newFIFO(t, dir+"/release"), newFIFO(t, dir+"/report")
	sh.run(`bash -c 'trap "" HUP; echo "PARENT=$$"; read -r _ <` + release.Name() + `; sleep 1000 & echo $! >` + report.Name() + `; wait' &`)
	parent := sh.expectPID("PARENT")
	tr.Refresh(scan(t))
	if !slices.Contains(tr.Members(), parent) {
		t.Fatalf("members %v miss the background job %v", tr.Members(), parent)
	}

	sh.hangUp() // the shell exits and is reaped; the job ignores the HUP
	if sh.id.Alive() {
		t.Fatal("the shell survived the hangup")
	}
	// Now the job forks: there is no shell left to anchor its child.
	writeLine(t, release, "go")
	child := pidLine(t, report)
	t.Cleanup(func() { child.Signal(unix.SIGKILL) })
	tr.Refresh(scan(t))
	members := tr.Members()
	if !slices.Contains(members, parent) || !slices.Contains(members, child) {
		t.Errorf("members %v, want %v and its new child %v", members, parent, child)
	}

	// Dead members are dropped.
	if err := parent.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, parent)
	tr.Refresh(scan(t))
	if slices.Contains(tr.Members(), parent) {
		t.Errorf("a dead member is still tracked: %v", tr.Members())
	}
}

// TestTrackerIgnoresRecycledShell: a tracker whose shell identity does not
// match what has the pid now adopts nothing.
func TestTrackerIgnoresRecycledShell(t *testing.T) {
	sh := startShell(t, nil)
	sh.run(`sleep 1000 & echo "JOB=$!"`)
	sh.expectPID("JOB")
	tr := NewTracker(Identity{PID: sh.id.PID, StartTime: sh.id.StartTime + 1})
	tr.Refresh(scan(t))
	if m := tr.Members(); len(m) != 0 {
		t.Errorf("a tracker for a recycled pid adopted %v", m)
	}
}
