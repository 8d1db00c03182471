//go:build linux

package proc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultGrace is how long Terminate waits after each signal when
// Target.Grace is zero.
const DefaultGrace = 3 * time.Second

// ErrSurvivors is wrapped by the error Terminate returns when processes it
// had to end are still running.
var ErrSurvivors = errors.New("terminal cleanup failed")

// SurvivorsError lists the processes that outlived Terminate.
type SurvivorsError struct {
	PIDs []int
	// Err is the first failure met on the way (a signal the kernel
	// refused, an unreadable /proc), which often explains the survivors;
	// nil when there was none.
	Err error
}

func (e *SurvivorsError) Error() string {
	pids := make([]string, len(e.PIDs))
	for i, pid := range e.PIDs {
		pids[i] = strconv.Itoa(pid)
	}
	msg := "terminal cleanup failed; surviving pids: " + strings.Join(pids, ", ")
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

func (e *SurvivorsError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrSurvivors}
	}
	return []error{ErrSurvivors, e.Err}
}

// Target is what Terminate ends.
type Target struct {
	// Shell is the shell process; the zero Identity skips the shell phase.
	Shell Identity
	// Tracker holds the shell's processes; nil when there is none.
	Tracker *Tracker
	// Cgroup is the shell's cgroup; nil where cgroups are unavailable.
	Cgroup *Cgroup
	// Grace is the wait after each signal before escalating; zero means
	// DefaultGrace.
	Grace time.Duration
}

// Terminate ends everything the shell started, and the shell, and returns
// only when they are gone or with an error saying which survived. The
// caller has already closed the PTY master, which hangs the session up.
//
// In order:
//  1. rescan: refresh the tracker from a new Snapshot;
//  2. SIGTERM (and SIGCONT, so stopped jobs can act on it) to every
//     tracked process and to each process group one of them leads; wait
//     up to Grace; rescan, so processes forked meanwhile are included;
//     SIGKILL whatever is left and the newcomers; wait up to Grace;
//  3. the shell: SIGHUP, SIGTERM and SIGCONT (an interactive bash ignores
//     TERM but exits on HUP), wait up to Grace, then SIGKILL and wait;
//  4. step 2 again for processes forked while the shell was exiting;
//  5. the cgroup, if any: cgroup.kill, wait up to Grace for it to empty,
//     remove it. This catches whatever the tracker never saw.
//
// Every wait ends as soon as the processes are gone: a pidfd becomes
// readable when its process exits, and the cgroup reports emptiness
// through inotify. A zombie counts as gone; the shell is the caller's
// child and the caller reaps it (cmd.Wait) whenever it likes.
//
// It returns nil only when neither the shell nor any tracked process is
// alive and the cgroup, if any, is empty and removed; otherwise a
// *SurvivorsError
// (wrapping ErrSurvivors). When ctx ends first it returns ctx.Err()
// wrapped. A later call starts over and may succeed. Pid 1, this process
// and this process's group are never signalled.
func Terminate(ctx context.Context, t Target) error {
	r := &terminator{target: t, grace: t.Grace, held: make(map[Identity]*pidHandle)}
	if r.grace <= 0 {
		r.grace = DefaultGrace
	}
	defer r.close()
	if err := r.run(ctx); err != nil {
		return fmt.Errorf("terminate: %w", err)
	}
	return r.result()
}

// terminator is one Terminate call.
type terminator struct {
	target Target
	grace  time.Duration
	// held has a handle on every process this call has signalled or
	// looked at, the shell excluded.
	held  map[Identity]*pidHandle
	shell *pidHandle
	// cause is the first failure met, for the survivors' report; hard is
	// a failure that makes a clean result impossible to claim.
	cause, hard error
}

func (r *terminator) run(ctx context.Context) error {
	if err := r.sweep(ctx); err != nil {
		return err
	}
	if err := r.stopShell(ctx); err != nil {
		return err
	}
	if err := r.sweep(ctx); err != nil {
		return err
	}
	return r.emptyCgroup(ctx)
}

// sweep ends the tracked processes: TERM, wait, rescan, KILL, wait.
func (r *terminator) sweep(ctx context.Context) error {
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGKILL} {
		hs := r.live()
		if len(hs) == 0 {
			return nil
		}
		for _, h := range hs {
			r.signal(h, sig)
		}
		if err := waitExited(ctx, hs, time.Now().Add(r.grace)); err != nil {
			return err
		}
	}
	return nil
}

// live rescans and returns a handle on every tracked process, plus every
// process held earlier, that has not exited.
func (r *terminator) live() []*pidHandle {
	r.rescan()
	if tr := r.target.Tracker; tr != nil {
		for _, id := range tr.Members() {
			if _, ok := r.held[id]; ok {
				continue
			}
			h, err := openHandle(id)
			r.fail(err)
			if h != nil {
				r.held[id] = h
			}
		}
	}
	var out []*pidHandle
	for _, h := range r.held {
		if !h.exited() {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b *pidHandle) int { return a.id.PID - b.id.PID })
	return out
}

func (r *terminator) rescan() {
	if r.target.Tracker == nil {
		return
	}
	s, err := Scan()
	if err != nil {
		r.failHard(err)
		return
	}
	r.target.Tracker.Refresh(s)
}

// signal sends sig to the process and to the group it leads. TERM is
// followed by CONT: a stopped process acts on TERM only once continued.
func (r *terminator) signal(h *pidHandle, sig unix.Signal) {
	sigs := []unix.Signal{sig}
	if sig == unix.SIGTERM {
		sigs = append(sigs, unix.SIGCONT)
	}
	for _, sig := range sigs {
		r.fail(h.signal(sig))
		r.fail(h.signalGroup(sig))
	}
}

// stopShell ends the shell once its processes are gone.
func (r *terminator) stopShell(ctx context.Context) error {
	if r.target.Shell.PID <= 0 {
		return nil
	}
	h, err := openHandle(r.target.Shell)
	r.fail(err)
	if h == nil {
		return nil
	}
	r.shell = h
	for _, sigs := range [][]unix.Signal{{unix.SIGHUP, unix.SIGTERM, unix.SIGCONT}, {unix.SIGKILL}} {
		if h.exited() {
			return nil
		}
		for _, sig := range sigs {
			r.fail(h.signal(sig))
		}
		if err := waitExited(ctx, []*pidHandle{h}, time.Now().Add(r.grace)); err != nil {
			return err
		}
	}
	return nil
}

// emptyCgroup kills the cgroup, waits for it to empty and removes it.
func (r *terminator) emptyCgroup(ctx context.Context) error {
	c := r.target.Cgroup
	if c == nil || c.isRemoved() {
		return nil
	}
	if err := c.Kill(); err != nil {
		r.failHard(err)
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, r.grace)
	err := c.WaitEmpty(wctx)
	cancel()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		// Still populated at the deadline: result lists who is left.
		if !errors.Is(err, context.DeadlineExceeded) {
			r.failHard(err)
		}
	default:
		r.failHard(c.Close())
	}
	return nil
}

// result checks, once more and after all waiting, who is left.
func (r *terminator) result() error {
	var pids []int
	for _, h := range r.held {
		if !h.exited() {
			pids = append(pids, h.id.PID)
		}
	}
	// A member whose handle could not be opened was never signalled.
	r.rescan()
	if tr := r.target.Tracker; tr != nil {
		for _, id := range tr.Members() {
			if _, ok := r.held[id]; !ok && id.Alive() {
				pids = append(pids, id.PID)
			}
		}
	}
	if r.shell != nil && !r.shell.exited() {
		pids = append(pids, r.shell.id.PID)
	}
	if c := r.target.Cgroup; c != nil && !c.isRemoved() {
		procs, err := c.Procs()
		r.failHard(err)
		pids = append(pids, procs...)
	}
	slices.Sort(pids)
	pids = slices.Compact(pids)
	switch {
	case len(pids) > 0:
		return &SurvivorsError{PIDs: pids, Err: cmp.Or(r.hard, r.cause)}
	case r.hard != nil:
		return fmt.Errorf("terminate: %w", r.hard)
	}
	return nil
}

func (r *terminator) fail(err error) {
	if r.cause == nil {
		r.cause = err
	}
}

func (r *terminator) failHard(err error) {
	if r.hard == nil {
		r.hard = err
	}
	r.fail(err)
}

func (r *terminator) close() {
	for _, h := range r.held {
		h.close()
	}
	if r.shell != nil {
		r.shell.close()
	}
}

// TerminateNow is the last resort for a host that is exiting: it sends
// SIGKILL to the cgroup, the tracked processes, the shell, and processes
// the tracker finds after that, and returns without waiting. It never
// blocks on a process and never panics. The cgroup directory is left
// behind (it cannot be removed before its processes are reaped); a later
// NewCgroup with the same name removes it.
func TerminateNow(t Target) {
	defer func() { _ = recover() }()
	if t.Cgroup != nil && !t.Cgroup.isRemoved() {
		_ = t.Cgroup.Kill()
	}
	killTracked := func() {
		if t.Tracker == nil {
			return
		}
		if s, err := Scan(); err == nil {
			t.Tracker.Refresh(s)
		}
		for _, id := range t.Tracker.Members() {
			if h, _ := openHandle(id); h != nil {
				_ = h.signal(unix.SIGKILL)
				_ = h.signalGroup(unix.SIGKILL)
				h.close()
			}
		}
	}
	killTracked()
	if t.Shell.PID > 0 {
		_ = t.Shell.Signal(unix.SIGKILL)
	}
	killTracked()
}
