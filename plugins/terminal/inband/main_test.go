package inband

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

func TestMain(m *testing.M) {
	// A descriptor this process inherited (from whatever started the
	// tests) would be inherited by the shells too, as a shell on another
	// host never has it, and the probe would rightly not prove a program
	// that has a pipe open beside the terminal.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		panic(err)
	}
	terminaltest.Main(m)
}

const waitLong = terminaltest.WaitLong

// ptyLink is a local bash on a PTY: the far end of the protocol without a
// network in between, as real as the remote ones.
type ptyLink struct {
	// files are the session's files, "at the far end": written by bash
	// beside the shell, as over SSH.
	files  *FarFiles
	master *os.File
	cmd    *exec.Cmd
	done   chan struct{}
	status termapi.Status
	once   sync.Once
}

func newPTYLink(t testing.TB) *ptyLink {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noediting", "--noprofile", "--norc", "-i")
	cmd.Env = append(os.Environ(), "TERM=dumb")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		master.Close()
		t.Fatal(err)
	}
	// A blocking master's Close waits for the read in progress; a
	// non-blocking one, in the runtime poller, interrupts it.
	fd, err := unix.FcntlInt(master.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	master.Close()
	if err != nil {
		t.Fatal(err)
	}
	l := &ptyLink{master: os.NewFile(uintptr(fd), "ptmx"), cmd: cmd, done: make(chan struct{}), files: NewFarFiles(localRun)}
	go func() {
		err := cmd.Wait()
		l.status = termapi.Status{Exited: true, ExitCode: cmd.ProcessState.ExitCode()}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			l.status = termapi.Status{Exited: true, ExitCode: -1, Signal: unix.SignalName(ws.Signal())}
		} else if err != nil && !errors.As(err, new(*exec.ExitError)) {
			l.status = termapi.Status{Exited: true, ExitCode: -1}
		}
		close(l.done)
	}()
	return l
}

func (l *ptyLink) Read(p []byte) (int, error) {
	n, err := l.master.Read(p)
	if err != nil && n == 0 {
		// EIO: the last holder of the slave has gone.
		return 0, io.EOF
	}
	return n, nil
}

func (l *ptyLink) Write(p []byte) (int, error) { return l.master.Write(p) }

func (l *ptyLink) Wait() termapi.Status { <-l.done; return l.status }

func (l *ptyLink) Resize(size termapi.Size) error {
	return pty.Setsize(l.master, &pty.Winsize{Rows: uint16(size.Rows), Cols: uint16(size.Cols)})
}

// Close removes the session's files and hangs the terminal up, as an SSH
// server does at logout.
func (l *ptyLink) Close() error {
	var err error
	l.once.Do(func() {
		err = l.files.Purge(context.Background())
		l.master.Close()
	})
	<-l.done
	return err
}

// localRun runs argv on this machine, the far end of a ptyLink (FarRun).
func localRun(ctx context.Context, argv []string, stdin []byte) (FarResult, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errOut
	err := cmd.Run()
	res := FarResult{Stdout: out.Bytes(), Stderr: errOut.Bytes()}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		res.Code = ee.ExitCode()
		return res, nil
	}
	return res, err
}

var errStart = errors.New("test: shell did not start")

func options(id string) Options {
	return Options{ID: id, Prefix: "test", Where: "local pty", StartErr: errStart, Idle: 10 * time.Minute, Timeout: time.Minute}
}

// spawn starts a session on a local PTY that the test closes at its end.
func spawn(t *testing.T) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := Start(ctx, newPTYLink(t), "", options("pty-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := s.Close(ctx, "test over"); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// drain reads a send's output to io.EOF, then its result.
func drain(t testing.TB, ctx context.Context, send termapi.Send) (string, termapi.SendResult) {
	t.Helper()
	return terminaltest.Drain(t, ctx, send)
}

// mustComplete runs command and checks that it completed with status code.
func mustComplete(t testing.TB, s *Session, command string, code int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	return terminaltest.MustComplete(t, ctx, s, command, code)
}

// ptyBackend serves sessions on local PTYs, for the conformance kit. It
// lists and hands over its sessions as the SSH and Docker backends do.
type ptyBackend struct {
	t        *testing.T
	sessions backendkit.Sessions[*Session]
}

func (b *ptyBackend) List(context.Context) ([]termapi.Info, error) {
	return backendkit.List(&b.sessions), nil
}

func (b *ptyBackend) Attach(_ context.Context, id string) (termapi.Session, error) {
	return backendkit.Find(&b.sessions, id)
}

func (b *ptyBackend) Type() string { return "inband-pty" }

func (b *ptyBackend) Spawn(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if err := spec.Policy.Check(termapi.Capabilities{}); err != nil {
		return nil, err
	}
	o := options(spec.SessionID)
	o.OwnerID, o.Name, o.Attachable, o.Forget = spec.OwnerID, spec.Name, true, b.sessions.Remove
	o.Idle = 2 * time.Second
	link := newPTYLink(b.t)
	o.WriteFile = link.files.Write
	s, err := Start(ctx, link, spec.Cwd, o)
	if err != nil {
		return nil, err
	}
	b.sessions.Add(s)
	return s, nil
}

func TestConformance(t *testing.T) {
	terminaltest.CheckGoroutines(t)
	terminaltest.TestBackend(t, func(t *testing.T) termapi.Backend {
		return &ptyBackend{t: t}
	}, terminaltest.Options{
		EchoCommand:   func(text string) string { return "printf '%s\\n' " + strconv.Quote(text) },
		ReadCommand:   "read line",
		AnswerCommand: func(prefix string) string { return `read -r line; printf '%s\n' "` + prefix + `$line"` },
		LineCommand:   "stty sane 2>/dev/null; read line",
		SecretCommand: "stty sane 2>/dev/null; read -s line",
		ExitCommand:   "exit 3",
		StatusCommand: func(code int) string { return "(exit " + strconv.Itoa(code) + ")" },
		SizeCommand:   "stty size",
		CatCommand:    func(path string) string { return "cat -- '" + path + "'" },
	})
}
