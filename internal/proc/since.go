//go:build linux

package proc

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Birth marks a moment in the order processes are born: a process born
// after it has a later start time, or the same clock tick and a higher pid
// (pids are handed out in increasing order; a wrap-around within one tick
// would take tens of thousands of forks).
type Birth struct {
	Tick    uint64 // clock ticks since boot, as /proc/<pid>/stat counts them
	LastPID int    // the pid the kernel handed out last, 0 when unknown
}

// clockTick is the length of one tick of process start times (USER_HZ,
// 100 on every Linux ABI).
const clockTick = 10 * time.Millisecond

// lastPIDFile is ns_last_pid, open for good, and its descriptor. The
// descriptor is taken once: os.File.Fd puts a file the runtime polls back
// in blocking mode, an fcntl(2) at every call, which cost Now more than
// its pread.
var lastPIDFile = sync.OnceValues(func() (*os.File, int) {
	f, err := os.Open("/proc/sys/kernel/ns_last_pid")
	if err != nil {
		return nil, -1
	}
	return f, int(f.Fd())
})

// Now is the moment of the call. It costs a clock read and a pread of
// ns_last_pid (about a microsecond).
func Now() Birth {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	b := Birth{Tick: uint64(ts.Nano() / int64(clockTick))}
	if f, fd := lastPIDFile(); f != nil {
		var buf [24]byte
		if n, err := syscall.Pread(fd, buf[:], 0); err == nil {
			b.LastPID, _ = strconv.Atoi(strings.TrimSpace(string(buf[:n])))
		}
		runtime.KeepAlive(f) // its finalizer would close fd
	}
	return b
}

// bornAfter reports whether the process st was born after b. Without a
// pid mark, a process of the same tick counts as born after: ending too
// much is the safer error for a command that is being ended.
func (b Birth) bornAfter(st Stat) bool {
	switch {
	case st.StartTime != b.Tick:
		return st.StartTime > b.Tick
	case b.LastPID == 0:
		return true
	}
	return st.PID > b.LastPID
}

// EndSince ends, with SIGKILL, every process of a shell that was born
// after since, except the shell itself, what descends from a process born
// before (an earlier job and its children keep running) and, when spare is
// not 0, the members of process group spare. candidates
// lists the shell's processes (its cgroup's, or a tracker's); it is asked
// again each round, because what is being ended may still fork: each round
// kills the targets it finds, until a round finds none left. (Stopping
// them first would make the shell report its jobs as stopped.) Then
// EndSince waits for them to go. It returns how many processes it ended.
func EndSince(ctx context.Context, shell Identity, since Birth, spare int, candidates func() ([]int, error)) (int, error) {
	held := map[Identity]*pidHandle{}
	defer func() {
		for _, h := range held {
			h.close()
		}
	}()
	const maxRounds = 64
	for round := 0; ; round++ {
		if round == maxRounds {
			return 0, fmt.Errorf("end the command's processes: still finding new ones after %d rounds", maxRounds)
		}
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("end the command's processes: %w", err)
		}
		pids, err := candidates()
		if err != nil {
			return 0, fmt.Errorf("end the command's processes: %w", err)
		}
		found := 0
		for _, id := range targets(shell, since, spare, pids) {
			if _, ok := held[id]; ok {
				continue
			}
			h, err := openHandle(id)
			if err != nil || h == nil {
				continue // gone already
			}
			held[id] = h
			_ = h.signal(unix.SIGKILL)
			found++
		}
		if found == 0 {
			break
		}
	}
	var hs []*pidHandle
	for _, h := range held {
		hs = append(hs, h)
	}
	if err := waitExited(ctx, hs, time.Now().Add(DefaultGrace)); err != nil {
		return len(hs), fmt.Errorf("end the command's processes: %w", err)
	}
	left := 0
	for _, h := range hs {
		if !h.exited() {
			left++
		}
	}
	if left > 0 {
		return len(hs) - left, fmt.Errorf("end the command's processes: %d of %d are still running", left, len(hs))
	}
	return len(hs), nil
}

// targets picks, among pids, the processes born after since that do not
// descend from a process born before it (other than the shell).
func targets(shell Identity, since Birth, spare int, pids []int) []Identity {
	stats := make(map[int]Stat, len(pids))
	for _, pid := range pids {
		if pid == shell.PID || protectedPID(pid) {
			continue
		}
		if st, err := ReadStat(pid); err == nil && !st.Dead() && (spare == 0 || st.PGRP != spare) && !killPending(pid) {
			stats[pid] = st
		}
	}
	// old reports whether pid descends from an earlier process, through
	// the processes listed (an orphan's lineage ends at its new parent,
	// which is not).
	memo := map[int]bool{}
	var old func(pid int, depth int) bool
	old = func(pid int, depth int) bool {
		if v, ok := memo[pid]; ok {
			return v
		}
		st, ok := stats[pid]
		v := false
		switch {
		case !ok || depth > 4096:
		case !since.bornAfter(st):
			v = true
		case st.PPID != shell.PID:
			v = old(st.PPID, depth+1)
		}
		memo[pid] = v
		return v
	}
	var out []Identity
	for pid, st := range stats {
		if since.bornAfter(st) && !old(pid, 0) {
			out = append(out, Identity{PID: pid, StartTime: st.StartTime})
		}
	}
	return out
}

// killPending reports whether pid is exiting already, or a SIGKILL is on
// its way to it (a group kill of the foreground job, say): it is dying,
// not left running, and is not counted as ended by EndSince.
func killPending(pid int) bool {
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// The flags are the 9th field, the 7th after the command name.
		const pfExiting = 0x4
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 6 {
				if flags, err := strconv.ParseUint(f[6], 10, 64); err == nil && flags&pfExiting != 0 {
					return true
				}
			}
		}
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	const sigkill = 1 << (unix.SIGKILL - 1)
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "SigPnd" && k != "ShdPnd") {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&sigkill != 0 {
			return true
		}
	}
	return false
}
