//go:build linux

package sandbox

import "golang.org/x/sys/unix"

const nativeArch = unix.AUDIT_ARCH_AARCH64

const foreignNRBit = 0

var modeCalls = []modeCall{
	{unix.SYS_FCHMOD, 1}, {unix.SYS_FCHMODAT, 2}, {unix.SYS_FCHMODAT2, 2},
	{unix.SYS_OPENAT, 3}, {unix.SYS_MKNODAT, 2},
}
