//go:build linux

package terminalbash

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/plugins/terminal/screen"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// A command's own terminal.
//
// Every program a command starts in the background writes to the stdout it
// inherited. On the session's one terminal, a job that prints without
// pause (a dev server, `while :; do echo; done &`) drowns what the next
// commands print, and no byte says who wrote it. So each command writes to
// a terminal of its own (Exec redirects the command line's stdout and
// stderr to it; stdin, the controlling terminal and job control stay on
// the session's terminal): what arrives there while the command runs is
// its output, jobs it started included, and what arrives after it ended is
// a job's, reported as background output. A terminal no job holds any more
// is kept for the next command, so a command costs one redirection and a
// check at its end, not a new terminal.
type cmdTerm struct {
	master *os.File
	raw    syscall.RawConn
	// slave is this side's descriptor of the terminal, held while a
	// command may use it (a master whose last slave closed would report a
	// hang-up); -1 once the terminal belongs to jobs alone.
	slave int
	// path names the terminal in the shell's file system; rdev is its
	// device number.
	path   string
	rdev   uint64
	render *screen.Renderer
	// job: the command that used it has ended, and something it started
	// still holds it.
	job bool
	// closed: the master is closed, or being closed by teardown.
	closed bool
	// pause bounds a reader's backpressure wait (holdBack).
	pause *time.Timer
}

// maxJobTerms bounds the terminals a session keeps for jobs: past it, a
// command writes to the session's terminal as before.
const maxJobTerms = 64

// openCmdTerm makes a terminal for commands: in the shell's own devpts
// instance when it has one (ptmx names that instance's multiplexer, through
// the shell's root), sized like the session's terminal, its output
// processed as the session's terminal's is, and its master non-blocking
// and read through the runtime's poller.
func (s *session) openCmdTerm(size termapi.Size) (*cmdTerm, error) {
	fd, err := unix.Open(s.ptmx, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", s.ptmx, err)
	}
	fail := func(err error) (*cmdTerm, error) {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		return fail(fmt.Errorf("unlock a command's terminal: %w", err))
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		return fail(fmt.Errorf("name a command's terminal: %w", err))
	}
	slave, err := openPeer(fd)
	if err != nil {
		return fail(err)
	}
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err == nil {
		// Output as on the session's terminal (newlines become CRLF, which
		// the renderer takes); nothing is typed here.
		tio.Oflag |= unix.OPOST | unix.ONLCR
		tio.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG
		err = unix.IoctlSetTermios(fd, unix.TCSETS, tio)
	}
	if err == nil {
		err = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(size.Rows), Col: uint16(size.Cols)})
	}
	if err != nil {
		unix.Close(slave)
		return fail(fmt.Errorf("set a command's terminal up: %w", err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(slave, &st); err != nil {
		unix.Close(slave)
		return fail(fmt.Errorf("stat a command's terminal: %w", err))
	}
	ct := &cmdTerm{
		master: os.NewFile(uintptr(fd), "/dev/ptmx"),
		slave:  slave,
		rdev:   st.Rdev,
		path:   s.ptsDir + "/" + strconv.FormatUint(uint64(n), 10),
		render: screen.NewRenderer(s.cfg.maxRead),
	}
	if ct.raw, err = ct.master.SyscallConn(); err != nil {
		unix.Close(slave)
		ct.master.Close()
		return nil, fmt.Errorf("a command's terminal: %w", err)
	}
	return ct, nil
}

// mentionsExec reports whether command has the word exec where a command
// word can be. A command that replaces the shell (`exec bash`) writes to
// the session's terminal: the new shell would take the command's terminal,
// on its stderr, for its own, which is not its controlling terminal, and
// go without job control. `find -exec` and the like do not count; a word
// exec that is an argument (`docker exec`) makes the command use the
// session's terminal, as every command did before, and nothing worse.
func mentionsExec(command string) bool {
	for i := 0; ; {
		j := strings.Index(command[i:], "exec")
		if j < 0 {
			return false
		}
		at := i + j
		end := at + len("exec")
		before := at == 0 || strings.IndexByte(" \t\n;&|(){}!`", command[at-1]) >= 0
		after := end == len(command) || strings.IndexByte(" \t\n;&|)<>`", command[end]) >= 0
		if before && after {
			return true
		}
		i = end
	}
}

// openPeer opens the slave of master, whatever name it has where.
func openPeer(master int) (int, error) {
	slave, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return -1, fmt.Errorf("open a command's terminal: %w", errno)
	}
	return int(slave), nil
}

// termForCommandLocked returns the terminal the next command writes to:
// the spare one, or a new one; nil when commands share the session's
// terminal (configured so, too many job terminals, or none can be made).
func (s *session) termForCommandLocked() *cmdTerm {
	if s.ptmx == "" {
		return nil
	}
	if ct := s.spare; ct != nil {
		s.spare = nil
		return ct
	}
	if s.jobTerms >= maxJobTerms {
		return nil
	}
	ct, err := s.openCmdTerm(s.size)
	if err != nil {
		s.log.Warn("commands write to the session's terminal: a terminal of their own failed", "err", err)
		s.ptmx = ""
		return nil
	}
	s.cmdTerms = append(s.cmdTerms, ct)
	s.workers.Add(1)
	go s.readCmdTerm(ct)
	return ct
}

// releaseCmdTermLocked runs when the command that wrote to ct has ended
// and its output has been drained: what ct shows from now on is jobs'
// output. ct is kept for the next command when nothing holds it but this
// side (closing this side's descriptor then hangs the master up); else it
// becomes a job terminal, closed by its reader once its last job lets go.
func (s *session) releaseCmdTermLocked(ct *cmdTerm) {
	s.deliverCmdLocked(ct, ct.render.Flush())
	if line := ct.render.Break(nil); len(line) > 0 {
		s.Scr.Scroll.Append(line)
	}
	unix.Close(ct.slave)
	ct.slave = -1
	if s.spare == nil && !ct.closed && hungUp(ct) {
		var err error
		ct.raw.Control(func(fd uintptr) { ct.slave, err = openPeer(int(fd)) })
		if err == nil && ct.slave >= 0 {
			s.spare = ct
			return
		}
		ct.slave = -1
	}
	ct.job = true
	s.jobTerms++
}

// hungUp reports whether no descriptor of ct's slave is open.
func hungUp(ct *cmdTerm) bool {
	hup := false
	ct.raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, 0); err != unix.EINTR {
				break
			}
		}
		hup = fds[0].Revents&unix.POLLHUP != 0
	})
	return hup
}

// readCmdTerm reads ct until it is closed or its jobs have all let go of
// it. Each read happens under the session lock together with handing on
// what it returned, as the read loop does with the session's terminal.
func (s *session) readCmdTerm(ct *cmdTerm) {
	defer s.workers.Done()
	var gone bool
	read := func(fd uintptr) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		buf := getReadBuf()
		defer putReadBuf(buf)
		n, err := unix.Read(int(fd), *buf)
		switch {
		case err == unix.EAGAIN:
			return false
		case err == unix.EINTR:
		case n > 0:
			s.consumeCmdLocked(ct, (*buf)[:n])
		default:
			// EIO (nothing holds the slave any more: this side let go when
			// the command ended, and its jobs have ended since) or worse.
			gone = true
		}
		return true
	}
	for {
		err := ct.raw.Read(read)
		if err == nil && !gone {
			s.holdBackCmd(ct)
			continue
		}
		s.mu.Lock()
		s.deliverCmdLocked(ct, ct.render.Flush())
		s.dropCmdTermLocked(ct)
		closeIt := !ct.closed
		ct.closed = true
		s.mu.Unlock()
		if closeIt {
			ct.master.Close()
		}
		if err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.EOF) {
			s.log.Debug("reading a command's terminal ended", "err", err)
		}
		return
	}
}

// cmdRdevUnlocked is the device number of the running command's terminal,
// or 0: a program that opens it anew to read it (`head </dev/fd/1`) or
// makes it its terminal waits on it, and that proves a wait as a read of the
// session's terminal does. It takes the lock (the probe runs without it).
func (s *session) cmdRdevUnlocked() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ct := s.curTerm; ct != nil {
		return ct.rdev
	}
	return 0
}

// dropCmdTermLocked forgets ct.
func (s *session) dropCmdTermLocked(ct *cmdTerm) {
	for i, t := range s.cmdTerms {
		if t == ct {
			s.cmdTerms = append(s.cmdTerms[:i], s.cmdTerms[i+1:]...)
			break
		}
	}
	if ct.job {
		s.jobTerms--
	}
	if s.spare == ct {
		s.spare = nil
	}
}

// consumeCmdLocked renders output of a command's terminal and hands it on:
// the running command's own (its jobs' included) like the session
// terminal's output; a job's, of a command that has ended, as background
// output, which is no sign of life of the command running now.
func (s *session) consumeCmdLocked(ct *cmdTerm, p []byte) {
	s.Scr.Raw.Write(p)
	lines := ct.render.Write(p)
	if s.curTerm != ct {
		s.deliverCmdLocked(ct, lines)
		return
	}
	s.deliverLocked(lines)
	now := time.Now()
	s.lastOutput = now
	if s.claim == nil {
		s.probeEvery = s.cfg.probeMin
		s.nextProbe = earliest(now.Add(s.cfg.probeMin), s.lastProbe.Add(s.cfg.probeMax))
	}
	s.armLocked()
}

// deliverCmdLocked hands on committed lines of ct: to the running command
// when ct is its terminal; else, while a command runs, to the background
// output its send reports; between commands, as the session terminal's
// output goes (the next send, or the next Exec's background output).
func (s *session) deliverCmdLocked(ct *cmdTerm, lines []byte) {
	switch {
	case len(lines) == 0:
	case s.curTerm == ct:
		s.deliverLocked(lines)
	case s.cur != nil && !s.cur.ended:
		s.Scr.Scroll.Append(lines)
		s.jobOut.Append(lines)
	default:
		s.deliverLocked(lines)
	}
}

// drainCmdLocked reads what the command terminals hold, as drainLocked
// does for the session's terminal: the running command's, and the jobs',
// so that what a job printed before the command ended (a job the command
// waited for) is reported with it.
func (s *session) drainCmdLocked(maxReads int) {
	if len(s.cmdTerms) == 0 {
		return
	}
	buf := getReadBuf()
	defer putReadBuf(buf)
	for _, ct := range s.cmdTerms {
		if !ct.closed && ct != s.spare {
			s.drainTermLocked(ct, *buf, maxReads)
		}
	}
}

// cmdDrainReads bounds the reads of the running command's terminal made
// before the session terminal's output is taken (consumeLocked).
const cmdDrainReads = 4

// drainTermLocked reads what ct holds, at most maxReads chunks.
func (s *session) drainTermLocked(ct *cmdTerm, buf []byte, maxReads int) {
	for range maxReads {
		var n int
		var ioErr error
		err := ct.raw.Control(func(fd uintptr) {
			for {
				if n, ioErr = unix.Read(int(fd), buf); ioErr != unix.EINTR {
					return
				}
			}
		})
		if err != nil || ioErr != nil || n <= 0 {
			return
		}
		s.consumeCmdLocked(ct, buf[:n])
	}
}

// holdBackCmd is holdBack for the running command's terminal: while the
// streaming caller is behind, its reader waits, and the command with it.
// A job's terminal is never held back: its output is bounded instead.
func (s *session) holdBackCmd(ct *cmdTerm) { s.holdBackReader(ct, &ct.pause) }

// passResume hands a caller's pull on to the other reader that may be held
// back (the read loop, or the running command's terminal's reader): the
// one token went to whichever waited first.
func passResume(resume chan struct{}) {
	select {
	case resume <- struct{}{}:
	default:
	}
}

// resizeCmdTermsLocked gives the command terminals the session's size.
func (s *session) resizeCmdTermsLocked(size termapi.Size) {
	for _, ct := range s.cmdTerms {
		if !ct.closed && !ct.job {
			ct.raw.Control(func(fd uintptr) {
				unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(size.Rows), Col: uint16(size.Cols)})
			})
		}
	}
}

// closeCmdTerms closes every command terminal (teardown): their readers
// end. Not under the lock, which a read in progress holds.
func (s *session) closeCmdTerms() {
	s.mu.Lock()
	var masters []*os.File
	for _, ct := range s.cmdTerms {
		if !ct.closed {
			ct.closed = true
			masters = append(masters, ct.master)
		}
		if ct.slave >= 0 {
			unix.Close(ct.slave)
			ct.slave = -1
		}
	}
	s.mu.Unlock()
	for _, m := range masters {
		m.Close()
	}
}
