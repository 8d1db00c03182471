//go:build linux

package proc

import (
	"bytes"
	"runtime"
	"time"
)

// BlockedRead is a read(2) a process is blocked in: the descriptor, the
// buffer's address and the byte count asked for. A shell reading its next
// command line and the same shell inside a `read` builtin both block in
// read on the terminal, but into different buffers: the pair (Buf, Count)
// tells them apart.
type BlockedRead struct {
	FD    int
	Buf   uint64
	Count uint64
}

// readSyscalls is the number of read(2) per GOARCH.
var readSyscalls = map[string]int{"amd64": 0, "arm64": 63}

// ReadingTerminal reports the read(2) that pid's main thread is blocked in,
// when it is one on the terminal whose device number is tty. ok is false
// when the thread is anywhere else (running, stopped, another system call,
// a read of something else) or pid cannot be inspected. Like WaitingOnTerminal it is
// a proof, never a guess: the syscall file is read twice around the
// descriptor check and must not change.
func ReadingTerminal(pid int, tty uint64) (BlockedRead, bool) {
	nr, ok := readSyscalls[runtime.GOARCH]
	if !ok || pid <= 0 {
		return BlockedRead{}, false
	}
	path := pidPath(pid, "syscall")
	var first, again [256]byte
	line, err := readProcFile(path, first[:])
	if err != nil {
		return BlockedRead{}, false
	}
	call, ok := parseSyscall(line)
	if !ok || call.nr != nr || call.args[0] > 1<<20 {
		return BlockedRead{}, false
	}
	st, err := ReadStat(pid)
	if err != nil || stoppedState(st.State) {
		// A stopped process shows the read it will restart.
		return BlockedRead{}, false
	}
	p := prober{pid: pid, ctty: uint64(uint32(st.TTYNr)), tty: tty}
	if !p.isTTY(int(call.args[0]), 0) {
		return BlockedRead{}, false
	}
	if confirm, err := readProcFile(path, again[:]); err != nil || !bytes.Equal(confirm, line) {
		return BlockedRead{}, false
	}
	return BlockedRead{FD: int(call.args[0]), Buf: call.args[1], Count: call.args[2]}, true
}

// Stopped reports whether pid is stopped by a signal (state T in
// /proc/<pid>/stat).
func Stopped(pid int) bool {
	st, err := ReadStat(pid)
	return err == nil && st.State == 'T'
}

// Sleep is what Asleep found: the system call a process was blocked in and
// how long it had run by then. Two equal Sleeps taken apart show a process
// that did not run in between.
type Sleep struct {
	Call    string
	RunTime time.Duration
}

// Asleep reports where pid is asleep: in state S, blocked in a system
// call. ok is false when it is running, waiting for a CPU, stopped, gone or
// cannot be inspected.
func Asleep(pid int) (sl Sleep, ok bool) {
	st, err := ReadStat(pid)
	if err != nil || st.State != 'S' {
		return Sleep{}, false
	}
	var buf [256]byte
	line, err := readProcFile(pidPath(pid, "syscall"), buf[:])
	if err != nil {
		return Sleep{}, false
	}
	if _, ok := parseSyscall(line); !ok {
		return Sleep{}, false
	}
	rt, err := RunTime(pid)
	if err != nil {
		return Sleep{}, false
	}
	return Sleep{Call: string(line), RunTime: rt}, true
}
