//go:build linux

package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ErrMalformedStat reports /proc/<pid>/stat text that does not have the
// kernel's layout. ParseStat wraps it with the reason.
var ErrMalformedStat = errors.New("malformed /proc stat")

// Stat is the part of /proc/<pid>/stat this package uses.
type Stat struct {
	PID     int
	PPID    int
	PGRP    int
	Session int
	// TTYNr is the controlling terminal's device number in the kernel's
	// encoding, which equals st_rdev for every pty (0 when there is none).
	TTYNr int
	// TPGID is the foreground process group of the controlling terminal, -1
	// when there is none.
	TPGID int
	// Threads is the number of threads (field 20).
	Threads int
	// State is the one-letter scheduler state (R, S, D, T, t, Z, X, ...).
	State byte
	// UTime and STime are the user and system time the process has used,
	// in clock ticks (fields 14 and 15).
	UTime, STime uint64
	// StartTime is in clock ticks since boot. With PID it names a process
	// across pid reuse.
	StartTime uint64
	// Comm is the command name as the kernel shows it; it may contain
	// spaces and parentheses.
	Comm string
}

// userHZ is the clock tick of /proc's times: USER_HZ, which Linux fixes at
// 100 for every program it shows times to.
const userHZ = 100

// CPU is the user and system time the process has used.
func (s Stat) CPU() time.Duration {
	return time.Duration(s.UTime+s.STime) * time.Second / userHZ
}

// Dead reports whether the process has exited (zombie or dead) and only
// waits to be reaped.
func (s Stat) Dead() bool { return dead(s.State) }

func dead(state byte) bool { return state == 'Z' || state == 'X' || state == 'x' }

// statFields is how many fields ParseStat needs after the comm: state (field
// 3) through starttime (field 22).
const statFields = 22 - 2

// ParseStat parses the text of /proc/<pid>/stat. The comm may contain any
// byte, including spaces and ')', so the fixed fields are located from the
// last ')' in the text, never by splitting the whole line.
func ParseStat(data []byte) (Stat, error) {
	open := bytes.IndexByte(data, '(')
	end := bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("%w: no (comm)", ErrMalformedStat)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(data[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("%w: pid: %v", ErrMalformedStat, err)
	}
	rest := data[end+1:]
	if len(rest) < 2 || rest[0] != ' ' {
		return Stat{}, fmt.Errorf("%w: no fields after comm", ErrMalformedStat)
	}
	var fields [statFields][]byte
	n := 0
	for f := range bytes.FieldsSeq(rest[1:]) {
		fields[n] = f
		if n++; n == statFields {
			break
		}
	}
	if n < statFields {
		return Stat{}, fmt.Errorf("%w: %d fields after comm, want at least %d", ErrMalformedStat, n, statFields)
	}
	if len(fields[0]) != 1 {
		return Stat{}, fmt.Errorf("%w: state %q is not one character", ErrMalformedStat, fields[0])
	}
	st := Stat{PID: pid, State: fields[0][0], Comm: string(data[open+1 : end])}
	for _, f := range []struct {
		dst  *int
		idx  int
		name string
	}{
		{&st.PPID, 1, "ppid"},
		{&st.PGRP, 2, "pgrp"},
		{&st.Session, 3, "session"},
		{&st.TTYNr, 4, "tty_nr"},
		{&st.TPGID, 5, "tpgid"},
		{&st.Threads, 17, "num_threads"},
	} {
		v, err := strconv.Atoi(string(fields[f.idx]))
		if err != nil {
			return Stat{}, fmt.Errorf("%w: %s: %v", ErrMalformedStat, f.name, err)
		}
		*f.dst = v
	}
	for _, f := range []struct {
		dst  *uint64
		idx  int
		name string
	}{
		{&st.UTime, 11, "utime"},
		{&st.STime, 12, "stime"},
	} {
		if *f.dst, err = strconv.ParseUint(string(fields[f.idx]), 10, 64); err != nil {
			return Stat{}, fmt.Errorf("%w: %s: %v", ErrMalformedStat, f.name, err)
		}
	}
	st.StartTime, err = strconv.ParseUint(string(fields[statFields-1]), 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("%w: starttime: %v", ErrMalformedStat, err)
	}
	return st, nil
}

// ReadStat reads and parses /proc/<pid>/stat. A process that does not
// exist (or exited while being read) gives an error matching
// fs.ErrNotExist.
func ReadStat(pid int) (Stat, error) {
	var buf [statBufSize]byte
	data, err := readProcFile(pidPath(pid, "stat"), buf[:])
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(data)
}

// statBufSize holds any stat line: 52 numeric fields and a comm of at most
// 64 bytes fit in well under 1 KiB.
const statBufSize = 1024

// readProcFile reads a small procfs file into buf with plain system calls
// (open, read, close): procfs renders these files in one read, and the
// os.File machinery would add a stat and a poller registration per file,
// which shows on a /proc walk. A process that vanished mid-read (ESRCH)
// reads as not existing.
func readProcFile(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, procError("open", path, err)
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, procError("read", path, err)
		}
		if m == 0 {
			break
		}
		n += m
	}
	return buf[:n], nil
}

func procError(op, path string, err error) error {
	if err == unix.ESRCH {
		err = unix.ENOENT
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// pidPath builds /proc/<pid>/<name>.
func pidPath(pid int, name string) string {
	b := make([]byte, 0, 32)
	b = append(b, "/proc/"...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, '/')
	b = append(b, name...)
	return string(b)
}

// RunTime is how long pid has run on a CPU. It reads the nanosecond count
// of /proc/<pid>/schedstat, and falls back to the 10 ms ticks of stat on a
// kernel built without scheduler statistics. A process that does not exist
// gives an error matching fs.ErrNotExist.
func RunTime(pid int) (time.Duration, error) {
	var buf [128]byte
	data, err := readProcFile(pidPath(pid, "schedstat"), buf[:])
	if err != nil {
		st, serr := ReadStat(pid)
		if serr != nil {
			return 0, serr
		}
		return st.CPU(), nil
	}
	return parseSchedstat(data)
}

// parseSchedstat takes the first field of a schedstat line: nanoseconds on
// a CPU, then nanoseconds waiting for one and the count of time slices.
// (The wait is of no use to us: it grows only once the wait has ended.)
func parseSchedstat(data []byte) (time.Duration, error) {
	field, _, _ := bytes.Cut(bytes.TrimSpace(data), []byte{' '})
	ns, err := strconv.ParseUint(string(field), 10, 63)
	if err != nil {
		return 0, fmt.Errorf("%w: schedstat %q: %v", ErrMalformedStat, data, err)
	}
	return time.Duration(ns), nil
}
