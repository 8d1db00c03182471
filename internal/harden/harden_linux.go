//go:build linux

package harden

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// NotDumpable makes the calling process non-dumpable. Its shells run as the
// same user, and a same-user process may otherwise read the parent's
// /proc/PID/environ (every secret the shells' environment was scrubbed of)
// and /proc/PID/mem (other sessions' ids and output). A non-dumpable
// process's /proc files belong to root and need CAP_SYS_PTRACE, and it
// leaves no core dump. Children get their own flag back at execve, so
// the shells, and dsh's reading of their /proc, are unaffected.
func NotDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
