// Package terminaltest checks that a termapi.Backend keeps the contract the
// terminals service and its tools rely on, in the spirit of
// testing/fstest.TestFS: a backend's own tests call TestBackend with a
// constructor and a few shell-specific commands, and get one subtest per
// rule.
//
// The checks drive the backend directly, without the service, and know
// nothing about any particular shell: everything shell-specific comes in
// through Options. Each subtest builds its own backend and sessions and
// closes them before it ends. The spawn context of every session is
// cancelled as soon as Spawn returns, so every check also shows that a
// session does not depend on it.
package terminaltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Options describes the terminal the backend runs, in terms the kit needs.
type Options struct {
	// EchoCommand returns a command line that makes the terminal print text
	// on a line of its own and then return to its ready state. The kit
	// recognises the output as a line that equals text after trimming
	// spaces, so the terminal's echo of the command line itself does not
	// count. Required.
	EchoCommand func(text string) string
	// ReadCommand is a command that blocks reading the terminal until it is
	// interrupted, e.g. `read line` for a shell. Empty skips the checks
	// that need a busy foreground.
	ReadCommand string
	// ProvesStdinWait declares that the backend settles a send whose
	// foreground is blocked reading the terminal as WaitStdinRead, rather
	// than only inferring idleness. Its sessions must say so
	// (Capabilities.InputProof), and a session that says so is held to it
	// whether or not this is set: a tool trusts the capability.
	ProvesStdinWait bool
	// ExitCommand ends the session's top-level process, e.g. `exit 3`.
	// Empty skips the exit checks.
	ExitCommand string
	// StatusCommand returns a command that ends with the given exit status
	// without ending the session, e.g. `(exit 3)` for a shell. It is used by
	// the Exec checks, which run when sessions run commands
	// (Capabilities.Exec); nil skips the status checks among them.
	StatusCommand func(code int) string
	// CatCommand returns a command that prints the file at path as it is
	// and fails when there is none, e.g. `cat -- PATH` for a shell. The
	// files check reads back what Session.WriteFile wrote with it; nil
	// skips that part.
	CatCommand func(path string) string
	// Dir is the working directory sessions start in; empty means a fresh
	// temporary directory per subtest.
	Dir string
	// SizeCommand is a command that prints the terminal's size as "ROWS
	// COLS" on a line of its own, e.g. `stty size` for a shell. Empty skips
	// the check that the size reached the terminal.
	SizeCommand string
	// AnswerCommand returns a command that reads one line from the
	// terminal and prints it after prefix, on a line of its own, e.g.
	// `read -r line; printf '%s\n' "PREFIX$line"` for a shell: a program
	// typed into while it runs, as the interactive terminal tools do. Nil
	// skips the check.
	AnswerCommand func(prefix string) string
	// LineCommand and SecretCommand block reading a line with the
	// terminal's echo on and off (`stty sane; read line` and `stty sane;
	// read -s line` for a shell). A backend that says how a waiting program
	// takes input (SendResult.Input) must say InputLine and InputSecret for
	// them. Empty skips the check.
	LineCommand, SecretCommand string
	// Timeout bounds every single step (a spawn, a send until it settles, a
	// close). It should exceed the backend's own per-send bound. Zero means
	// one minute.
	Timeout time.Duration
}

// CheckGoroutines arranges for t to fail at its end if goroutines started
// after this call are still running then. Call it first in a test that runs
// TestBackend, so its check runs after every session has been closed. It is
// unreliable next to parallel tests, whose goroutines it would count.
func CheckGoroutines(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	opts = append(opts, goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

// TestBackend runs the conformance checks against backends made by
// newBackend, which is called once per subtest with that subtest's t (so it
// may register cleanups on it).
func TestBackend(t *testing.T, newBackend func(t *testing.T) termapi.Backend, opts Options) {
	t.Helper()
	if opts.EchoCommand == nil {
		t.Fatal("terminaltest: Options.EchoCommand is required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Minute
	}
	k := &kit{opts: opts, newBackend: newBackend}
	checks := []struct {
		name  string
		needs string // the option a check depends on, if any
		run   func(t *testing.T)
	}{
		{"Type", "", k.checkType},
		{"Spawn/Ready", "", k.checkSpawnReady},
		{"Spawn/CancelledContext", "", k.checkSpawnCancelled},
		{"Send/Output", "", k.checkSendOutput},
		{"Send/Viewport", "", k.checkSendViewport},
		{"Send/Isolated", "", k.checkSendIsolated},
		{"Send/Active", "ReadCommand", k.checkSendActive},
		{"Send/StdinWait", "ReadCommand", k.checkStdinWait},
		{"Send/Cancel", "ReadCommand", k.checkSendCancel},
		{"Read/Pages", "", k.checkReadPages},
		{"Signal/Unsupported", "", k.checkSignalUnsupported},
		{"Signal/NoHardKillOfShell", "", k.checkSignalKillShell},
		{"Exit", "ExitCommand", k.checkExit},
		{"Close/Idempotent", "", k.checkCloseIdempotent},
		{"Close/Concurrent", "", k.checkCloseConcurrent},
		{"Close/DuringSend", "ReadCommand", k.checkCloseDuringSend},
		{"Exec/Output", "Executor", k.checkExecOutput},
		{"Exec/Status", "Executor", k.checkExecStatus},
		{"Exec/Busy", "Executor", k.checkExecBusy},
		{"Exec/StdinWait", "Executor", k.checkExecStdinWait},
		{"Exec/Exit", "Executor", k.checkExecExit},
		{"Capabilities/Unsupported", "", k.checkUnsupported},
		{"Files", "", k.checkFiles},
		{"Policy/Unenforceable", "", k.checkPolicyRefused},
		{"Raw/Order", "Raw", k.checkRawOrder},
		{"Raw/SettleEnd", "Raw", k.checkRawSettleEnd},
		{"Exec/TypedInput", "Executor", k.checkExecTypedInput},
		{"Exec/InputMode", "Executor", k.checkExecInputMode},
		{"Signal/QuitCont", "", k.checkSignalQuitCont},
		{"Resize", "Resize", k.checkResize},
		{"List", "", k.checkList},
		{"Attach", "", k.checkAttach},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if missing := (c.needs == "ReadCommand" && opts.ReadCommand == "") ||
				(c.needs == "ExitCommand" && opts.ExitCommand == ""); missing {
				t.Skipf("Options.%s is empty", c.needs)
			}
			if c.needs == "Executor" && !k.executes(t) {
				t.Skip("the backend's sessions do not run commands")
			}
			if c.needs == "Raw" && !k.spawn(t).Capabilities().Raw {
				t.Skip("the backend's sessions keep no raw output")
			}
			if c.needs == "Resize" && !k.spawn(t).Capabilities().Resize {
				t.Skip("the backend's sessions cannot be resized")
			}
			c.run(t)
		})
	}
}

type kit struct {
	opts       Options
	newBackend func(t *testing.T) termapi.Backend
}

// ctx returns a context for one step.
func (k *kit) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), k.opts.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// spawn starts a session and arranges for it to be closed, and checked
// gone, when the subtest ends.
func (k *kit) spawn(t *testing.T) termapi.Session {
	t.Helper()
	b := k.newBackend(t)
	spec := termapi.SpawnSpec{SessionID: "pty-1", OwnerID: "terminaltest", Cwd: k.dir(t), Name: "conformance"}
	ctx, cancel := context.WithTimeout(t.Context(), k.opts.Timeout)
	s, err := b.Spawn(ctx, spec)
	// The session must outlive its spawn context.
	cancel()
	if err != nil {
		t.Fatalf("Spawn(%+v): %v", spec, err)
	}
	if s == nil {
		t.Fatal("Spawn returned neither a session nor an error")
	}
	t.Cleanup(func() { k.close(t, s) })
	return s
}

// dir is the directory sessions start in.
func (k *kit) dir(t *testing.T) string {
	if k.opts.Dir != "" {
		return k.opts.Dir
	}
	return t.TempDir()
}

// close closes s and checks that its process is gone.
func (k *kit) close(t *testing.T, s termapi.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), k.opts.Timeout)
	defer cancel()
	if err := s.Close(ctx, "terminaltest"); err != nil {
		t.Errorf("Close: %v", err)
		return
	}
	wantGone(t, s)
}

// wantGone checks that a closed session's process no longer exists.
func wantGone(t *testing.T, s termapi.Session) {
	t.Helper()
	if st := s.Status(); !st.Exited {
		t.Errorf("Status after Close = %v, want exited", st)
	}
	pid := s.PID()
	if pid <= 0 {
		return
	}
	if gone, known := processGone(pid); known && !gone {
		t.Errorf("process %d still exists after Close returned", pid)
	}
}

// processGone reports whether no process has the id pid, and whether that
// could be told at all on this platform.
func processGone(pid int) (gone, known bool) {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false, false
	}
	defer p.Release()
	err = p.Signal(syscall.Signal(0))
	switch {
	case err == nil, errors.Is(err, syscall.EPERM):
		return false, true
	case errors.Is(err, os.ErrProcessDone), errors.Is(err, syscall.ESRCH):
		return true, true
	}
	return false, false
}

// send runs one send to completion. With drain set it pulls Output until
// io.EOF before waiting, and returns what Output gave; either way it returns
// how the send settled.
func (k *kit) send(t *testing.T, s termapi.Session, req termapi.SendRequest, drain bool) (string, termapi.SendResult) {
	t.Helper()
	ctx := k.ctx(t)
	send, err := s.StartSend(ctx, req)
	if err != nil {
		t.Fatalf("StartSend(%q): %v", req.Text, err)
	}
	if drain {
		return Drain(t, ctx, send)
	}
	res, err := send.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait for %q: %v", req.Text, err)
	}
	return "", res
}

// echo makes the terminal print text, checks that the streamed output
// holds it once and that the send settled because the terminal became
// ready, and returns the streamed output.
func (k *kit) echo(t *testing.T, s termapi.Session, text string) string {
	t.Helper()
	out, res := k.send(t, s, termapi.SendRequest{Text: k.opts.EchoCommand(text), Submit: true, Stream: true}, true)
	wantReady(t, res)
	wantLineOnce(t, out, text)
	return out
}

// wantReady checks a send settled because the terminal was ready again,
// not because of its time bound or an exit.
func wantReady(t *testing.T, res termapi.SendResult) {
	t.Helper()
	if res.Reason != termapi.WaitStdinRead && res.Reason != termapi.WaitInferredIdle {
		t.Fatalf("send settled with %q, want %q or %q", res.Reason, termapi.WaitStdinRead, termapi.WaitInferredIdle)
	}
	if res.Status.Exited {
		t.Fatalf("session status after a ready send = %v", res.Status)
	}
}

// countLine counts the lines of out that equal text after trimming spaces.
func countLine(out, text string) int {
	n := 0
	for line := range strings.SplitSeq(out, "\n") {
		if strings.TrimSpace(line) == text {
			n++
		}
	}
	return n
}

func wantLineOnce(t *testing.T, out, text string) {
	t.Helper()
	if n := countLine(out, text); n != 1 {
		t.Fatalf("line %q appears %d times, want once, in:\n%s", text, n, out)
	}
}

func (k *kit) checkType(t *testing.T) {
	if typ := k.newBackend(t).Type(); typ == "" {
		t.Fatal("Type() is empty")
	}
}

func (k *kit) checkSpawnReady(t *testing.T) {
	s := k.spawn(t)
	// Motd may be empty: a backend whose prompt is empty shows nothing.
	if motd := s.Motd(); !utf8.ValidString(motd) {
		t.Errorf("Motd() = %q is not valid UTF-8", motd)
	}
	if pid := s.PID(); pid < 0 {
		t.Errorf("PID() = %d, want a process id or 0", pid)
	}
	if st := s.Status(); st != termapi.Running {
		t.Errorf("Status() of a new session = %+v, want %+v", st, termapi.Running)
	}
}

func (k *kit) checkSpawnCancelled(t *testing.T) {
	b := k.newBackend(t)
	cause := errors.New("terminaltest: cancelled before spawn")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(cause)
	s, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-1", OwnerID: "terminaltest", Cwd: t.TempDir()})
	if s != nil {
		k.close(t, s)
		t.Fatal("Spawn with a cancelled context returned a session")
	}
	if err == nil {
		t.Fatal("Spawn with a cancelled context returned no error")
	}
}

// checkSendOutput: a caller that streams sees every line once through
// Output, which ends with io.EOF once the send has settled. The settled
// viewport is not checked here: it is a snapshot of what Output had not yet
// returned when the send settled, so it may repeat the stream's last lines.
func (k *kit) checkSendOutput(t *testing.T) {
	s := k.spawn(t)
	ctx := k.ctx(t)
	const text = "terminaltest-output"
	send, err := s.StartSend(ctx, termapi.SendRequest{Text: k.opts.EchoCommand(text), Submit: true, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	out, res := Drain(t, ctx, send)
	wantReady(t, res)
	wantLineOnce(t, out, text)
	// Settled and drained: Output stays at io.EOF, Cancel has nothing left
	// to interrupt.
	if chunk, err := send.Output(ctx); chunk != "" || !errors.Is(err, io.EOF) {
		t.Errorf("Output after the send was drained = %q, %v; want io.EOF", chunk, err)
	}
	if send.Cancel() {
		t.Error("Cancel after the send settled = true, want false")
	}
}

// checkSendViewport: a caller that only waits finds the output in the
// settled viewport.
func (k *kit) checkSendViewport(t *testing.T) {
	s := k.spawn(t)
	const text = "terminaltest-viewport"
	_, res := k.send(t, s, termapi.SendRequest{Text: k.opts.EchoCommand(text), Submit: true}, false)
	wantReady(t, res)
	wantLineOnce(t, res.Viewport, text)
	if res.Truncated {
		t.Error("a one-line send reports Truncated")
	}
}

// checkSendIsolated: a send sees its own output only, never its
// predecessor's.
func (k *kit) checkSendIsolated(t *testing.T) {
	s := k.spawn(t)
	k.echo(t, s, "terminaltest-first")
	out := k.echo(t, s, "terminaltest-second")
	if n := countLine(out, "terminaltest-first"); n != 0 {
		t.Errorf("the second send's output repeats the first send's line:\n%s", out)
	}
	_, res := k.send(t, s, termapi.SendRequest{Text: k.opts.EchoCommand("terminaltest-third"), Submit: true}, false)
	wantReady(t, res)
	if n := countLine(res.Viewport, "terminaltest-second"); n != 0 {
		t.Errorf("the third send's viewport repeats the second send's line:\n%s", res.Viewport)
	}
}

// startRead starts the read command. The send cannot have settled by the
// time StartSend returns: proving a stdin wait or inferring idleness takes
// at least one observation of the terminal after the write.
func (k *kit) startRead(t *testing.T, s termapi.Session) (context.Context, termapi.Send) {
	t.Helper()
	ctx := k.ctx(t)
	send, err := s.StartSend(ctx, termapi.SendRequest{Text: k.opts.ReadCommand, Submit: true})
	if err != nil {
		t.Fatalf("StartSend(%q): %v", k.opts.ReadCommand, err)
	}
	return ctx, send
}

// interrupt ends the read a send is blocked on and waits for the terminal
// to be ready. A backend that proves waits for input can settle the send
// (stdin_read, the program still reading) before Cancel comes; then a
// SIGINT and an empty send bring the terminal back, as a tool recovers. It
// reports whether Cancel did it.
func interrupt(t *testing.T, ctx context.Context, s termapi.Session, send termapi.Send) bool {
	t.Helper()
	cancelled := send.Cancel()
	res, err := send.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait after Cancel: %v", err)
	}
	wantReady(t, res)
	if cancelled {
		return true
	}
	if res.Prompt {
		t.Fatalf("a send blocked on input settled at the prompt (%s) before Cancel", res.Reason)
	}
	if _, err := s.Signal(ctx, termapi.SIGINT); err != nil {
		t.Fatalf("SIGINT after the send settled: %v", err)
	}
	nudge, err := s.StartSend(ctx, termapi.SendRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err = nudge.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	wantReady(t, res)
	return false
}

func (k *kit) checkSendActive(t *testing.T) {
	s := k.spawn(t)
	// A backend that proves waits for input may settle the first send
	// (stdin_read, its program still reading) before the second arrives,
	// and then the slot is free and the second may start: that run shows
	// nothing, and the check runs again. A first send that settled any
	// other way (at the prompt, after the second's text ended its read)
	// means two sends were live.
	for attempt := 1; ; attempt++ {
		ctx, first := k.startRead(t, s)
		second, err := s.StartSend(ctx, termapi.SendRequest{Text: k.opts.EchoCommand("terminaltest-second"), Submit: true})
		if err == nil {
			res, werr := first.Wait(ctx)
			if werr != nil || res.Reason != termapi.WaitStdinRead || res.Prompt || attempt == 5 {
				second.Cancel()
				t.Fatalf("a second StartSend while one is live succeeded (attempt %d; the first settled %q, prompt %v, %v)", attempt, res.Reason, res.Prompt, werr)
			}
			// The second's line went to the program that was reading,
			// which ends with it.
			res, err = second.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantReady(t, res)
			continue
		}
		if !errors.Is(err, termapi.ErrSendActive) {
			t.Fatalf("second StartSend = %v, want %v", err, termapi.ErrSendActive)
		}
		interrupt(t, ctx, s, first)
		k.echo(t, s, "terminaltest-after")
		return
	}
}

func (k *kit) checkStdinWait(t *testing.T) {
	s := k.spawn(t)
	proves := k.proves(t, s)
	ctx, send := k.startRead(t, s)
	res, err := send.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if proves {
		if res.Reason != termapi.WaitStdinRead {
			t.Fatalf("a send blocked on input settled with %q, want %q", res.Reason, termapi.WaitStdinRead)
		}
	} else {
		wantReady(t, res)
	}
	// The program still waits; an empty send interrupted at once brings the
	// terminal back, the way a tool recovers.
	nudge, err := s.StartSend(ctx, termapi.SendRequest{})
	if err != nil {
		t.Fatal(err)
	}
	interrupt(t, ctx, s, nudge)
	k.echo(t, s, "terminaltest-recovered")
}

// proves reports whether s proves waits for input, checking that the
// capability and the option agree.
func (k *kit) proves(t *testing.T, s termapi.Session) bool {
	t.Helper()
	caps := s.Capabilities()
	if k.opts.ProvesStdinWait && !caps.InputProof {
		t.Errorf("Options.ProvesStdinWait is set, but the session reports Capabilities.InputProof false: a tool would take its proofs for silence")
	}
	return k.opts.ProvesStdinWait || caps.InputProof
}

// checkSendCancel: Cancel interrupts a send blocked on input. A backend
// that proves the wait may settle the send first; then the check runs
// again, and it fails if Cancel never got its chance.
func (k *kit) checkSendCancel(t *testing.T) {
	s := k.spawn(t)
	for attempt := 1; ; attempt++ {
		ctx, send := k.startRead(t, s)
		cancelled := interrupt(t, ctx, s, send)
		k.echo(t, s, "terminaltest-after-cancel")
		if cancelled {
			return
		}
		if attempt == 5 {
			t.Fatal("every send settled before its Cancel (5 attempts)")
		}
	}
}

// lineCount is how many lines a read page's text holds.
func lineCount(text string) int {
	if text == "" {
		return 0
	}
	return strings.Count(text, "\n") + 1
}

func (k *kit) checkReadPages(t *testing.T) {
	s := k.spawn(t)
	texts := []string{"terminaltest-page-1", "terminaltest-page-2", "terminaltest-page-3"}
	for _, text := range texts {
		k.echo(t, s, text)
	}
	read := func(req termapi.ReadRequest) termapi.ReadResult {
		t.Helper()
		res, err := s.Read(req)
		if err != nil {
			t.Fatalf("Read(%+v): %v", req, err)
		}
		return res
	}

	all := read(termapi.ReadRequest{})
	if all.TotalLines < len(texts) || all.LineBegin != 0 || all.LineEnd != lineCount(all.Text) || all.LineEnd > all.TotalLines {
		t.Fatalf("Read({}) = %+v: inconsistent page", all)
	}
	last := -1
	for _, text := range texts {
		i := strings.Index(all.Text, text)
		if i <= last {
			t.Fatalf("Read({}) does not show %q after the earlier output:\n%s", text, all.Text)
		}
		last = i
	}
	if all.Truncated || all.LineEnd != all.TotalLines {
		// A backend that keeps little may cut the full page; the paging
		// arithmetic below needs all of it.
		t.Logf("Read({}) returned part of the scrollback (%d of %d lines)", all.LineEnd, all.TotalLines)
		return
	}

	// Line i counted from the newest is page {Offset: i, Count: 1}.
	lines := strings.Split(all.Text, "\n")
	for i := range lines {
		page := read(termapi.ReadRequest{Offset: i, Count: 1})
		text := lines[len(lines)-1-i]
		want := termapi.ReadResult{Text: text, TotalLines: all.TotalLines, LineBegin: i, LineEnd: i + lineCount(text)}
		if page != want {
			t.Fatalf("Read({Offset: %d, Count: 1}) = %+v, want %+v", i, page, want)
		}
	}
	two := read(termapi.ReadRequest{Offset: 1, Count: 2})
	if want := strings.Join(lines[len(lines)-3:len(lines)-1], "\n"); two.Text != want || two.LineBegin != 1 {
		t.Fatalf("Read({Offset: 1, Count: 2}) = %+v, want text %q from line 1", two, want)
	}
	for _, offset := range []int{all.TotalLines, all.TotalLines + 5} {
		past := read(termapi.ReadRequest{Offset: offset})
		if past.Text != "" || past.LineBegin != offset || past.LineEnd != offset || past.TotalLines != all.TotalLines {
			t.Fatalf("Read({Offset: %d}) past the end = %+v, want an empty page at %d", offset, past, offset)
		}
	}
}

func (k *kit) checkSignalUnsupported(t *testing.T) {
	s := k.spawn(t)
	for _, sig := range []termapi.Signal{"SIGUSR1", ""} {
		if _, err := s.Signal(k.ctx(t), sig); !errors.Is(err, termapi.ErrUnsupportedSignal) {
			t.Errorf("Signal(%q) = %v, want %v", sig, err, termapi.ErrUnsupportedSignal)
		}
	}
}

func (k *kit) checkSignalKillShell(t *testing.T) {
	s := k.spawn(t)
	_, err := s.Signal(k.ctx(t), termapi.SIGKILL)
	if !errors.Is(err, termapi.ErrRefuseKillShell) && !errors.Is(err, termapi.ErrNoForeground) && !errors.Is(err, termapi.ErrUnsupportedSignal) {
		t.Fatalf("SIGKILL with the top-level process in the foreground = %v, want a refusal", err)
	}
	if st := s.Status(); st != termapi.Running {
		t.Fatalf("status after the refused SIGKILL = %v", st)
	}
	k.echo(t, s, "terminaltest-still-here")
}

func (k *kit) checkExit(t *testing.T) {
	s := k.spawn(t)
	_, res := k.send(t, s, termapi.SendRequest{Text: k.opts.ExitCommand, Submit: true, Stream: true}, true)
	if res.Reason != termapi.WaitSessionExit {
		t.Fatalf("the exit command settled with %q, want %q", res.Reason, termapi.WaitSessionExit)
	}
	if !res.Status.Exited || !s.Status().Exited {
		t.Fatalf("status after exit: result %v, session %v; want exited", res.Status, s.Status())
	}
	if _, err := s.StartSend(k.ctx(t), termapi.SendRequest{Text: "x", Submit: true}); !errors.Is(err, termapi.ErrSessionExited) {
		t.Fatalf("StartSend after exit = %v, want %v", err, termapi.ErrSessionExited)
	}
}

func (k *kit) checkCloseIdempotent(t *testing.T) {
	s := k.spawn(t)
	k.close(t, s)
	k.close(t, s)
	_, err := s.StartSend(k.ctx(t), termapi.SendRequest{Text: "x", Submit: true})
	if !errors.Is(err, termapi.ErrSessionClosing) && !errors.Is(err, termapi.ErrSessionExited) {
		t.Fatalf("StartSend after Close = %v, want %v or %v", err, termapi.ErrSessionClosing, termapi.ErrSessionExited)
	}
}

func (k *kit) checkCloseConcurrent(t *testing.T) {
	s := k.spawn(t)
	ctx := k.ctx(t)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = s.Close(ctx, "terminaltest") })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Close %d: %v", i, err)
		}
	}
	wantGone(t, s)
}

func (k *kit) checkCloseDuringSend(t *testing.T) {
	s := k.spawn(t)
	proves := s.Capabilities().InputProof
	ctx, send := k.startRead(t, s)
	if err := s.Close(ctx, "terminaltest"); err != nil {
		t.Fatalf("Close during a send: %v", err)
	}
	wantGone(t, s)
	// The send must settle (as an exit, or with an error) rather than hang.
	// A session that proves waits for input may have settled it before
	// the Close, the program proven waiting; that is no hang either.
	res, err := send.Wait(ctx)
	if err == nil && proves && res.Reason == termapi.WaitStdinRead && !res.Prompt {
		return
	}
	if err == nil && res.Reason != termapi.WaitSessionExit {
		t.Fatalf("a send cut off by Close settled with %q (prompt %v), want %q or an error", res.Reason, res.Prompt, termapi.WaitSessionExit)
	} else if err != nil && ctx.Err() != nil {
		t.Fatalf("a send cut off by Close did not settle: %v", err)
	}
}

// executes reports whether the backend's sessions run commands.
func (k *kit) executes(t *testing.T) bool {
	return k.spawn(t).Capabilities().Exec
}

// exec runs command through Exec, streaming, within one step.
func (k *kit) exec(t *testing.T, s termapi.Session, command string) (string, termapi.SendResult) {
	t.Helper()
	return Exec(t, k.ctx(t), s, command)
}

// wantCompleted checks that a command ran to its end with status code.
func wantCompleted(t *testing.T, res termapi.SendResult, code int) {
	t.Helper()
	if res.Exec.State != termapi.ExecCompleted || res.Exec.ExitCode != code || !res.Prompt || res.Reason != termapi.WaitStdinRead {
		t.Fatalf("settled %s (prompt %v) with %+v, want completed with status %d", res.Reason, res.Prompt, *res.Exec, code)
	}
}

// checkExecOutput: a command's output is its own, once, and the command
// completes with status 0.
func (k *kit) checkExecOutput(t *testing.T) {
	s := k.spawn(t)
	for _, text := range []string{"terminaltest-exec-1", "terminaltest-exec-2"} {
		out, res := k.exec(t, s, k.opts.EchoCommand(text))
		wantCompleted(t, res, 0)
		wantLineOnce(t, out, text)
		if strings.Contains(out, "terminaltest-exec-1") && text != "terminaltest-exec-1" {
			t.Fatalf("the second command's output repeats the first's:\n%s", out)
		}
	}
	if _, err := s.Exec(k.ctx(t), termapi.ExecRequest{}); err == nil {
		t.Fatal("Exec of an empty command succeeded")
	}
}

// checkExecStatus: the exit status comes from the shell.
func (k *kit) checkExecStatus(t *testing.T) {
	if k.opts.StatusCommand == nil {
		t.Skip("Options.StatusCommand is nil")
	}
	s := k.spawn(t)
	for _, code := range []int{0, 1, 3, 127} {
		_, res := k.exec(t, s, k.opts.StatusCommand(code))
		wantCompleted(t, res, code)
	}
}

// checkExecBusy: a command cannot start while a send is live.
func (k *kit) checkExecBusy(t *testing.T) {
	if k.opts.ReadCommand == "" {
		t.Skip("Options.ReadCommand is empty")
	}
	s := k.spawn(t)
	ctx, first := k.startRead(t, s)
	_, err := s.Exec(ctx, termapi.ExecRequest{Command: k.opts.EchoCommand("terminaltest-busy")})
	if !errors.Is(err, termapi.ErrSendActive) && !errors.Is(err, termapi.ErrShellBusy) {
		t.Fatalf("Exec while a send is live = %v, want %v or %v", err, termapi.ErrSendActive, termapi.ErrShellBusy)
	}
	interrupt(t, ctx, s, first)
	_, res := k.exec(t, s, k.opts.EchoCommand("terminaltest-after-busy"))
	wantCompleted(t, res, 0)
}

// checkExecStdinWait: a command that waits for input settles with the
// command still running; an interrupt and an empty send bring the shell
// back with the command ended, and the next command runs.
func (k *kit) checkExecStdinWait(t *testing.T) {
	if k.opts.ReadCommand == "" {
		t.Skip("needs Options.ReadCommand")
	}
	s := k.spawn(t)
	if !k.proves(t, s) {
		t.Skip("the session does not prove waits for input")
	}
	_, res := k.exec(t, s, k.opts.ReadCommand)
	if res.Reason != termapi.WaitStdinRead || res.Prompt || res.Exec.State != termapi.ExecRunning {
		t.Fatalf("a command waiting for input settled %s (prompt %v) with %+v, want stdin_read and running", res.Reason, res.Prompt, *res.Exec)
	}
	ctx := k.ctx(t)
	if _, err := s.Signal(ctx, termapi.SIGINT); err != nil {
		t.Fatal(err)
	}
	_, res = k.send(t, s, termapi.SendRequest{Stream: true}, true)
	if !res.Prompt || res.Exec == nil || (res.Exec.State != termapi.ExecAbandoned && res.Exec.State != termapi.ExecCompleted) {
		t.Fatalf("after the interrupt: %s (prompt %v) with %+v, want the shell back and the command ended", res.Reason, res.Prompt, res.Exec)
	}
	_, res = k.exec(t, s, k.opts.EchoCommand("terminaltest-after-wait"))
	wantCompleted(t, res, 0)
}

// checkExecExit: a command that ends the session settles as an exit, and
// no command starts after it.
func (k *kit) checkExecExit(t *testing.T) {
	if k.opts.ExitCommand == "" {
		t.Skip("Options.ExitCommand is empty")
	}
	s := k.spawn(t)
	_, res := k.exec(t, s, k.opts.ExitCommand)
	if res.Reason != termapi.WaitSessionExit || !res.Status.Exited || res.Exec.State != termapi.ExecRunning {
		t.Fatalf("the exit command settled %s with %v and %+v, want session_exit after the command ran", res.Reason, res.Status, *res.Exec)
	}
	_, err := s.Exec(k.ctx(t), termapi.ExecRequest{Command: k.opts.EchoCommand("x")})
	if !errors.Is(err, termapi.ErrSessionExited) {
		t.Fatalf("Exec after the exit = %v, want %v", err, termapi.ErrSessionExited)
	}
}

// checkUnsupported: a call the session's capabilities rule out fails
// with an error wrapping errors.ErrUnsupported, never hangs or pretends.
func (k *kit) checkUnsupported(t *testing.T) {
	s := k.spawn(t)
	caps := s.Capabilities()
	ctx := k.ctx(t)
	if !caps.Exec {
		if _, err := s.Exec(ctx, termapi.ExecRequest{Command: k.opts.EchoCommand("x")}); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Exec without the capability = %v, want errors.ErrUnsupported", err)
		}
	}
	if !caps.Raw {
		if _, err := s.Output(ctx, 0); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Output without the capability = %v, want errors.ErrUnsupported", err)
		}
	}
	if !caps.Resize {
		if err := s.Resize(ctx, termapi.Size{Rows: 30, Cols: 100}); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Resize without the capability = %v, want errors.ErrUnsupported", err)
		}
	}
}

// checkFiles: a session that writes files for its shell (Capabilities.Files)
// writes, appends, replaces and removes one where its shell reads it, in
// parts as large as a long output's; refuses names that are not plain; and
// one that does not says so with errors.ErrUnsupported. A session whose
// shell reads this machine's files (HostFiles) puts them where this
// process reads them too, and removes them when it closes.
func (k *kit) checkFiles(t *testing.T) {
	s := k.spawn(t)
	caps := s.Capabilities()
	ctx := k.ctx(t)
	const name = "terminaltest-file.txt"
	if !caps.Files {
		if _, err := s.WriteFile(ctx, termapi.FileRequest{Name: name, Data: []byte("x")}); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("WriteFile without the capability = %v, want errors.ErrUnsupported", err)
		}
		if caps.HostFiles {
			t.Fatal("Capabilities.HostFiles without Files")
		}
		return
	}
	for _, bad := range []string{"", ".hidden", "../escape", "a/b", "nul\x00", strings.Repeat("n", 129)} {
		if _, err := s.WriteFile(ctx, termapi.FileRequest{Name: bad, Data: []byte("x")}); !errors.Is(err, termapi.ErrBadFileName) {
			t.Errorf("WriteFile(%q) = %v, want %v", bad, err, termapi.ErrBadFileName)
		}
	}
	write := func(req termapi.FileRequest) string {
		t.Helper()
		path, err := s.WriteFile(ctx, req)
		if err != nil {
			t.Fatalf("WriteFile(%s, %d bytes, append %v, remove %v): %v", req.Name, len(req.Data), req.Append, req.Remove, err)
		}
		if path == "" {
			t.Fatalf("WriteFile(%s) returned no path", req.Name)
		}
		return path
	}
	path := write(termapi.FileRequest{Name: name, Data: []byte("terminaltest-file-1\n")})
	if again := write(termapi.FileRequest{Name: name, Data: []byte("terminaltest-file-2\n"), Append: true}); again != path {
		t.Fatalf("appending to %s wrote %s", path, again)
	}
	k.wantFile(t, s, path, "terminaltest-file-1\nterminaltest-file-2\n")
	// A large file, as a long output's copy: more than one part of any
	// protocol, byte for byte.
	var big strings.Builder
	for i := 0; big.Len() < 3<<19; i++ {
		fmt.Fprintf(&big, "terminaltest-line-%07d\n", i)
	}
	bigPath := write(termapi.FileRequest{Name: "terminaltest-big.txt", Data: []byte(big.String())})
	k.wantFileLines(t, s, bigPath, big.String())
	// Writing a name again replaces the file.
	if again := write(termapi.FileRequest{Name: name, Data: []byte("terminaltest-file-3\n")}); again != path {
		t.Fatalf("rewriting %s wrote %s", path, again)
	}
	k.wantFile(t, s, path, "terminaltest-file-3\n")
	write(termapi.FileRequest{Name: name, Remove: true})
	if caps.HostFiles {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after its removal: %v", path, err)
		}
	}
	if k.executes(t) && k.opts.CatCommand != nil {
		if _, res := k.exec(t, s, k.opts.CatCommand(path)); res.Exec.State != termapi.ExecCompleted || res.Exec.ExitCode == 0 {
			t.Fatalf("reading %s after its removal: %+v, want a failure", path, *res.Exec)
		}
	}
	k.close(t, s)
	if caps.HostFiles {
		if _, err := os.Stat(bigPath); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after the session closed: %v", bigPath, err)
		}
	}
	if _, err := s.WriteFile(k.ctx(t), termapi.FileRequest{Name: name, Data: []byte("x")}); err == nil {
		t.Fatal("WriteFile after Close succeeded")
	}
}

// wantFile checks that the shell reads want at path (and this process too,
// where the shell reads this machine's files).
func (k *kit) wantFile(t *testing.T, s termapi.Session, path, want string) {
	t.Helper()
	if s.Capabilities().HostFiles {
		if data, err := os.ReadFile(path); err != nil || string(data) != want {
			t.Fatalf("%s here: %q, %v; want %q", path, data, err, want)
		}
	}
	if k.opts.CatCommand == nil || !s.Capabilities().Exec {
		return
	}
	out, res := k.exec(t, s, k.opts.CatCommand(path))
	wantCompleted(t, res, 0)
	if out != want {
		t.Fatalf("the shell reads %s as %q, want %q", path, out, want)
	}
}

// wantFileLines is wantFile for a file too large to compare in one piece:
// the shell's lines, pulled as they come, must be want's.
func (k *kit) wantFileLines(t *testing.T, s termapi.Session, path, want string) {
	t.Helper()
	if s.Capabilities().HostFiles {
		if data, err := os.ReadFile(path); err != nil || string(data) != want {
			t.Fatalf("%s here: %d bytes, %v; want %d bytes", path, len(data), err, len(want))
		}
	}
	if k.opts.CatCommand == nil || !s.Capabilities().Exec {
		return
	}
	ctx := k.ctx(t)
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: k.opts.CatCommand(path), Stream: true})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	rest := want
	for {
		text, err := send.Output(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Output: %v", err)
		}
		if !strings.HasPrefix(rest, text) {
			t.Fatalf("the shell reads %s differently at byte %d: %q", path, len(want)-len(rest), text[:min(len(text), 80)])
		}
		rest = rest[len(text):]
	}
	res, err := send.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantCompleted(t, res, 0)
	if rest != "" {
		t.Fatalf("the shell read %s short by %d bytes", path, len(rest))
	}
}

// checkPolicyRefused: a spawn asking for a sandbox mode or limits the
// backend's sessions would not run under fails, naming what; nothing is
// left running.
func (k *kit) checkPolicyRefused(t *testing.T) {
	b := k.newBackend(t)
	caps := k.spawnOn(t, b, termapi.Policy{}).Capabilities()
	// A mode the sessions do not run in by default, and limits tighter
	// than any the backend enforces.
	mode := termapi.SandboxReadOnly
	if caps.Sandbox == termapi.SandboxReadOnly {
		mode = termapi.SandboxFullAccess
	}
	tight := termapi.Limits{Pids: 1}
	if caps.Limits.Pids == 1 {
		tight.Memory = 1
	}
	for _, tc := range []struct {
		policy termapi.Policy
		want   error
	}{
		{termapi.Policy{Limits: tight}, termapi.ErrLimitsUnsupported},
		{termapi.Policy{Sandbox: mode}, termapi.ErrSandboxUnsupported},
	} {
		s, err := b.Spawn(k.ctx(t), termapi.SpawnSpec{SessionID: "terminaltest-policy", OwnerID: "terminaltest", Cwd: k.dir(t), Policy: tc.policy})
		if err == nil {
			got := s.Capabilities()
			k.closeNow(t, s)
			if tc.policy.Check(got) != nil {
				t.Fatalf("a spawn asking for %+v ran a session that does not enforce it (%+v)", tc.policy, got)
			}
			continue // the backend can enforce it after all
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("a spawn asking for %+v failed with %v, want %v", tc.policy, err, tc.want)
		}
	}
}

// checkRawOrder: the raw output holds what the commands printed, in the
// order they printed it, and a reader resumes where it left off.
func (k *kit) checkRawOrder(t *testing.T) {
	s := k.spawn(t)
	ctx := k.ctx(t)
	var (
		raw   strings.Builder
		start int64 = -1 // the first position read: what the start printed may be gone
		pos   int64
	)
	words := []string{"terminaltest-raw-1", "terminaltest-raw-2", "terminaltest-raw-3"}
	for _, w := range words {
		k.send(t, s, termapi.SendRequest{Text: k.opts.EchoCommand(w), Submit: true, Stream: true}, true)
		for !strings.Contains(raw.String(), w) {
			c, err := s.Output(ctx, pos)
			if err != nil {
				t.Fatalf("Output(%d): %v; so far %q", pos, err, raw.String())
			}
			if start < 0 {
				start = c.Pos
			} else if c.Pos != pos {
				t.Fatalf("Output(%d) started at %d: bytes were lost in a window the test never outran", pos, c.Pos)
			}
			raw.Write(c.Data)
			pos = c.End()
		}
	}
	text := raw.String()
	for i := 1; i < len(words); i++ {
		// The last echo of each word is its output; the command line's echo
		// may come before.
		if strings.LastIndex(text, words[i-1]) > strings.LastIndex(text, words[i]) {
			t.Fatalf("raw output out of order:\n%q", text)
		}
	}
	// A second reader from the first position sees the same bytes.
	again, err := s.Output(ctx, start)
	if err != nil || !strings.HasPrefix(text, string(again.Data)) && !strings.HasPrefix(string(again.Data), text) {
		t.Fatalf("a second reader got %q (%v), want what the first read: %q", again.Data, err, text)
	}
}

// checkResize: the new size reaches the terminal.
func (k *kit) checkResize(t *testing.T) {
	s := k.spawn(t)
	if err := s.Resize(k.ctx(t), termapi.Size{Rows: 33, Cols: 101}); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	if err := s.Resize(k.ctx(t), termapi.Size{Rows: 0, Cols: 101}); err == nil {
		t.Fatal("Resize to 0 rows succeeded")
	}
	if k.opts.SizeCommand == "" {
		return
	}
	out, _ := k.send(t, s, termapi.SendRequest{Text: k.opts.SizeCommand, Submit: true, Stream: true}, true)
	if !hasLine(out, "33 101") {
		t.Fatalf("after Resize(33, 101) the terminal says:\n%s", out)
	}
}

// checkList: a backend that lists its sessions lists each open one once,
// with its owner and name, and forgets it once closed.
func (k *kit) checkList(t *testing.T) {
	b := k.newBackend(t)
	s := k.spawnOn(t, b, termapi.Policy{})
	infos, err := b.List(k.ctx(t))
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("the backend lists no sessions")
	}
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	n := 0
	for _, in := range infos {
		if in.ID == "terminaltest-on" {
			n++
			if in.OwnerID != "terminaltest" || in.Name != "listed" || in.Status.Exited || in.PID != s.PID() {
				t.Errorf("List describes the session as %+v", in)
			}
		}
	}
	if n != 1 {
		t.Fatalf("List = %+v, want the open session once", infos)
	}
	k.closeNow(t, s)
	infos, err = b.List(k.ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.ID == "terminaltest-on" {
			t.Fatalf("a closed session is still listed: %+v", in)
		}
	}
}

// checkAttach: a backend that hands sessions over gives the same
// terminal back by id; an unknown id is ErrNoSession.
func (k *kit) checkAttach(t *testing.T) {
	b := k.newBackend(t)
	s := k.spawnOn(t, b, termapi.Policy{})
	if !s.Capabilities().Attach {
		if _, err := b.Attach(k.ctx(t), "terminaltest-on"); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Attach without the capability = %v, want errors.ErrUnsupported", err)
		}
		return
	}
	if _, err := b.Attach(k.ctx(t), "terminaltest-unknown"); !errors.Is(err, termapi.ErrNoSession) {
		t.Fatalf("Attach of an unknown id = %v, want %v", err, termapi.ErrNoSession)
	}
	a, err := b.Attach(k.ctx(t), "terminaltest-on")
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if a.PID() != s.PID() {
		t.Fatalf("Attach gave pid %d, the session has %d", a.PID(), s.PID())
	}
	out, res := k.send(t, a, termapi.SendRequest{Text: k.opts.EchoCommand("terminaltest-attached"), Submit: true, Stream: true}, true)
	if !hasLine(out, "terminaltest-attached") || res.Status.Exited {
		t.Fatalf("a send through the attached session: %s\n%s", res.Reason, out)
	}
}

// spawnOn starts a session of b with policy, named for List and Attach,
// and closes it when t ends.
func (k *kit) spawnOn(t *testing.T, b termapi.Backend, policy termapi.Policy) termapi.Session {
	t.Helper()
	s, err := b.Spawn(k.ctx(t), termapi.SpawnSpec{SessionID: "terminaltest-on", OwnerID: "terminaltest", Name: "listed", Cwd: k.dir(t), Policy: policy})
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	t.Cleanup(func() { k.closeNow(t, s) })
	return s
}

// closeNow closes s within one step.
func (k *kit) closeNow(t *testing.T, s termapi.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), k.opts.Timeout)
	defer cancel()
	if err := s.Close(ctx, "terminaltest"); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// hasLine reports whether out has a line that equals want, spaces trimmed.
func hasLine(out, want string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.TrimSpace(line) == want {
			return true
		}
	}
	return false
}

// checkRawSettleEnd: a settled send says where the raw output stood
// (RawEnd), and what the send printed is before it.
func (k *kit) checkRawSettleEnd(t *testing.T) {
	s := k.spawn(t)
	ctx := k.ctx(t)
	word := "terminaltest-raw-end"
	_, res := k.send(t, s, termapi.SendRequest{Text: k.opts.EchoCommand(word), Submit: true, Stream: true}, true)
	if res.RawEnd <= 0 {
		t.Fatalf("RawEnd = %d after a send that printed %q, want its position", res.RawEnd, word)
	}
	var raw strings.Builder
	for pos := int64(0); pos < res.RawEnd; {
		c, err := s.Output(ctx, pos)
		if err != nil {
			t.Fatalf("Output(%d): %v", pos, err)
		}
		raw.Write(c.Data[:min(int64(len(c.Data)), res.RawEnd-c.Pos)])
		pos = c.End()
	}
	if countLine(strings.ReplaceAll(raw.String(), "\r", ""), word) == 0 {
		t.Fatalf("the raw output before RawEnd %d lacks %q:\n%q", res.RawEnd, word, raw.String())
	}
}

// checkExecTypedInput: text typed while a command runs reaches it, and the
// command's end and status come after.
func (k *kit) checkExecTypedInput(t *testing.T) {
	if k.opts.AnswerCommand == nil {
		t.Skip("Options.AnswerCommand is nil")
	}
	s := k.spawn(t)
	ctx := k.ctx(t)
	out, res := Exec(t, ctx, s, k.opts.AnswerCommand("terminaltest-got:"))
	if res.Exec == nil || res.Exec.State == termapi.ExecCompleted || res.Status.Exited {
		t.Fatalf("a command waiting for a line settled %s with %+v", res.Reason, res.Exec)
	}
	text, res := k.send(t, s, termapi.SendRequest{Text: "terminaltest-typed", Submit: true, Stream: true}, true)
	out += text
	for i := 0; res.Exec != nil && res.Exec.State != termapi.ExecCompleted && i < 10; i++ {
		text, res = k.send(t, s, termapi.SendRequest{Stream: true}, true)
		out += text
	}
	wantCompleted(t, res, 0)
	if countLine(out+res.Viewport, "terminaltest-got:terminaltest-typed") == 0 {
		t.Fatalf("the typed line did not reach the command; output:\n%s", out)
	}
}

// checkExecInputMode: a backend that tells how a waiting program takes
// input tells a line read with echo from one without.
func (k *kit) checkExecInputMode(t *testing.T) {
	if k.opts.LineCommand == "" || k.opts.SecretCommand == "" || !k.opts.ProvesStdinWait {
		t.Skip("needs Options.LineCommand, SecretCommand and ProvesStdinWait")
	}
	for _, c := range []struct {
		command string
		want    termapi.InputMode
	}{{k.opts.LineCommand, termapi.InputLine}, {k.opts.SecretCommand, termapi.InputSecret}} {
		s := k.spawn(t)
		_, res := Exec(t, k.ctx(t), s, c.command)
		if res.Reason != termapi.WaitStdinRead || res.Prompt {
			t.Fatalf("%q settled %s (prompt %v), want a proven wait for input", c.command, res.Reason, res.Prompt)
		}
		if res.Input != termapi.InputUnknown && res.Input != c.want {
			t.Fatalf("%q waits with input mode %q, want %q (or unknown)", c.command, res.Input, c.want)
		}
		k.closeNow(t, s)
	}
}

// checkSignalQuitCont: SIGQUIT and SIGCONT are delivered or refused as
// unsupported, never anything else, and the terminal goes on.
func (k *kit) checkSignalQuitCont(t *testing.T) {
	s := k.spawn(t)
	for _, sig := range []termapi.Signal{termapi.SIGQUIT, termapi.SIGCONT} {
		if _, err := s.Signal(k.ctx(t), sig); err != nil && !errors.Is(err, termapi.ErrUnsupportedSignal) && !errors.Is(err, termapi.ErrNoForeground) {
			t.Fatalf("Signal(%s) = %v, want delivery or %v", sig, err, termapi.ErrUnsupportedSignal)
		}
	}
	k.send(t, s, termapi.SendRequest{Stream: true}, true)
	k.echo(t, s, "terminaltest-after-quit-cont")
}
