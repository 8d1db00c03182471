// Package proc is the Linux process layer under the bash backend: it reads
// the process table, names processes safely across pid reuse, proves that a
// terminal's foreground job waits for input, and ends everything a shell
// started.
//
// # Model
//
// A process is named by an Identity, its pid plus its start time. Every
// signal is fenced by it: a pidfd is opened, the start time checked, and
// the signal sent through the pidfd, so a recycled pid is never signalled.
// Pid 1, this process and its process group are never signalled at all.
//
// A Snapshot is one walk of /proc. The session takes one per tracker
// refresh and asks it everything for that moment (descendants, session and
// group members,
// and through Snapshot.WaitingOnTerminal the other members of the
// foreground group), instead of walking /proc again for each question: on
// the 2-vCPU test VM a walk costs about 12 µs per process, while the probe
// of one process costs about 40 µs.
//
// A Tracker accumulates the processes of one shell from successive
// snapshots, so that a process which later leaves the shell's tree is
// still known at cleanup. A Cgroup (cgroup v2, where writable) holds the
// shell from its first instruction (clone3 with CLONE_INTO_CGROUP), and
// everything it ever starts, whatever that does.
//
// Limits (LimitHost, Leaves) live in cgroups of the shell's own: per
// controller, cgroup v2 where dsh's cgroup is given it, else a cgroup v1
// hierarchy; the shell is born in the v1 leaves because the thread that
// forks it joins them first (v1 membership is per thread). The shells'
// common pids cgroup is bounded Headroom below dsh's own bound on tasks.
// EndSince ends what a command started, told apart by birth (start time,
// and the pid counter within one clock tick) and lineage.
//
// Terminate combines them: signals to the tracked processes with a grace
// period, the shell, once more the tracked processes, then cgroup.kill as
// the backstop. Waiting is event-driven throughout: a pidfd becomes
// readable when its process exits and the runtime poller wakes the waiter;
// a cgroup's emptiness arrives through inotify on cgroup.events.
//
// WaitingOnTerminal proves that a process group is blocked reading a given
// terminal, from /proc/<pid>/task/<tid>/syscall, the memory of the
// select/poll arguments, and epoll fdinfo, checking that the descriptor
// waited on really is that terminal.
//
// # Which mechanism catches which escape
//
//	started from the shell                 Tracker                    Cgroup
//	cmd &, jobs, pipelines                 yes: descendant            yes
//	nohup cmd & disown                     yes: descendant, session   yes
//	( (cmd &) ), a double fork             yes: session member        yes
//	setsid cmd, a daemon                   only if a Refresh saw it   yes
//	                                       before it left the tree
//	forked by a tracked process after      yes: members anchor        yes
//	the shell was reaped (e.g. on TERM)    adoption
//	forked by an untracked orphan after    no: nothing anchors it     yes
//	the shell and its members are gone
//	moved to another cgroup (privileged)   only if a Refresh saw it   no
//
// The tracker works everywhere but knows only what some Refresh observed;
// the cgroup holds everything but needs a writable cgroup v2 hierarchy and
// Linux 5.14 (cgroup.kill). Terminate uses both. With the tracker alone, a
// process that leaves the shell's tree and session between two refreshes
// escapes.
//
// # Decisions
//
//   - Tracker adoption goes beyond "descendants and session of the shell
//     while the shell's identity matches": tracked members are anchors too
//     (their children, and the sessions they are in). Only fork-descendants
//     of the shell are adopted either way, and the shell's session stays
//     reachable after the shell has been reaped, which is the normal case
//     during cleanup because the session reaps it as soon as it exits.
//   - WaitingOnTerminal checks what a descriptor refers to (st_rdev of
//     /proc/<pid>/fd/<n>, or /dev/tty plus the process's controlling
//     terminal), not its number, so a pipeline stage reading a pipe is not
//     a false positive and a program reading /dev/tty on fd 3 is found.
//     It also knows readv and epoll_pwait2, and reads the thread's syscall
//     line again after the descriptor check: a thread that returned from
//     the call meanwhile is not proof.
//   - Group signals use PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9) so they are
//     fenced by the leader's identity too; older kernels fall back to
//     kill(-pgid) after a start-time check.
//   - Terminate sends SIGHUP with the shell's SIGTERM, because an
//     interactive bash ignores TERM and would otherwise cost a full grace
//     period before SIGKILL.
//   - Without pidfd (Linux < 5.3) signals fall back to kill(2) after a
//     start-time check and waiting falls back to a backed-off timer: the
//     exit of a process that is not our child has no other event there.
//
// Everything but this comment is Linux-only.
package proc
