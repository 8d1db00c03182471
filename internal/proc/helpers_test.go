//go:build linux

package proc

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// deadline bounds every wait in these tests. It is generous on purpose:
// passing tests never get near it.
const deadline = 20 * time.Second

// eventually re-checks cond with a short backoff until it holds. Tests
// use it only to observe kernel states that produce no event (a thread
// entering a blocking system call, a process being reparented); code under
// test never polls like this.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for delay := time.Millisecond; !cond(); delay = min(2*delay, 50*time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("gave up after %v waiting for %s", deadline, what)
		}
		time.Sleep(delay)
	}
}

// shell is a real interactive bash on a real PTY, started the way the
// session starts it: own session, the slave as controlling terminal,
// optionally inside a cgroup. Its output is collected for expect, and it
// is reaped as soon as it exits, as the session does.
type shell struct {
	t       testing.TB
	cmd     *exec.Cmd
	master  *os.File
	ttyPath string
	tty     uint64
	id      Identity

	mu      sync.Mutex
	out     []byte
	changed chan struct{} // closed and replaced on every output chunk

	readDone   chan struct{}
	reaped     chan struct{}
	closeOnce  sync.Once
	killOnExit []Identity
}

func startShell(t testing.TB, cg *Cgroup) *shell {
	t.Helper()
	master, slave, err := openPTY()
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(slave.Name(), &st); err != nil {
		t.Fatalf("stat %s: %v", slave.Name(), err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-i")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TERM=dumb", "PS1=$ ", "HOME=" + t.TempDir()}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if cg != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = cg.FD()
	}
	err = cmd.Start()
	slave.Close()
	if err != nil {
		master.Close()
		t.Fatalf("start bash: %v", err)
	}
	s := &shell{
		t: t, cmd: cmd, master: master, ttyPath: slave.Name(), tty: st.Rdev,
		changed: make(chan struct{}), readDone: make(chan struct{}), reaped: make(chan struct{}),
	}
	go s.read()
	go func() {
		defer close(s.reaped)
		cmd.Wait()
	}()
	t.Cleanup(s.close)
	if s.id, err = IdentityOf(cmd.Process.Pid); err != nil {
		t.Fatalf("identity of the shell: %v", err)
	}
	s.expect(regexp.MustCompile(`\$ $`))
	return s
}

// openPTY is pty.Open with a master that the runtime poller drives.
// pty.Open calls Fd on the master, which puts it into blocking mode for
// good: a Read then sits in read(2), and Close cannot interrupt it or even
// release the descriptor (so the slave is never hung up). A fresh
// non-blocking descriptor for the same open file fixes both.
func openPTY() (master, slave *os.File, err error) {
	m, slave, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	fd, err := unix.Dup(int(m.Fd()))
	if err == nil {
		unix.CloseOnExec(fd)
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		slave.Close()
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), m.Name()), slave, nil
}

func (s *shell) read() {
	defer close(s.readDone)
	buf := make([]byte, 4096)
	for {
		n, err := s.master.Read(buf)
		s.mu.Lock()
		s.out = append(s.out, buf[:n]...)
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// run types a command line.
func (s *shell) run(line string) {
	s.t.Helper()
	if _, err := s.master.Write([]byte(line + "\n")); err != nil {
		s.t.Fatalf("write %q: %v", line, err)
	}
}

// expect waits until the output matches re and returns the submatches of
// the first match. Patterns are written so that they do not match the
// echo of the command that prints them.
func (s *shell) expect(re *regexp.Regexp) []string {
	s.t.Helper()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		s.mu.Lock()
		m := re.FindSubmatch(s.out)
		changed := s.changed
		s.mu.Unlock()
		if m != nil {
			out := make([]string, len(m))
			for i, b := range m {
				out[i] = string(b)
			}
			return out
		}
		select {
		case <-changed:
		case <-timer.C:
			s.mu.Lock()
			defer s.mu.Unlock()
			s.t.Fatalf("output never matched %v; output so far:\n%s", re, s.out)
		}
	}
}

// expectPID waits for "<label>=<pid>" and returns the identity of pid; the
// process is killed when the test ends if it is still around.
func (s *shell) expectPID(label string) Identity {
	s.t.Helper()
	m := s.expect(regexp.MustCompile(`\b` + label + `=(\d+)\r?\n`))
	pid, _ := strconv.Atoi(m[1])
	id, err := IdentityOf(pid)
	if err != nil {
		s.t.Fatalf("%s=%d: %v", label, pid, err)
	}
	s.mu.Lock()
	s.killOnExit = append(s.killOnExit, id)
	s.mu.Unlock()
	return id
}

// foreground is the terminal's foreground process group (TIOCGPGRP on the
// master).
func (s *shell) foreground() int {
	var pgid int
	var err error
	rc, _ := s.master.SyscallConn()
	rc.Control(func(fd uintptr) { pgid, err = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) })
	if err != nil {
		s.t.Fatalf("TIOCGPGRP: %v", err)
	}
	return pgid
}

// waitForegroundJob waits until a job other than the shell holds the
// terminal and returns its process group.
func (s *shell) waitForegroundJob() int {
	s.t.Helper()
	var pgid int
	eventually(s.t, "a foreground job", func() bool {
		pgid = s.foreground()
		return pgid != s.id.PID
	})
	return pgid
}

// hangUp closes the master, which hangs up the session, and waits until
// the shell has exited and been reaped.
func (s *shell) hangUp() {
	s.t.Helper()
	s.master.Close()
	<-s.readDone
	select {
	case <-s.reaped:
	case <-time.After(deadline):
		s.t.Fatalf("bash did not exit after hangup")
	}
}

// close ends whatever is left: the shell, everything in its session and
// below it, and every process a test saw.
func (s *shell) close() {
	s.closeOnce.Do(func() {
		victims := append([]Identity{s.id}, s.killOnExit...)
		if snap, err := Scan(); err == nil {
			for _, st := range append(snap.Descendants(s.id.PID), snap.Session(s.id.PID)...) {
				victims = append(victims, Identity{PID: st.PID, StartTime: st.StartTime})
			}
		}
		s.master.Close()
		for _, id := range victims {
			id.Signal(unix.SIGKILL)
		}
		<-s.readDone
		<-s.reaped
	})
}

// fdCount counts this process's open descriptors. The runtime poller's
// own descriptors appear with its first use, so it is put to use first.
func fdCount(t testing.TB) int {
	t.Helper()
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// startChild starts a plain child process (not on a PTY) in its own
// process group and kills it when the test ends.
func startChild(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// newFIFO makes a named pipe that the test holds open for reading and
// writing: opening it never blocks the test, reads can time out, and data
// written stays in it until read.
func newFIFO(t testing.TB, path string) *os.File {
	t.Helper()
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func writeLine(t testing.TB, f *os.File, line string) {
	t.Helper()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

// pidLine reads one line holding a pid from f and returns its identity.
func pidLine(t testing.TB, f *os.File) Identity {
	t.Helper()
	f.SetReadDeadline(time.Now().Add(deadline))
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		t.Fatalf("read %s: %v", f.Name(), err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("read %s: %q is not a pid", f.Name(), line)
	}
	id, err := IdentityOf(pid)
	if err != nil {
		t.Fatalf("pid %d from %s: %v", pid, f.Name(), err)
	}
	return id
}

// waitGone waits for a process that is not our child to exit, on its
// pidfd.
func waitGone(t testing.TB, id Identity) {
	t.Helper()
	h, err := openHandle(id)
	if err != nil {
		t.Fatal(err)
	}
	if h == nil {
		return
	}
	defer h.close()
	if err := waitExited(context.Background(), []*pidHandle{h}, time.Now().Add(deadline)); err != nil || !h.exited() {
		t.Fatalf("%v did not exit: %v", id, err)
	}
}
