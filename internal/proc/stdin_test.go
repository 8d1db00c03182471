//go:build linux

package proc

import (
	"os"
	"regexp"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pythonIn is the ready check of a case whose python3 job blocks in a
// wait of kind.
func pythonIn(kind waitKind) func(*testing.T, *shell) bool {
	return func(t *testing.T, sh *shell) bool {
		k, _, ok := mainSyscall(groupMember(t, sh.waitForegroundJob(), "python3"))
		return ok && k == kind
	}
}

// mainSyscall is the system call pid's main thread is blocked in, if any.
func mainSyscall(pid int) (waitKind, sysCall, bool) {
	var buf [256]byte
	line, err := readProcFile(pidPath(pid, "syscall"), buf[:])
	if err != nil {
		return 0, sysCall{}, false
	}
	c, ok := parseSyscall(line)
	return waitSyscalls[runtime.GOARCH][c.nr], c, ok
}

// groupMember finds the member of pgid running comm.
func groupMember(t *testing.T, pgid int, comm string) int {
	t.Helper()
	pid := 0
	eventually(t, comm+" in group", func() bool {
		for _, st := range scan(t).Group(pgid) {
			if st.Comm == comm {
				pid = st.PID
				return true
			}
		}
		return false
	})
	return pid
}

func requireArch(t testing.TB) {
	if waitSyscalls[runtime.GOARCH] == nil {
		t.Skipf("no system call table for %s: WaitingOnTerminal always reports false", runtime.GOARCH)
	}
}

func TestWaitingOnTerminalProves(t *testing.T) {
	requireArch(t)
	for _, tt := range []struct {
		name string
		cmd  string
		// job: the waiter is a foreground job, not the shell itself.
		job bool
	}{
		{"read builtin in the shell", `echo "RE""ADY"; read -r x`, false},
		{"cat", `cat`, true},
		{"python input()", `python3 -c 'input()'`, true},
		{"python -i (readline, select)", `python3 -i`, true},
		{"select", `python3 -c 'import select; select.select([0], [], [])'`, true},
		{"poll", `python3 -c 'import select; p = select.poll(); p.register(0, select.POLLIN); p.poll()'`, true},
		{"epoll", `python3 -c 'import select; e = select.epoll(); e.register(0, select.EPOLLIN); e.poll()'`, true},
		{"/dev/tty as fd 3", `python3 -c 'import os; f = os.open("/dev/tty", os.O_RDONLY); os.read(f, 1)'`, true},
		{"the terminal on a high fd", `python3 -c 'import os; os.dup2(0, 10); os.read(10, 1)'`, true},
		{"a non-main thread", `python3 -c 'import sys, threading; th = threading.Thread(target=sys.stdin.readline); th.start(); th.join()'`, true},
		{"a pipeline member that is not the leader", `sleep 1000 | cat /dev/tty`, true},
		// util-linux more polls its terminal and a signalfd: signals are
		// not input, so it waits for a person all the same.
		{"more (poll on the terminal and a signalfd)", `more <(seq 100000)`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sh := startShell(t, nil)
			sh.run(tt.cmd)
			pgid := sh.id.PID
			if tt.job {
				pgid = sh.waitForegroundJob()
			} else {
				// At its prompt bash waits on the terminal as well (pselect6),
				// so this case shows only that the read builtin's read(0) is
				// proven too; the session tells the two apart by whether
				// typed input is still unread.
				sh.expect(regexp.MustCompile(`READY\r?\n`))
			}
			// Entering the blocking call has no event: re-check.
			eventually(t, "the proof", func() bool {
				ok, err := WaitingOnTerminal(pgid, sh.tty)
				if err != nil {
					t.Fatal(err)
				}
				return ok
			})
			eventually(t, "the proof from a snapshot", func() bool {
				return scan(t).WaitingOnTerminal(pgid, sh.tty)
			})
		})
	}
}

func TestWaitingOnTerminalRejects(t *testing.T) {
	requireArch(t)
	for _, tt := range []struct {
		name string
		cmd  string
		// ready reports whether the state under test has been reached;
		// before that a false answer would prove nothing.
		ready func(t *testing.T, sh *shell) bool
	}{{
		name: "sleep",
		cmd:  `sleep 1000`,
		ready: func(t *testing.T, sh *shell) bool {
			pid := groupMember(t, sh.waitForegroundJob(), "sleep")
			_, _, blocked := mainSyscall(pid)
			return blocked
		},
	}, {
		name: "cat reading a pipe",
		cmd:  `sleep 1000 | cat`,
		ready: func(t *testing.T, sh *shell) bool {
			// cat sits in read(0), which fd 0 alone would call a wait.
			pid := groupMember(t, sh.waitForegroundJob(), "cat")
			kind, c, ok := mainSyscall(pid)
			return ok && kind == waitRead && c.args[0] == 0
		},
	}, {
		name: "read builtin on a process substitution",
		cmd:  `read -r x < <(sleep 1000)`,
		ready: func(t *testing.T, sh *shell) bool {
			kind, c, ok := mainSyscall(sh.id.PID)
			return ok && kind == waitRead && c.args[0] == 0
		},
	}, {
		name:  "poll on a pipe",
		cmd:   `python3 -c 'import os, select; r, w = os.pipe(); p = select.poll(); p.register(r, select.POLLIN); p.poll()'`,
		ready: pythonIn(waitPoll),
	}, {
		name:  "select on a pipe",
		cmd:   `python3 -c 'import os, select; r, w = os.pipe(); select.select([r], [], [])'`,
		ready: pythonIn(waitSelect),
	}, {
		name:  "epoll on a pipe",
		cmd:   `python3 -c 'import os, select; r, w = os.pipe(); e = select.epoll(); e.register(r, select.EPOLLIN); e.poll()'`,
		ready: pythonIn(waitEpoll),
	}, {
		// A relay (ssh, docker exec -it) waits on the terminal and a
		// socket at once: busy forwarding, not waiting for a person.
		name:  "select on the terminal and a socket",
		cmd:   `python3 -c 'import socket, select, sys; a, b = socket.socketpair(); select.select([sys.stdin, a], [], [])'`,
		ready: pythonIn(waitSelect),
	}, {
		name:  "poll on the terminal and a socket",
		cmd:   `python3 -c 'import socket, select, sys; a, b = socket.socketpair(); p = select.poll(); p.register(0, select.POLLIN); p.register(a, select.POLLIN); p.poll()'`,
		ready: pythonIn(waitPoll),
	}, {
		name:  "epoll on the terminal and a socket",
		cmd:   `python3 -c 'import socket, select; a, b = socket.socketpair(); e = select.epoll(); e.register(0, select.EPOLLIN); e.register(a, select.EPOLLIN); e.poll()'`,
		ready: pythonIn(waitEpoll),
	}, {
		// A stopped process shows the read it will restart (the job control
		// stop of a job whose shell has not taken the terminal back yet),
		// and takes nothing until it is continued.
		name: "a reader that is stopped",
		cmd:  `sleep 1000 | cat /dev/tty`,
		ready: func(t *testing.T, sh *shell) bool {
			pid := groupMember(t, sh.waitForegroundJob(), "cat")
			if kind, _, ok := mainSyscall(pid); !ok || kind != waitRead {
				return false
			}
			if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			st, err := ReadStat(pid)
			return err == nil && st.State == 'T'
		},
	}, {
		name: "busy loop",
		cmd:  `python3 -c 'while True: pass'`,
		ready: func(t *testing.T, sh *shell) bool {
			pid := groupMember(t, sh.waitForegroundJob(), "python3")
			st, err := ReadStat(pid)
			return err == nil && st.State == 'R'
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sh := startShell(t, nil)
			sh.run(tt.cmd)
			eventually(t, "the state under test", func() bool { return tt.ready(t, sh) })
			pgid := sh.foreground()
			// Several probes: a false positive would not need to be lucky.
			for range 20 {
				ok, err := WaitingOnTerminal(pgid, sh.tty)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					t.Fatalf("WaitingOnTerminal(%d) = true", pgid)
				}
				if scan(t).WaitingOnTerminal(pgid, sh.tty) {
					t.Fatalf("Snapshot.WaitingOnTerminal(%d) = true", pgid)
				}
			}
		})
	}
}

func TestWaitingOnTerminalMisses(t *testing.T) {
	if ok, err := waitingOnTerminal(nil, 1, terminals{}, nil, true); ok || err != nil {
		t.Errorf("an architecture without a table: %v, %v; want false, nil", ok, err)
	}
	if ok, err := WaitingOnTerminal(1<<30, 0); ok || err != nil {
		t.Errorf("a group with no members: %v, %v; want false, nil", ok, err)
	}
	if ok, err := WaitingOnTerminal(0, 0); ok || err != nil {
		t.Errorf("pgid 0: %v, %v; want false, nil", ok, err)
	}
}

func TestParseSyscall(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want sysCall
		ok   bool
	}{
		{"0 0x0 0x55d0 0x1 0x0 0x0 0x0 0x7ffc 0x7f12\n", sysCall{nr: 0, args: [6]uint64{0, 0x55d0, 1}}, true},
		{"270 0x1 0x7fff4772880 0x0 0x0 0x0 0x7fff47727b0 0x7ffe 0x7f01", sysCall{nr: 270, args: [6]uint64{1, 0x7fff4772880, 0, 0, 0, 0x7fff47727b0}}, true},
		{"running\n", sysCall{}, false},
		{"-1 0x7ffc 0x7f12\n", sysCall{}, false},
		{"0 0x0 0x1", sysCall{}, false},
		{"0 0x0 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8", sysCall{}, false},
		{"x 0x0 0x1 0x2 0x3 0x4 0x5 0x6 0x7", sysCall{}, false},
		{"0 00 0x1 0x2 0x3 0x4 0x5 0x6 0x7", sysCall{}, false},
		{"0 0xzz 0x1 0x2 0x3 0x4 0x5 0x6 0x7", sysCall{}, false},
		{"", sysCall{}, false},
	} {
		got, ok := parseSyscall([]byte(tt.in))
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseSyscall(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseEpollTargets(t *testing.T) {
	in := "pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t2067\n" +
		"tfd:        0 events:       19 data:                0  pos:0 ino:3 sdev:18\n" +
		"tfd:       12 events:        4 data:       7f00000000  pos:0 ino:5b1 sdev:d\n" +
		"tfd: bad events: 1\n" +
		"tfd:        7 events:       zz data: 0\n" +
		"tfd:        9 events:        1 data: 0\n"
	want := []epollTarget{{fd: 0, events: 0x19, ino: 3}, {fd: 12, events: 4, ino: 0x5b1}, {fd: 9, events: 1}}
	if got := parseEpollTargets([]byte(in)); !slices.Equal(got, want) {
		t.Errorf("parseEpollTargets = %+v, want %+v", got, want)
	}
}

// TestProbeMissesWhatItCannotReadWhole: a select set or an epoll interest
// list larger than a probe reads is no proof, even when all it read is the
// terminal: what was left unread could be anything. The same waits, small
// enough to read whole, are proof.
func TestProbeMissesWhatItCannotReadWhole(t *testing.T) {
	master, slave, err := openPTY()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	fd := int(slave.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	p := prober{pid: os.Getpid(), tty: st.Rdev}

	t.Run("select", func(t *testing.T) {
		for _, tt := range []struct {
			nfds int
			want bool
		}{{fd + 1, true}, {maxFDSetBytes*8 + 8, false}} {
			set := make([]byte, (tt.nfds+7)/8)
			set[fd/8] |= 1 << (fd % 8)
			if got := p.selectsTTY(uint64(tt.nfds), uint64(uintptr(unsafe.Pointer(&set[0])))); got != tt.want {
				t.Errorf("select with nfds %d on the terminal alone: %v, want %v", tt.nfds, got, tt.want)
			}
			runtime.KeepAlive(set)
		}
	})

	t.Run("epoll", func(t *testing.T) {
		// Each fdinfo line is well over 32 bytes, so 2*fdinfoBufSize/32
		// entries cannot fit the probe's buffer.
		for _, entries := range []int{1, 2 * fdinfoBufSize / 32} {
			ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			for range entries {
				d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer unix.Close(d)
				if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, d, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(d)}); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := p.epollsTTY(ep), entries == 1; got != want {
				t.Errorf("epoll with %d entries, all the terminal: %v, want %v", entries, got, want)
			}
			unix.Close(ep)
		}
	})
}
