//go:build linux

package proc

import (
	"errors"
	"io/fs"
	"strconv"
	"strings"
)

// Children returns the pids of pid's children. It reads the kernel's list
// of the children of pid's main thread, which is all of them for a
// single-threaded process such as a shell. It walks /proc instead on a
// kernel without that list, or when the list is too long to read at once.
func Children(pid int) ([]int, error) {
	var buf [4096]byte
	path := "/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children"
	data, err := readProcFile(path, buf[:])
	if err == nil && len(data) < len(buf) {
		return parsePIDList(string(data)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if _, serr := ReadStat(pid); serr != nil {
		return nil, serr
	}
	snap, err := Scan()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, st := range snap.stats {
		if st.PPID == pid {
			pids = append(pids, st.PID)
		}
	}
	return pids, nil
}

// parsePIDList parses a list of pids separated by spaces, skipping
// anything that is not one.
func parsePIDList(s string) []int {
	var pids []int
	for _, f := range strings.Fields(s) {
		if pid, ok := parsePID(f); ok {
			pids = append(pids, pid)
		}
	}
	return pids
}
