//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Two holes are left by Landlock and the namespaces, and a seccomp filter
// closes them.
//
// With the network off, the network namespace takes away every address
// but loopback, yet a pathname unix socket is reached through the file
// system, not the network: docker.sock, another dsh's --http unix:
// socket, ssh-agent, D-Bus. Landlock (to ABI 7) has no right for
// connecting to one, and mount flags do not stop connect(2). The filter
// refuses socket(AF_UNIX, …) with EACCES; socketpair(2), which makes an
// unnamed pair within the sandbox, stays allowed. Abstract sockets are
// scoped by Landlock (ABI 6).
//
// In a mode that restricts files, a file made setuid or setgid in a
// writable directory runs with its owner's rights for whoever executes it
// later: with dsh running as root, a setuid-root shell in the project.
// The filter refuses a mode with S_ISUID or S_ISGID in chmod, fchmod,
// fchmodat, fchmodat2, and in creating a file (open, openat, creat,
// mknod, mknodat) with EPERM. openat2(2) carries its mode in memory the
// filter cannot read, so it is refused with ENOSYS, on which C libraries
// and language runtimes fall back to openat(2).
//
// io_uring runs socket, connect and openat without the system calls the
// filter sees, so it is refused whenever the filter is installed (EPERM,
// as Docker's default profile does). So are 32-bit and x32 system calls,
// whose numbers differ: a confined shell runs only programs of the
// machine's native architecture.

// argTest is how a rule inspects its argument.
type argTest int

const (
	always  argTest = iota // the call is refused whatever its arguments
	equals                 // refused when the argument equals value
	anyBits                // refused when the argument has any bit of value
)

// rule refuses one system call with errno when its test holds.
type rule struct {
	nr    uint32
	test  argTest
	arg   int // 0-5
	value uint32
	errno unix.Errno
}

// suidBits are the mode bits that make a program run as its owner or
// group.
const suidBits = unix.S_ISUID | unix.S_ISGID

// filterRules are the rules for p; none when p needs no filter.
func filterRules(p Policy) []rule {
	var rules []rule
	if !p.Network {
		rules = append(rules, rule{nr: unix.SYS_SOCKET, test: equals, arg: 0, value: unix.AF_UNIX, errno: unix.EACCES})
	}
	if p.restrictsFiles() {
		for _, c := range modeCalls {
			rules = append(rules, rule{nr: c.nr, test: anyBits, arg: c.modeArg, value: suidBits, errno: unix.EPERM})
		}
		rules = append(rules, rule{nr: unix.SYS_OPENAT2, test: always, errno: unix.ENOSYS})
	}
	if len(rules) > 0 {
		for _, nr := range []uint32{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER} {
			rules = append(rules, rule{nr: nr, test: always, errno: unix.EPERM})
		}
	}
	return rules
}

// modeCall is a system call that takes a file mode, and its argument.
type modeCall struct {
	nr      uint32
	modeArg int
}

// seccomp_data: nr at 0, arch at 4, instruction pointer at 8, the six
// arguments from 16, 8 bytes each; the low half of an argument comes
// first on a little-endian machine.
const (
	offNR   = 0
	offArch = 4
	offArgs = 16
)

func errnoRet(e unix.Errno) bpf.RetConstant {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA}
}

// program assembles the filter for rules.
func program(rules []rule) ([]bpf.RawInstruction, error) {
	if nativeArch == 0 {
		return nil, errors.New("no seccomp filter is built for this architecture")
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nativeArch, SkipTrue: 1},
		errnoRet(unix.ENOSYS),
		bpf.LoadAbsolute{Off: offNR, Size: 4},
	}
	if foreignNRBit != 0 {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpBitsNotSet, Val: foreignNRBit, SkipTrue: 1},
			errnoRet(unix.ENOSYS))
	}
	for _, r := range rules {
		var block []bpf.Instruction
		switch r.test {
		case always:
			block = []bpf.Instruction{errnoRet(r.errno)}
		case equals, anyBits:
			cond := bpf.JumpEqual
			if r.test == anyBits {
				cond = bpf.JumpBitsSet
			}
			// Each call has one rule, so a call whose argument passes is
			// allowed at once.
			block = []bpf.Instruction{
				bpf.LoadAbsolute{Off: uint32(offArgs + 8*r.arg), Size: 4},
				bpf.JumpIf{Cond: cond, Val: r.value, SkipFalse: 1},
				errnoRet(r.errno),
				bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
			}
		}
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: uint8(len(block))})
		prog = append(prog, block...)
	}
	prog = append(prog, bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})
	return bpf.Assemble(prog)
}

// installFilter installs the filter for p on this thread, which keeps it
// across execve. It needs no_new_privs.
func installFilter(p Policy) error {
	rules := filterRules(p)
	if len(rules) == 0 {
		return nil
	}
	raw, err := program(rules)
	if err != nil {
		return fmt.Errorf("build the seccomp filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("install the seccomp filter (it needs CONFIG_SECCOMP_FILTER): %w", errno)
	}
	return nil
}
