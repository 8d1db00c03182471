//go:build linux

package terminalbash

import (
	"math"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// keepInheritedFromShells marks every descriptor of this process close-on-
// exec, once. Go opens its own descriptors that way, but it does not touch
// those the process inherited: a descriptor a parent left open without
// close-on-exec (an MCP client's pipe, a test runner's log) would otherwise
// reach every shell and every program the shells start. Nothing in dsh
// relies on handing such a descriptor on.
var keepInheritedFromShells = sync.OnceFunc(func() {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Before Linux 5.11: one fcntl per open descriptor.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
})
