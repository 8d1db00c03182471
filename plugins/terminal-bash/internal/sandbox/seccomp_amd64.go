//go:build linux

package sandbox

import "golang.org/x/sys/unix"

const nativeArch = unix.AUDIT_ARCH_X86_64

// foreignNRBit marks an x32 system call.
const foreignNRBit = 0x40000000

var modeCalls = []modeCall{
	{unix.SYS_CHMOD, 1}, {unix.SYS_FCHMOD, 1}, {unix.SYS_FCHMODAT, 2}, {unix.SYS_FCHMODAT2, 2},
	{unix.SYS_OPEN, 2}, {unix.SYS_OPENAT, 3}, {unix.SYS_CREAT, 1}, {unix.SYS_MKNOD, 1}, {unix.SYS_MKNODAT, 2},
}
