//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Limits, the decisions:
//
//   - Each shell's limits are enforced in cgroups of its own (see
//     proc.LimitHost): cgroup v2 where dsh's cgroup is given the
//     controllers, cgroup v1 otherwise, chosen per controller at load. The
//     configured limits must be enforceable then, or the load fails with
//     what is missing; a spawn asking for a limit the machine cannot
//     enforce is refused (termapi.ErrLimitsUnsupported).
//   - A spawn's policy sets each limit it gives; the config's value is the
//     default for the others.
//   - Whether or not a shell has limits, dsh keeps headroom for its own
//     threads: all shells together stop forking Headroom tasks below the
//     lowest bound on dsh's tasks (its pids cgroups, pid_max,
//     threads-max), and below RLIMIT_NPROC for a non-root dsh, whose
//     shells get that much less. A Go program that cannot make a thread
//     aborts, and every session with it.
//   - Limit hits are read from the cgroups' own counters (the OOM killer's
//     kills, refused forks) when a send settles, and reported on its
//     result (termapi.SendResult.LimitsHit).

// limitsOf converts the config's limits.
func limitsOf(c LimitsConfig) termapi.Limits {
	return termapi.Limits{Memory: int64(c.Memory), Pids: c.Pids, CPU: c.CPU}
}

func procLimits(l termapi.Limits) proc.Limits {
	return proc.Limits{Memory: l.Memory, Pids: l.Pids, CPU: l.CPU}
}

func hitsOf(l proc.Limits) termapi.Limits {
	return termapi.Limits{Memory: l.Memory, Pids: l.Pids, CPU: l.CPU}
}

// effectiveLimits are a spawn's limits: the policy's, the configured ones
// where it sets none.
func (b *Backend) effectiveLimits(p termapi.Limits) termapi.Limits {
	l := b.limits
	if p.Memory > 0 {
		l.Memory = p.Memory
	}
	if p.Pids > 0 {
		l.Pids = p.Pids
	}
	if p.CPU > 0 {
		l.CPU = p.CPU
	}
	return l
}

// checkLimitsAtLoad fails the load when the configured limits cannot be
// enforced here, naming the first field at fault.
func checkLimitsAtLoad(host *proc.LimitHost, c LimitsConfig) error {
	l := limitsOf(c)
	if err := LimitsConfig(c).validate("limits"); err != nil {
		return err
	}
	if err := host.Check(procLimits(l)); err != nil {
		field := "limits"
		for _, f := range []struct {
			name string
			set  bool
		}{{"memory", l.Memory > 0}, {"pids", l.Pids > 0}, {"cpu", l.CPU > 0}} {
			if f.set && strings.Contains(err.Error(), f.name+" limit") {
				field += "." + f.name
				break
			}
		}
		return config.FieldErrorf(field, "terminal-bash: %v", err)
	}
	return nil
}

// checkLimits refuses a spawn's limits the machine cannot enforce.
func (b *Backend) checkLimits(l termapi.Limits) error {
	if l.IsZero() {
		return nil
	}
	if err := (LimitsConfig{Memory: config.Bytes(l.Memory), Pids: l.Pids, CPU: l.CPU}).validate("limits"); err != nil {
		return fmt.Errorf("%w: %w", termapi.ErrLimitsUnsupported, err)
	}
	if err := b.limitHost.Check(procLimits(l)); err != nil {
		return fmt.Errorf("%w: %w", termapi.ErrLimitsUnsupported, err)
	}
	return nil
}

// newLeaves makes the cgroups that hold a shell's limits. Without limits
// they only keep the shells below dsh's headroom, which is worth a log line
// when it fails, not a failed spawn.
func (b *Backend) newLeaves(name string, l termapi.Limits, cg *proc.Cgroup) (*proc.Leaves, error) {
	lv, err := b.limitHost.NewLeaves(name, procLimits(l), cg)
	if err != nil && l.IsZero() {
		b.log.Info("the shell's tasks are not bounded below dsh's headroom", "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, errorf("limits: %w", err)
	}
	return lv, nil
}

// boundShellTasks lowers a non-root shell's RLIMIT_NPROC (hard and soft,
// so nothing it starts can raise it) Headroom below dsh's own. The limit
// counts every process and thread of the user, and a root process ignores
// it. It runs right after the shell starts, before it reads a command.
func boundShellTasks(pid int) error {
	if os.Geteuid() == 0 {
		return nil
	}
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &own); err != nil {
		return fmt.Errorf("RLIMIT_NPROC: %w", err)
	}
	if own.Cur == unix.RLIM_INFINITY || own.Cur < 2 {
		return nil
	}
	n := own.Cur - uint64(proc.Headroom(int(min(own.Cur, 1<<30))))
	lim := unix.Rlimit{Cur: n, Max: min(n, own.Max)}
	if err := unix.Prlimit(pid, unix.RLIMIT_NPROC, &lim, nil); err != nil {
		return fmt.Errorf("RLIMIT_NPROC of the shell: %w", err)
	}
	return nil
}

// EndCommand ends what the latest Exec's command started and left running.
// See termapi.Session.EndCommand.
func (s *session) EndCommand(ctx context.Context) (int, error) {
	s.mu.Lock()
	since, ok := s.since, s.sinceSet
	s.mu.Unlock()
	if !ok {
		return 0, nil
	}
	// The foreground job, when it is not the shell itself, is the caller's
	// to interrupt with signals first.
	spare := 0
	if fg, err := s.term.foreground(); err == nil && fg != s.pid {
		spare = fg
	}
	n, err := proc.EndSince(ctx, s.target.Shell, since, spare, s.members)
	if err != nil {
		return n, s.Errorf("%w", err)
	}
	return n, nil
}

// members lists the shell's processes from the most complete source
// there is: a cgroup (which nothing leaves), else the tracker after a new
// walk of /proc.
func (s *session) members() ([]int, error) {
	if s.leaves != nil {
		if pids, err := s.leaves.Procs(); err != nil || pids != nil {
			return pids, err
		}
	}
	if cg := s.target.Cgroup; cg != nil {
		return cg.Procs()
	}
	tr := s.target.Tracker
	if tr == nil {
		return nil, errors.New("the shell's processes are not tracked")
	}
	snap, err := proc.Scan()
	if err != nil {
		return nil, err
	}
	tr.Refresh(snap)
	var pids []int
	for _, id := range tr.Members() {
		pids = append(pids, id.PID)
	}
	return pids, nil
}
