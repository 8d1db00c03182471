//go:build linux

package proc

import (
	"bytes"
	"encoding/binary"
	"math"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// waitKind is how a blocking input system call names the descriptors it
// waits on.
type waitKind uint8

const (
	waitRead   waitKind = iota + 1 // read, readv: fd = a0
	waitSelect                     // select, pselect6: nfds = a0, readfds = a1
	waitPoll                       // poll, ppoll: fds = a0, nfds = a1
	waitEpoll                      // epoll_wait, epoll_pwait, epoll_pwait2: epfd = a0, maxevents = a2
)

// waitSyscalls maps, per GOARCH, the numbers of the system calls a program
// blocks in while it waits for input. The argument positions above are the
// same on both architectures.
var waitSyscalls = map[string]map[int]waitKind{
	"amd64": {
		0: waitRead, 19: waitRead,
		23: waitSelect, 270: waitSelect,
		7: waitPoll, 271: waitPoll,
		232: waitEpoll, 281: waitEpoll, 441: waitEpoll,
	},
	"arm64": {
		63: waitRead, 65: waitRead,
		72: waitSelect,
		73: waitPoll,
		22: waitEpoll, 441: waitEpoll,
	},
}

// Bounds on what one probe reads from a process: fd_set bytes (65536 fds),
// pollfd entries, and the epoll fdinfo text. A wait on more than they hold
// is a miss: what is left unread could be something other than the
// terminal.
const (
	maxFDSetBytes = 8192
	maxPollFDs    = 1024
	fdinfoBufSize = 16 << 10
)

// pollRDNORM is POLLRDNORM (asm-generic/poll.h), which x/sys does not
// export; for a terminal it means the same as POLLIN.
const pollRDNORM = 0x40

// devTTY is the device number of /dev/tty, which opens the caller's
// controlling terminal whatever that is.
var devTTY = unix.Mkdev(5, 0)

// WaitingOnTerminal reports whether some thread of some process in process
// group pgid is, right now, blocked waiting to read the terminal whose
// device number is tty (st_rdev of the pty slave, /dev/pts/N).
//
// It is a proof, never a guess. A thread counts only when
// /proc/<pid>/task/<tid>/syscall shows it blocked in read, readv, select,
// pselect6, poll, ppoll or an epoll wait (x86-64 and arm64 numbering; other
// architectures always report false) on a descriptor that is open on that
// terminal: the descriptor may be any number, opened as /dev/pts/N or as
// /dev/tty (then the process's controlling terminal must be tty), and for
// select and poll it must be in the read set or asked for POLLIN, for epoll
// registered for EPOLLIN.
//
// For select, poll and epoll the terminal must also be the only thing the
// thread waits to read, a signalfd aside (signals are not input). A program waiting for a person waits on the terminal
// alone (read, readline, a pager, an editor, a password prompt); a relay
// such as ssh or `docker exec -it` waits on the terminal and a socket at
// once, forwarding whatever comes, and is busy rather than waiting for
// input. Counting it would interrupt a remote command that is merely quiet.
// The price: a program that waits for input in an event loop with other
// descriptors (a Node.js prompt) is not proven, and falls to the caller's
// silence rule. The syscall line is read again after the
// descriptor check and must not have changed, so a thread that woke up in
// between does not count.
//
// The group leader is probed first; the rest of /proc is walked for other
// members (pipelines) only when the leader gives no proof. A caller that
// has a fresh Snapshot should use its WaitingOnTerminal method, which takes
// the members from it instead of walking /proc again.
//
// Every unreadable or unparsable file and every failed memory read is a
// miss: the answer is false, not an error, because a process that exits or
// is not ours to inspect must not stall the caller. The error is reserved
// for a /proc that cannot be listed at all. Nothing is cached between calls.
//
// Reading another process's syscall, fdinfo and memory files needs ptrace
// access to it: the same user, and under Yama being its ancestor, which the
// process that started the shell is. A set-user-ID program (the password
// prompt of sudo or su) is readable only with CAP_SYS_PTRACE, so without it
// such a wait is a miss.
func WaitingOnTerminal(pgid int, tty uint64) (bool, error) {
	return waitingOnTerminal(waitSyscalls[runtime.GOARCH], pgid, terminals{tty: tty}, nil, true)
}

// WaitingOnTerminal is the package function of that name, except that the
// group's members other than the leader come from the snapshot instead of
// a new walk of /proc: the walk costs far more than the probe itself. Each
// member is re-read before it is probed, so a process that has left the
// group since the snapshot is not counted; one that joined since is not
// seen (a miss, never a false proof).
func (s *Snapshot) WaitingOnTerminal(pgid int, tty uint64) bool {
	return s.WaitingOnTerminals(pgid, tty, 0)
}

// WaitingOnTerminals is WaitingOnTerminal for a group that may read either
// of two terminals: tty, its controlling one, or alt (a terminal its
// standard descriptors were given besides; 0 for none). Waiting on both at
// once counts as waiting for input too.
func (s *Snapshot) WaitingOnTerminals(pgid int, tty, alt uint64) bool {
	ok, _ := waitingOnTerminal(waitSyscalls[runtime.GOARCH], pgid, terminals{tty: tty, alt: alt}, s, true)
	return ok
}

// OthersWaitingOnTerminal is WaitingOnTerminal for the members of group
// pgid other than its leader: for a caller that has judged the leader
// already (a shell that owns the terminal), and asks whether anything else
// in its group reads it.
func (s *Snapshot) OthersWaitingOnTerminal(pgid int, tty uint64) bool {
	return s.OthersWaitingOnTerminals(pgid, tty, 0)
}

// OthersWaitingOnTerminals is OthersWaitingOnTerminal with a second
// terminal, as WaitingOnTerminals has.
func (s *Snapshot) OthersWaitingOnTerminals(pgid int, tty, alt uint64) bool {
	ok, _ := waitingOnTerminal(waitSyscalls[runtime.GOARCH], pgid, terminals{tty: tty, alt: alt}, s, false)
	return ok
}

// terminals are what a probe counts as the terminal: tty, and alt unless 0.
type terminals struct{ tty, alt uint64 }

func waitingOnTerminal(table map[int]waitKind, pgid int, tty terminals, snap *Snapshot, leader bool) (bool, error) {
	if table == nil || pgid <= 0 {
		return false, nil
	}
	buf := make([]byte, statBufSize)
	if leader && probeMember(table, pgid, pgid, tty, buf) {
		return true, nil
	}
	if snap != nil {
		for _, st := range snap.Group(pgid) {
			if st.PID != pgid && probeMember(table, st.PID, pgid, tty, buf) {
				return true, nil
			}
		}
		return false, nil
	}
	names, err := procEntries()
	if err != nil {
		return false, err
	}
	listed := false
	for _, name := range names {
		pid, ok := parsePID(name)
		if !ok {
			continue
		}
		listed = true
		if pid != pgid && probeMember(table, pid, pgid, tty, buf) {
			return true, nil
		}
	}
	if !listed {
		return false, ErrNoProcfs
	}
	return false, nil
}

// probeMember reads pid's stat afresh (into buf) and, if pid is in group
// pgid, probes it.
func probeMember(table map[int]waitKind, pid, pgid int, tty terminals, buf []byte) bool {
	data, err := readProcFile(pidPath(pid, "stat"), buf)
	if err != nil {
		return false
	}
	st, err := ParseStat(data)
	return err == nil && st.PGRP == pgid && provesWait(table, st, tty)
}

// provesWait probes every thread of one process. A stopped process shows
// the call it will restart once continued, and takes nothing meanwhile: it
// waits for its SIGCONT, not for input. Its state is looked at again once
// a call is confirmed, for a stop that came in between.
func provesWait(table map[int]waitKind, st Stat, tty terminals) bool {
	if stoppedState(st.State) {
		return false
	}
	tids := []string{strconv.Itoa(st.PID)}
	if st.Threads != 1 {
		// Only then is listing the task directory worth its system calls.
		var err error
		if tids, err = readDirNames(pidPath(st.PID, "task")); err != nil {
			return false
		}
	}
	p := prober{pid: st.PID, ctty: uint64(uint32(st.TTYNr)), tty: tty.tty, alt: tty.alt}
	for _, tid := range tids {
		path := pidPath(st.PID, "task/"+tid+"/syscall")
		var first, again [256]byte
		line, err := readProcFile(path, first[:])
		if err != nil {
			continue
		}
		call, ok := parseSyscall(line)
		if !ok {
			continue
		}
		kind := table[call.nr]
		if kind == 0 || !p.waitsOnTTY(kind, call) {
			continue
		}
		if confirm, err := readProcFile(path, again[:]); err == nil && bytes.Equal(confirm, line) {
			now, err := ReadStat(st.PID)
			return err == nil && !stoppedState(now.State)
		}
	}
	return false
}

// stoppedState reports whether a scheduler state is a stop: by a signal
// (T) or by a tracer (t).
func stoppedState(state byte) bool { return state == 'T' || state == 't' }

func readDirNames(path string) ([]string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 4096)
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// sysCall is a parsed /proc/<pid>/task/<tid>/syscall line of a thread
// blocked in a system call: "nr a0 a1 a2 a3 a4 a5 sp pc", nr in decimal,
// the rest in hex.
type sysCall struct {
	nr   int
	args [6]uint64
}

// parseSyscall rejects "running", "-1 sp pc" (not in a system call) and
// anything else that is not the nine-field form.
func parseSyscall(line []byte) (sysCall, bool) {
	var c sysCall
	i := 0
	for f := range bytes.FieldsSeq(line) {
		switch {
		case i == 0:
			nr, err := strconv.Atoi(string(f))
			if err != nil || nr < 0 {
				return sysCall{}, false
			}
			c.nr = nr
		case i > 8:
			return sysCall{}, false
		default:
			v, ok := parseHex(f)
			if !ok {
				return sysCall{}, false
			}
			if i <= 6 {
				c.args[i-1] = v
			}
		}
		i++
	}
	if i != 9 {
		return sysCall{}, false
	}
	return c, true
}

func parseHex(f []byte) (uint64, bool) {
	f, ok := bytes.CutPrefix(f, []byte("0x"))
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(string(f), 16, 64)
	return v, err == nil
}

// prober checks the descriptors of one process against the terminal.
type prober struct {
	pid  int
	ctty uint64 // the process's controlling terminal (stat tty_nr)
	tty  uint64
	alt  uint64 // a second terminal that counts (never /dev/tty's); 0 none
}

func (p prober) waitsOnTTY(kind waitKind, c sysCall) bool {
	switch kind {
	case waitRead:
		return c.args[0] <= math.MaxInt32 && p.isTTY(int(c.args[0]), 0)
	case waitSelect:
		return p.selectsTTY(c.args[0], c.args[1])
	case waitPoll:
		return p.pollsTTY(c.args[0], c.args[1])
	case waitEpoll:
		return int32(c.args[2]) >= 1 && c.args[0] <= math.MaxInt32 && p.epollsTTY(int(c.args[0]))
	}
	return false
}

// selectsTTY checks the readfds set of select/pselect6.
func (p prober) selectsTTY(nfds, readfds uint64) bool {
	// A set larger than the bound cannot be read whole, and an unread
	// descriptor may be something other than the terminal.
	if int32(nfds) < 1 || int32(nfds) > maxFDSetBytes*8 || readfds == 0 {
		return false
	}
	n := int(int32(nfds))
	set := make([]byte, (n+7)/8)
	if !p.readMem(readfds, set) {
		return false
	}
	found := false
	for i, b := range set {
		for bit := range 8 {
			if fd := i*8 + bit; b&(1<<bit) != 0 && fd < n {
				switch p.classify(fd, 0) {
				case fdOther:
					return false // also waiting on something else
				case fdTerminal:
					found = true
				}
			}
		}
	}
	return found
}

// pollsTTY checks the struct pollfd array of poll/ppoll: {int32 fd; int16
// events; int16 revents}.
func (p prober) pollsTTY(fds, nfds uint64) bool {
	if fds == 0 || nfds < 1 {
		return false
	}
	entries := make([]byte, min(nfds, maxPollFDs)*8)
	if !p.readMem(fds, entries) {
		return false
	}
	found := false
	for e := entries; len(e) >= 8; e = e[8:] {
		fd := int32(binary.NativeEndian.Uint32(e[0:4]))
		events := binary.NativeEndian.Uint16(e[4:6])
		if fd < 0 || events&(unix.POLLIN|pollRDNORM) == 0 {
			continue // poll ignores negative fds; output-only entries are not input
		}
		switch p.classify(int(fd), 0) {
		case fdOther:
			return false // also waiting on something else
		case fdTerminal:
			found = true
		}
	}
	return found && nfds <= maxPollFDs
}

// epollsTTY checks the interest list of an epoll descriptor, as fdinfo
// shows it.
func (p prober) epollsTTY(epfd int) bool {
	buf := make([]byte, fdinfoBufSize)
	data, err := readProcFile(pidPath(p.pid, "fdinfo/"+strconv.Itoa(epfd)), buf)
	// A full buffer may have cut the interest list short, and a target
	// left unread may be something other than the terminal.
	if err != nil || len(data) == len(buf) {
		return false
	}
	found := false
	for _, t := range parseEpollTargets(data) {
		if t.events&(unix.EPOLLIN|unix.EPOLLRDNORM) == 0 {
			continue
		}
		switch p.classify(t.fd, t.ino) {
		case fdOther:
			return false // also waiting on something else
		case fdTerminal:
			found = true
		}
	}
	return found
}

// epollTarget is one "tfd:" line of an epoll descriptor's fdinfo:
// "tfd: %8d events: %8x data: %16llx  pos:%lli ino:%lx sdev:%x".
type epollTarget struct {
	fd     int
	events uint32
	ino    uint64 // 0 when the line has none
}

func parseEpollTargets(data []byte) []epollTarget {
	var out []epollTarget
	for line := range bytes.Lines(data) {
		fields := bytes.Fields(line)
		if len(fields) < 4 || string(fields[0]) != "tfd:" || string(fields[2]) != "events:" {
			continue
		}
		fd, err := strconv.Atoi(string(fields[1]))
		if err != nil || fd < 0 {
			continue
		}
		events, err := strconv.ParseUint(string(fields[3]), 16, 32)
		if err != nil {
			continue
		}
		t := epollTarget{fd: fd, events: uint32(events)}
		for _, f := range fields[4:] {
			if v, ok := bytes.CutPrefix(f, []byte("ino:")); ok {
				t.ino, _ = strconv.ParseUint(string(v), 16, 64)
			}
		}
		out = append(out, t)
	}
	return out
}

// isTTY reports whether descriptor fd of the process is open on the
// terminal. ino, when not 0, must match too: epoll remembers the file, not
// the descriptor number, which may since have been closed and reused.
func (p prober) isTTY(fd int, ino uint64) bool {
	var st unix.Stat_t
	if unix.Stat(pidPath(p.pid, "fd/"+strconv.Itoa(fd)), &st) != nil {
		return false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || (ino != 0 && st.Ino != ino) {
		return false
	}
	return st.Rdev == p.tty || (st.Rdev == devTTY && p.ctty == p.tty) || (p.alt != 0 && st.Rdev == p.alt)
}

// fdClass is what a descriptor in a wait set says about the wait.
type fdClass uint8

const (
	fdOther    fdClass = iota // input from elsewhere: not a wait for a person
	fdTerminal                // the terminal
	fdSignals                 // a signalfd: signals, not input
)

// signalfdLink is what /proc/<pid>/fd/<n> links to for a signalfd.
const signalfdLink = "anon_inode:[signalfd]"

// classify sorts a descriptor of a select, poll or epoll set. A signalfd
// is neither: a pager such as util-linux more waits on the terminal and a
// signalfd at once, and it waits for a person all the same, since no data
// arrives on a signalfd.
func (p prober) classify(fd int, ino uint64) fdClass {
	if p.isTTY(fd, ino) {
		return fdTerminal
	}
	var buf [len(signalfdLink) + 1]byte
	n, err := unix.Readlink(pidPath(p.pid, "fd/"+strconv.Itoa(fd)), buf[:])
	if err == nil && string(buf[:n]) == signalfdLink {
		return fdSignals
	}
	return fdOther
}

// readMem fills buf from the process's memory at addr.
func (p prober) readMem(addr uint64, buf []byte) bool {
	if addr > math.MaxInt64 {
		return false
	}
	fd, err := unix.Open(pidPath(p.pid, "mem"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	n, err := unix.Pread(fd, buf, int64(addr))
	return err == nil && n == len(buf)
}
