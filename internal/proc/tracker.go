//go:build linux

package proc

import (
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Tracker remembers every process that belongs to one shell, so that
// cleanup still reaches processes that have left the shell's tree (nohup,
// disown, double forks). Call Refresh with each new Snapshot; the more often
// it runs, the shorter-lived the processes it sees.
//
// Only fork-descendants of the shell are ever adopted. Adoption starts from
// anchors, processes whose identity still matches in the snapshot: the
// shell itself and every tracked member. From each anchor it takes
//   - its children, and
//   - every member of its session, unless that session is this process's
//     own, or the shell's when the shell is not a session leader (a shell
//     started without Setsid shares a session with its parent).
//
// and repeats from what it adopted. Members are anchors too, so a process
// forked by a tracked member after the shell has exited and been reaped is
// still found; a session outlives its leader, and its id cannot be
// reused while any member lives, so session members reached that way are
// still the shell's. A process is missed only when it is born and leaves
// the tree between two Refresh calls after every anchor leading to it is
// gone, or when it starts a new session before any Refresh sees it: the
// cgroup (see Cgroup) is the backstop for both.
//
// A Tracker is safe for concurrent use.
type Tracker struct {
	shell Identity

	mu      sync.Mutex
	members map[int]Identity
}

// NewTracker tracks the processes of shell.
func NewTracker(shell Identity) *Tracker {
	return &Tracker{shell: shell, members: make(map[int]Identity)}
}

// Refresh drops members that have exited or whose pid was recycled, and
// adopts new processes as described on Tracker.
func (t *Tracker) Refresh(s *Snapshot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.buildTree()

	// Sessions never taken whole: our own, and the shell's when the shell
	// did not start one of its own.
	skipSession := map[int]bool{ownSession(): true}
	var work []int // anchors whose children and session are still to take
	if st, ok := s.Get(t.shell.PID); ok && t.shell.PID > 0 && st.StartTime == t.shell.StartTime {
		work = append(work, t.shell.PID)
		if st.Session != t.shell.PID {
			skipSession[st.Session] = true
		}
	}
	for pid, id := range t.members {
		st, ok := s.Get(pid)
		if !ok || st.StartTime != id.StartTime {
			delete(t.members, pid)
			continue
		}
		// A zombie is no longer a member, but its pid cannot be reused
		// while it is unreaped, so it still anchors its session.
		work = append(work, pid)
		if st.Dead() {
			delete(t.members, pid)
		}
	}

	seen := make(map[int]bool, len(work))
	for _, pid := range work {
		seen[pid] = true
	}
	adopt := func(pids []int) {
		for _, pid := range pids {
			if seen[pid] || protectedPID(pid) {
				continue
			}
			seen[pid] = true
			work = append(work, pid)
			st := s.stats[s.index[pid]]
			if id := (Identity{PID: pid, StartTime: st.StartTime}); id != t.shell && !st.Dead() {
				t.members[pid] = id
			}
		}
	}
	for len(work) > 0 {
		pid := work[len(work)-1]
		work = work[:len(work)-1]
		adopt(s.children[pid])
		if sid := s.stats[s.index[pid]].Session; !skipSession[sid] {
			skipSession[sid] = true // taken once is enough
			adopt(s.sessions[sid])
		}
	}
}

// Members returns the tracked processes other than the shell, in pid order.
func (t *Tracker) Members() []Identity {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Identity, 0, len(t.members))
	for _, id := range t.members {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b Identity) int { return a.PID - b.PID })
	return out
}

// ownSession is the session of this process, which never changes: dsh does
// not call setsid on itself.
var ownSession = sync.OnceValue(func() int {
	sid, err := unix.Getsid(0)
	if err != nil {
		return -1
	}
	return sid
})
