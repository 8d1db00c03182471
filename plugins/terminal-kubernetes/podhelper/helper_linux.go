//go:build linux

package podhelper

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/proc"
)

// Main runs the helper with its arguments (without the program's name) and
// returns the exit status.
func Main(args []string) int {
	if len(args) == 0 {
		return usage()
	}
	switch args[0] {
	case "install":
		if len(args) != 2 {
			return usage()
		}
		if err := install(args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "dsh-kube-helper install:", err)
			return 1
		}
		return 0
	case "hold":
		return hold()
	case "shell":
		if len(args) < 4 || args[2] != "--" {
			return usage()
		}
		return runShell(args[1], args[3:])
	case "control":
		if len(args) != 2 {
			return usage()
		}
		if err := relay(args[1], os.Stdin, os.Stdout, 30*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "dsh-kube-helper control:", err)
			return 1
		}
		return 0
	}
	return usage()
}

func usage() int {
	fmt.Fprintln(os.Stderr, "usage: dsh-kube-helper install DEST | hold | shell NAME -- COMMAND... | control NAME")
	return 2
}

// install copies the running executable to dest, whole or not at all.
func install(dest string) error {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := dest + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dest)
}

// hold is a container's first process: it reaps the orphans that the
// shells' background jobs leave to it and exits on SIGTERM or SIGINT (the
// pod's deletion).
func hold() int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGCHLD)
	for sig := range sigs {
		if sig != unix.SIGCHLD {
			return 0
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
	return 0
}

// inheritedSignals are the signals that a process may be started with
// ignored, and that a shell started with them ignored keeps ignored in
// every job: they are taken over by a handler, which exec resets.
var inheritedSignals = []os.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU}

// shellHelper is the shell's parent and the server of its control socket.
type shellHelper struct {
	shell   proc.Identity
	tracker *proc.Tracker

	mu         sync.Mutex // one request at a time; the final sweep too
	promptRead proc.BlockedRead
	swept      bool
	conns      []net.Conn // the control connections, told how the shell ended
}

// runShell starts argv as the shell and serves name until it has ended.
func runShell(name string, argv []string) int {
	absorbed := make(chan os.Signal, 8)
	signal.Notify(absorbed, inheritedSignals...)
	ln, err := net.Listen("unix", SocketName(name))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dsh-kube-helper shell:", err)
		return 126
	}
	defer ln.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	// The terminal is the controlling terminal of this process's session
	// (the runtime made it so): give it up, so that the shell can have it
	// as the controlling terminal of a session of its own, as on a
	// terminal of its own. Giving it up signals SIGHUP to this process's
	// group, which the handler above absorbs. Where this process leads no
	// session, the shell shares its session and its terminal.
	if sid, err := unix.Getsid(0); err == nil && sid == os.Getpid() {
		if _, err := unix.IoctlGetTermios(0, unix.TCGETS); err == nil {
			if err := unix.IoctlSetInt(0, unix.TIOCNOTTY, 0); err == nil {
				cmd.SysProcAttr.Setsid = true
				cmd.SysProcAttr.Setctty = true
				cmd.SysProcAttr.Ctty = 0
			}
		}
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "dsh-kube-helper shell:", err)
		return 127
	}
	h := &shellHelper{}
	h.shell, err = proc.IdentityOf(cmd.Process.Pid)
	if err != nil {
		h.shell = proc.Identity{PID: cmd.Process.Pid}
	}
	h.tracker = proc.NewTracker(h.shell)
	stop := make(chan struct{})
	go h.track(stop)
	go h.serve(ln)
	waitErr := cmd.Wait()
	close(stop)
	h.finish()
	code, end := 0, AnsEnd+" code 0"
	var exitErr *exec.ExitError
	switch {
	case errors.As(waitErr, &exitErr):
		code = exitErr.ExitCode()
		end = AnsEnd + " code " + strconv.Itoa(code)
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
			end = AnsEnd + " signal " + unix.SignalName(ws.Signal())
		}
	case waitErr != nil:
		code, end = 127, AnsEnd+" code 127"
	}
	h.tell(end)
	return code
}

// tell writes line to every control connection.
func (h *shellHelper) tell(line string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, conn := range h.conns {
		conn.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(conn, line+"\n")
	}
}

// trackEvery is how often the tracker looks for the shell's processes
// between requests: a process that is born and leaves the shell's tree
// faster is missed by the sweep only if it also starts a session of its
// own.
const trackEvery = 250 * time.Millisecond

func (h *shellHelper) track(stop <-chan struct{}) {
	t := time.NewTicker(trackEvery)
	defer t.Stop()
	for {
		if snap, err := proc.Scan(); err == nil {
			h.tracker.Refresh(snap)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// finish sweeps what the shell left behind once it has ended, unless a
// sweep request did already.
func (h *shellHelper) finish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.swept {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if snap, err := proc.Scan(); err == nil {
		h.tracker.Refresh(snap)
	}
	if err := proc.Terminate(ctx, proc.Target{Tracker: h.tracker, Grace: time.Second}); err != nil {
		fmt.Fprintln(os.Stderr, "dsh-kube-helper: after the shell ended:", err)
	}
}

func (h *shellHelper) serve(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go h.handle(conn)
	}
}

func (h *shellHelper) handle(conn net.Conn) {
	defer conn.Close()
	h.mu.Lock()
	h.conns = append(h.conns, conn)
	h.mu.Unlock()
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		// The answer is written under the lock: the shell's end waits for
		// it, so that the answer to a sweep leaves before the helper
		// exits.
		h.mu.Lock()
		_, err := io.WriteString(conn, h.answer(strings.Fields(sc.Text()))+"\n")
		h.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// answer serves one request. The caller holds h.mu.
func (h *shellHelper) answer(req []string) string {
	if len(req) == 0 {
		return AnsErr + " " + ErrCodeUnsupported + " empty request"
	}
	switch {
	case req[0] == ReqProbe && len(req) == 1:
		if h.waitingForInput() {
			return AnsOK + " 1"
		}
		return AnsOK + " 0"
	case req[0] == ReqLearn && len(req) == 1:
		h.learnPromptRead()
		return AnsOK
	case req[0] == ReqSignal && len(req) == 2:
		return h.signal(req[1])
	case req[0] == ReqSweep && len(req) == 1:
		return h.sweep()
	}
	return AnsErr + " " + ErrCodeUnsupported + " unknown request " + strconv.Quote(strings.Join(req, " "))
}

// waitingForInput proves that the terminal's foreground job is blocked
// reading it. The shell itself in the foreground counts only when it
// reads elsewhere than at its prompt (a read builtin).
func (h *shellHelper) waitingForInput() bool {
	st, err := proc.ReadStat(h.shell.PID)
	if err != nil || st.StartTime != h.shell.StartTime || st.TPGID <= 0 || st.TTYNr == 0 {
		return false
	}
	if st.TPGID == st.PID {
		rd, ok := proc.ReadingTerminal(st.PID, uint64(st.TTYNr))
		return ok && h.promptRead.Count != 0 && rd != h.promptRead
	}
	ok, _ := proc.WaitingOnTerminal(st.TPGID, uint64(st.TTYNr))
	return ok
}

// learnPromptRead records the read the shell blocks in at its prompt. It
// is asked right after the shell showed its first prompt, so the shell is
// there or nearly.
func (h *shellHelper) learnPromptRead() {
	st, err := proc.ReadStat(h.shell.PID)
	if err != nil || st.TTYNr == 0 {
		return
	}
	for delay := time.Millisecond; delay < time.Second; delay *= 2 {
		if rd, ok := proc.ReadingTerminal(h.shell.PID, uint64(st.TTYNr)); ok {
			h.promptRead = rd
			return
		}
		time.Sleep(delay)
	}
}

// signals are those a request may name: the ones a terminal has no
// character for, and the others for completeness.
var signals = map[string]unix.Signal{
	"SIGINT": unix.SIGINT, "SIGTERM": unix.SIGTERM, "SIGKILL": unix.SIGKILL,
	"SIGTSTP": unix.SIGTSTP, "SIGHUP": unix.SIGHUP, "SIGQUIT": unix.SIGQUIT, "SIGCONT": unix.SIGCONT,
}

// signal delivers sig to the terminal's foreground group, never SIGKILL to
// the shell's own.
func (h *shellHelper) signal(name string) string {
	sig, ok := signals[name]
	if !ok {
		return AnsErr + " " + ErrCodeUnsupported + " " + strconv.Quote(name)
	}
	st, err := proc.ReadStat(h.shell.PID)
	if err != nil || st.StartTime != h.shell.StartTime {
		return AnsErr + " " + ErrCodeNoForeground + " the shell has ended"
	}
	pgid := st.TPGID
	if pgid <= 0 {
		return AnsErr + " " + ErrCodeNoForeground + " the terminal has no foreground group"
	}
	if sig == unix.SIGKILL && pgid == h.shell.PID {
		return AnsErr + " " + ErrCodeShell + " the shell itself is in the foreground"
	}
	// The group must still be the foreground when it is signalled: the
	// kernel keeps only groups of the shell's session there.
	if again, err := proc.ReadStat(h.shell.PID); err != nil || again.TPGID != pgid {
		return AnsErr + " " + ErrCodeNoForeground + " the foreground group changed while signalling"
	}
	if err := unix.Kill(-pgid, sig); err != nil && err != unix.ESRCH {
		return AnsErr + " " + ErrCodeFailed + " " + err.Error()
	}
	return AnsOK + " " + strconv.Itoa(pgid)
}

// sweep ends every process of the shell and the shell, and waits for
// them.
func (h *shellHelper) sweep() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if snap, err := proc.Scan(); err == nil {
		h.tracker.Refresh(snap)
	}
	err := proc.Terminate(ctx, proc.Target{Shell: h.shell, Tracker: h.tracker, Grace: time.Second})
	h.swept = err == nil
	if err != nil {
		return AnsErr + " " + ErrCodeFailed + " " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return AnsOK
}

// relay connects to the shell helper serving name, retrying for up to
// patience while it starts, and copies in to it and its answers to out
// until either side ends.
func relay(name string, in io.Reader, out io.Writer, patience time.Duration) error {
	deadline := time.Now().Add(patience)
	var conn net.Conn
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		var err error
		conn, err = net.Dial("unix", SocketName(name))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(delay)
	}
	defer conn.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(out, conn)
	}()
	io.Copy(conn, in)
	conn.(*net.UnixConn).CloseWrite()
	<-done
	return nil
}
