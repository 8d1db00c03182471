//go:build linux

package terminalbash

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/screen"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func TestStatePersistsAcrossSends(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), t.TempDir())
	if got := s.Motd(); got != "" {
		t.Errorf("motd = %q, want nothing: the prompt is empty", got)
	}
	mustPrompt(t, s, "export KEEP=ok; cd /")
	res := mustPrompt(t, s, `printf "%s %s\n" "$PWD" "$KEEP"`)
	if got := outputLines(res.Viewport); !slices.Equal(got, []string{"/ ok"}) {
		t.Errorf("output %q, want [\"/ ok\"]", got)
	}
	mustPrompt(t, s, "(exit 7)")
	res = mustPrompt(t, s, `echo "status=$?"`)
	if got := outputLines(res.Viewport); !slices.Equal(got, []string{"status=7"}) {
		t.Errorf("$? after the prompt: %q, want status=7", got)
	}
	if res.Status != termapi.Running || res.Truncated {
		t.Errorf("status %v, truncated %v", res.Status, res.Truncated)
	}
}

func TestEnvironment(t *testing.T) {
	for _, name := range []string{"FOO_TOKEN", "MY_PASSWORD", "DSH_X", "api_key", "Dsh_Lower"} {
		t.Setenv(name, "must-not-leak")
	}
	t.Setenv("TERM", "xterm-256color")
	s := spawn(t, newTestBackend(t, nil), "")
	res := mustPrompt(t, s, "env")
	env := outputLines(res.Viewport)
	for _, kv := range env {
		if strings.Contains(kv, "must-not-leak") {
			t.Errorf("secret reached the shell: %s", kv)
		}
	}
	for _, want := range []string{
		"TERM=dumb", "PAGER=cat", "GIT_PAGER=cat", "DSH_SHELL=1",
		"DSH_SESSION_ID=owner-test", "DSH_PTY_SESSION_ID=pty-test",
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
	} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
}

// TestPromptOverrides: a command that changes the prompt neither shows a
// prompt nor slows the next commands down: each ends on its end record
// (completed), not on a proof or the silence bound (600 s here).
func TestPromptOverrides(t *testing.T) {
	for _, override := range []string{
		"PS1=broken",
		"PROMPT_COMMAND=",
		"PROMPT_COMMAND=; PS1='$ '",
		"PROMPT_COMMAND='echo noise'; PS0='ps0 '",
		"set -x",
	} {
		t.Run(override, func(t *testing.T) {
			s := spawn(t, newTestBackend(t, nil), "")
			mustExec(t, s, override)
			want := "next\n"
			if override == "set -x" {
				want = "++ echo next\n" + want // the command's trace, none of the plumbing
			}
			for range 3 {
				if out, res := mustExec(t, s, "echo next"); out != want || res.Exec.ExitCode != 0 {
					t.Fatalf("after the override: %q %+v", out, res.Exec)
				}
			}
			// Typed by hand, a line still comes back to the prompt.
			if res := mustPrompt(t, s, "echo typed"); !slices.Contains(outputLines(res.Viewport), "typed") {
				t.Fatalf("typed line: %q", res.Viewport)
			}
		})
	}
}

// TestStdinWaitProof: programs that wait for input settle as stdin_read
// from the /proc proof alone (the silence bound is 600 s), and a signal
// then brings the shell back.
func TestStdinWaitProof(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.txt")
	var b strings.Builder
	for i := range 500 {
		b.WriteString(strings.Repeat("x", i%70) + "\n")
	}
	if err := os.WriteFile(long, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cmd string
		sig       termapi.Signal
		shell     bool // the shell itself is the waiting foreground
	}{
		{"read builtin", "read x", termapi.SIGINT, true},
		{"password prompt", "read -s -p 'Password: ' pw", termapi.SIGINT, true},
		{"continuation prompt", `echo "unterminated`, termapi.SIGINT, true},
		// A command substitution's child stays in the shell's group,
		// and the shell reads its pipe meanwhile.
		{"command substitution", "x=$(head -n1)", termapi.SIGINT, true},
		{"cat", "cat", termapi.SIGINT, false},
		{"python", "python3 -i", termapi.SIGTERM, false},
		{"pager", "less " + long, termapi.SIGTERM, false},
		{"nested shell", "bash --norc --noprofile -i", termapi.SIGHUP, false},
	}
	be := newTestBackend(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			program, _, _ := strings.Cut(tt.cmd, " ")
			if _, err := exec.LookPath(program); err != nil && !tt.shell {
				t.Skipf("%s is not installed: %v", program, err)
			}
			s := spawn(t, be, dir)
			res := run(t, s, tt.cmd, sendOpts{})
			if res.Reason != termapi.WaitStdinRead || res.Prompt {
				t.Fatalf("settled %s (prompt %v), want stdin_read on a waiting program: %q", res.Reason, res.Prompt, res.Viewport)
			}
			fg, err := s.term.foreground()
			if err != nil {
				t.Fatal(err)
			}
			if (fg == s.pid) != tt.shell {
				t.Errorf("foreground %d, shell %d: want shell in the foreground = %v", fg, s.pid, tt.shell)
			}
			if _, err := s.Signal(context.Background(), tt.sig); err != nil {
				t.Fatal(err)
			}
			awaitPrompt(t, s)
			// What the program left on its last line stays in front.
			res = mustPrompt(t, s, "echo back")
			if !strings.HasSuffix(res.Viewport, "back\n") {
				t.Errorf("after %s: %q", tt.sig, res.Viewport)
			}
		})
	}
}

// TestPipelineIsNotWaiting: a pipeline whose reader reads a pipe, not the
// terminal, is not proof of anything.
func TestPipelineIsNotWaiting(t *testing.T) {
	tests := []struct {
		name    string
		idle    int
		timeout time.Duration
		want    termapi.WaitReason
	}{
		{"silence", 300, time.Minute, termapi.WaitInferredIdle},
		{"deadline", 600000, 2 * time.Second, termapi.WaitTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spawn(t, newTestBackend(t, func(c *Config) { c.IdleSilenceMs = tt.idle }), "")
			res := run(t, s, "sleep 9 | cat", sendOpts{timeout: tt.timeout})
			if res.Reason != tt.want {
				t.Fatalf("settled %s, want %s: %q", res.Reason, tt.want, res.Viewport)
			}
			if res.Status != termapi.Running {
				t.Errorf("status %v after %s", res.Status, res.Reason)
			}
			if _, err := s.Signal(context.Background(), termapi.SIGINT); err != nil {
				t.Fatal(err)
			}
			awaitPrompt(t, s)
			mustPrompt(t, s, "echo back")
		})
	}
}

// TestCancel interrupts a running command, by Cancel and by the send's
// context ending; the send then settles on the prompt and the command's
// processes are gone.
func TestCancel(t *testing.T) {
	tests := []struct {
		name   string
		cancel func(termapi.Send, context.CancelFunc) bool
	}{
		{"Cancel", func(sn termapi.Send, _ context.CancelFunc) bool { return sn.Cancel() }},
		{"context", func(_ termapi.Send, cancel context.CancelFunc) bool { cancel(); return true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spawn(t, newTestBackend(t, nil), "")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// sh is the foreground job by the time it prints, and exec keeps
			// the job: the interrupt cannot hit the shell in between.
			sn, err := s.StartSend(ctx, termapi.SendRequest{Text: `sh -c 'echo started; exec sleep 100'`, Submit: true})
			if err != nil {
				t.Fatal(err)
			}
			awaitLine(t, sn, "started")
			fg, err := s.term.foreground()
			if err != nil || fg == s.pid {
				t.Fatalf("foreground %d (%v), want the job's group", fg, err)
			}
			job, err := proc.IdentityOf(fg)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.cancel(sn, cancel) {
				t.Fatal("cancel refused on a live send")
			}
			res := wait(t, sn)
			if res.Reason != termapi.WaitStdinRead || !res.Prompt {
				t.Fatalf("settled %s (prompt %v): %q", res.Reason, res.Prompt, res.Viewport)
			}
			if sn.Cancel() {
				t.Error("Cancel after settling returned true")
			}
			if job.Alive() {
				t.Errorf("interrupted job %v is still alive", job)
			}
			mustPrompt(t, s, "echo works")
		})
	}
}

// TestCancelBusyShell: a shell that runs a builtin loop never blocks; the
// interrupt reaches it all the same.
func TestCancelBusyShell(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	sn := start(t, s, "echo looping; while :; do :; done", sendOpts{})
	awaitLine(t, sn, "looping")
	sn.Cancel()
	if res := wait(t, sn); res.Reason != termapi.WaitStdinRead || !res.Prompt {
		t.Fatalf("settled %s: %q", res.Reason, res.Viewport)
	}
	mustPrompt(t, s, "echo works")
}

func TestSendActive(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	sn := start(t, s, "sleep 100", sendOpts{})
	_, err := s.StartSend(context.Background(), termapi.SendRequest{Text: "echo no", Submit: true})
	if !errors.Is(err, termapi.ErrSendActive) {
		t.Fatalf("second send: %v, want ErrSendActive", err)
	}
	sn.Cancel()
	wait(t, sn)
	mustPrompt(t, s, "echo yes")
}

func TestEmptySendReusesEvidence(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	mustPrompt(t, s, "true")
	res := run(t, s, "", sendOpts{noSubmit: true})
	if res.Reason != termapi.WaitStdinRead || !res.Prompt || res.Viewport != "" {
		t.Errorf("empty send at the prompt: %s (prompt %v) %q", res.Reason, res.Prompt, res.Viewport)
	}
	// Typing without Enter leaves bash waiting for the rest of the line,
	// which is not its prompt.
	res = run(t, s, "echo par", sendOpts{noSubmit: true})
	if res.Reason != termapi.WaitStdinRead || res.Prompt || res.Viewport != "" {
		t.Errorf("partial line: %s (prompt %v) %q", res.Reason, res.Prompt, res.Viewport)
	}
	res = mustPrompt(t, s, "tial")
	if got := outputLines(res.Viewport); !slices.Equal(got, []string{"partial"}) {
		t.Errorf("completed line: %q", res.Viewport)
	}
}

func TestShellExit(t *testing.T) {
	tests := []struct {
		cmd  string
		want termapi.Status
	}{
		{"echo bye; exit 3", termapi.Status{Exited: true, ExitCode: 3}},
		{"echo bye; kill -9 $$", termapi.Status{Exited: true, ExitCode: -1, Signal: "SIGKILL"}},
		// The job keeps the terminal open after bash is gone.
		{"sleep 1000 & echo bye; exit 0", termapi.Status{Exited: true, ExitCode: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			s := spawn(t, newTestBackend(t, nil), "")
			res := run(t, s, tt.cmd, sendOpts{})
			if res.Reason != termapi.WaitSessionExit || res.Status != tt.want {
				t.Fatalf("settled %s with %+v, want session_exit with %+v", res.Reason, res.Status, tt.want)
			}
			if !slices.Contains(strings.Split(res.Viewport, "\n"), "bye") {
				t.Errorf("output written before the exit is missing: %q", res.Viewport)
			}
			if got := s.Status(); got != tt.want {
				t.Errorf("Status() = %+v", got)
			}
			_, err := s.StartSend(context.Background(), termapi.SendRequest{Text: "true", Submit: true})
			if !errors.Is(err, termapi.ErrSessionExited) {
				t.Errorf("send after exit: %v, want ErrSessionExited", err)
			}
			if _, err := s.Signal(context.Background(), termapi.SIGINT); !errors.Is(err, termapi.ErrSessionExited) {
				t.Errorf("signal after exit: %v, want ErrSessionExited", err)
			}
		})
	}
}

func TestSignalRules(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	ctx := context.Background()
	if _, err := s.Signal(ctx, "SIGUSR1"); !errors.Is(err, termapi.ErrUnsupportedSignal) {
		t.Errorf("SIGUSR1: %v, want ErrUnsupportedSignal", err)
	}
	if _, err := s.Signal(ctx, termapi.SIGKILL); !errors.Is(err, termapi.ErrRefuseKillShell) {
		t.Errorf("SIGKILL at the prompt: %v, want ErrRefuseKillShell", err)
	}
	res, err := s.Signal(ctx, termapi.SIGINT)
	if err != nil || res.TargetPGID != s.pid {
		t.Errorf("SIGINT at the prompt: %+v, %v; want the shell's group %d", res, err, s.pid)
	}
	awaitPrompt(t, s)
	sn := start(t, s, `sh -c 'echo started; exec sleep 100'`, sendOpts{})
	awaitLine(t, sn, "started")
	res, err = s.Signal(ctx, termapi.SIGKILL)
	if err != nil || res.TargetPGID == s.pid {
		t.Fatalf("SIGKILL to a job: %+v, %v", res, err)
	}
	if r := wait(t, sn); r.Reason != termapi.WaitStdinRead || r.Status != termapi.Running {
		t.Errorf("after killing the job: %s %+v", r.Reason, r.Status)
	}
}

func TestRead(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	mustPrompt(t, s, "seq 1 5")
	page, err := s.Read(termapi.ReadRequest{Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	if page.Text != "3\n4\n5" || page.LineBegin != 0 || page.LineEnd != 3 {
		t.Errorf("newest page: %+v", page)
	}
	page, err = s.Read(termapi.ReadRequest{Offset: 1, Count: 2})
	if err != nil || page.Text != "3\n4" || page.LineBegin != 1 || page.LineEnd != 3 {
		t.Errorf("offset page: %+v, %v", page, err)
	}
	page, err = s.Read(termapi.ReadRequest{})
	if err != nil || page.TotalLines != 5 || page.Text != "1\n2\n3\n4\n5" {
		t.Errorf("default page: %+v, %v", page, err)
	}
	if _, err := s.Read(termapi.ReadRequest{Offset: -1}); err == nil {
		t.Error("negative offset accepted")
	}
}

// TestIdleLoopParks: once nothing is due, the read loop blocks in the
// poller instead of spinning on an expired deadline, whichever tier settled
// the last send.
func TestIdleLoopParks(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	for _, step := range []struct {
		text    string
		timeout time.Duration
		want    termapi.WaitReason
	}{
		{"true", 0, termapi.WaitStdinRead},                       // the prompt
		{"read x", 0, termapi.WaitStdinRead},                     // the proof
		{"x", 0, termapi.WaitStdinRead},                          // the prompt again
		{"sleep 1", 100 * time.Millisecond, termapi.WaitTimeout}, // the deadline
	} {
		if res := run(t, s, step.text, sendOpts{timeout: step.timeout}); res.Reason != step.want {
			t.Fatalf("%q settled %s, want %s", step.text, res.Reason, step.want)
		}
		wantParked(t)
	}
}

// wantParked fails unless the read loop goroutine gets to block in the
// poller. A loop spinning on an expired deadline never does.
func wantParked(t *testing.T) {
	t.Helper()
	for range 2000 {
		if readLoopParked() {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("the read loop never blocked")
}

// readLoopParked reports whether a read loop goroutine is blocked in the
// poller.
func readLoopParked() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "(*session).readLoop") && strings.Contains(g, "[IO wait") {
			return true
		}
	}
	return false
}

// TestBlockedWrite: text typed at a program that does not read fills the
// terminal's input queue and the write blocks. The send still settles on
// its deadline, and keeps the slot until its write is over; Cancel
// abandons the write and discards what was typed, so none of it runs.
func TestBlockedWrite(t *testing.T) {
	dir := t.TempDir()
	s := spawn(t, newTestBackend(t, nil), dir)
	if res := run(t, s, "sleep 100", sendOpts{timeout: 100 * time.Millisecond}); res.Reason != termapi.WaitTimeout {
		t.Fatalf("sleep settled %s", res.Reason)
	}
	// Far more than the terminal buffers (a few KiB in the line
	// discipline, 64 KiB in flight).
	flood := strings.Repeat("touch ran\r", 40000)
	stuck := start(t, s, flood, sendOpts{noSubmit: true, timeout: 100 * time.Millisecond})
	if res := wait(t, stuck); res.Reason != termapi.WaitTimeout {
		t.Fatalf("blocked write settled %s", res.Reason)
	}
	_, err := s.StartSend(context.Background(), termapi.SendRequest{Text: "true", Submit: true})
	if !errors.Is(err, termapi.ErrSendActive) || !strings.Contains(err.Error(), "write") {
		t.Fatalf("send behind a blocked write: %v, want ErrSendActive naming the write", err)
	}
	if stuck.Cancel() {
		t.Error("Cancel of a settled send returned true")
	}
	if err := s.Close(context.Background(), "blocked write"); err != nil {
		t.Fatal(err)
	}

	s = spawn(t, newTestBackend(t, nil), dir)
	if res := run(t, s, "sleep 100", sendOpts{timeout: 100 * time.Millisecond}); res.Reason != termapi.WaitTimeout {
		t.Fatalf("sleep settled %s", res.Reason)
	}
	sn := start(t, s, flood, sendOpts{noSubmit: true})
	s.mu.Lock()
	writing := sn.(*send).writing
	s.mu.Unlock()
	if !writing {
		t.Fatal("the flood was taken at once; the test needs a write that blocks")
	}
	if !sn.Cancel() {
		t.Fatal("Cancel refused")
	}
	if res := wait(t, sn); res.Reason != termapi.WaitStdinRead || !res.Prompt {
		t.Fatalf("cancelled flood settled %s (prompt %v): %q", res.Reason, res.Prompt, screen.Tail(res.Viewport, 200))
	}
	res := mustPrompt(t, s, "test -e ran && echo ran || echo clean")
	if got := outputLines(res.Viewport); !slices.Equal(got, []string{"clean"}) {
		t.Errorf("typed text ran after Cancel: %q", got)
	}
}

// TestWaitAgain: after inferred_idle, empty sends wait for another silence
// bound each (not an instant answer) until the terminal settles for real,
// the way a tool waits for a long command.
func TestWaitAgain(t *testing.T) {
	s := spawn(t, newTestBackend(t, func(c *Config) { c.IdleSilenceMs = 100 }), "")
	if res := run(t, s, "sleep 0.5; echo done", sendOpts{}); res.Reason != termapi.WaitInferredIdle {
		t.Fatalf("settled %s, want inferred_idle", res.Reason)
	}
	var seen strings.Builder
	for rounds := 1; ; rounds++ {
		if rounds > 20 {
			t.Fatalf("still not settled after %d empty sends: %q", rounds, seen.String())
		}
		res := run(t, s, "", sendOpts{noSubmit: true})
		seen.WriteString(res.Viewport)
		if res.Reason == termapi.WaitStdinRead {
			break
		}
	}
	if !slices.Contains(strings.Split(seen.String(), "\n"), "done") {
		t.Errorf("the command's output was lost between the waits: %q", seen.String())
	}
}

// TestStaleProofDoesNotSettle: the read loop takes the stdin proof without
// the lock. A boundary that passes meanwhile (a signal, an interrupt) makes
// that proof stale, and it must not settle the send.
func TestStaleProofDoesNotSettle(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	sn := start(t, s, "sleep 100", sendOpts{}).(*send)
	s.mu.Lock()
	gen := s.boundaries
	s.boundaryLocked(time.Now()) // what Signal does while the read loop probes
	s.verdictLocked(sn, sawWaiting, gen, time.Now())
	settled, reason := sn.Settled(), sn.Result().Reason
	s.mu.Unlock()
	if settled {
		t.Fatalf("a proof from before a signal settled the send as %s", reason)
	}
	sn.Cancel()
	if res := wait(t, sn); res.Reason != termapi.WaitStdinRead || !res.Prompt {
		t.Errorf("cancelled sleep settled %s (prompt %v)", res.Reason, res.Prompt)
	}
}

// TestInterruptReachesJobOfStarvedShell: an interrupt asked for right after
// a command line is typed must wait for bash to hand the terminal to the
// job, however long the machine takes to run bash that far. A shell kept
// off the CPU (SCHED_IDLE, sharing one CPU with a spinner) takes far longer
// in wall time than the few microseconds of CPU it needs; a signal sent
// meanwhile reaches bash, which notes it and waits on for a job that never
// gets it.
func TestInterruptReachesJobOfStarvedShell(t *testing.T) {
	for _, viaExec := range []bool{false, true} {
		name := map[bool]string{false: "send", true: "exec"}[viaExec]
		t.Run(name, func(t *testing.T) {
			s := spawn(t, newTestBackend(t, nil), "")
			mustPrompt(t, s, "true")
			unstarve := starve(t, s.pid)
			var sn termapi.Send
			if viaExec {
				var err error
				if sn, err = s.Exec(context.Background(), termapi.ExecRequest{Command: "sleep 100"}); err != nil {
					t.Fatal(err)
				}
			} else {
				sn = start(t, s, "sleep 100", sendOpts{})
			}
			if !sn.Cancel() {
				t.Fatal("cancel refused on a live send")
			}
			res := wait(t, sn)
			unstarve()
			if res.Reason != termapi.WaitStdinRead || !res.Prompt {
				t.Fatalf("settled %s (prompt %v): %q", res.Reason, res.Prompt, res.Viewport)
			}
			snap, err := proc.Scan()
			if err != nil {
				t.Fatal(err)
			}
			if left := snap.Descendants(s.pid); len(left) > 0 {
				t.Errorf("the interrupted job is still running: %+v", left)
			}
			mustPrompt(t, s, "echo works")
		})
	}
}

// starve keeps pid nearly off the CPU until the returned func is called:
// pid goes to nice 19 on CPU 0, where a spinner at normal priority takes
// about 98% of the time. The children pid starts inherit both. (SCHED_IDLE
// would starve it further, but then a few copies of the test running at
// once keep the shell off the CPU for longer than any deadline.)
func starve(t *testing.T, pid int) (restore func()) {
	t.Helper()
	var one unix.CPUSet
	one.Set(0)
	spinner := exec.Command("sh", "-c", "while :; do :; done")
	if err := spinner.Start(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{spinner.Process.Pid, pid} {
		if err := unix.SchedSetaffinity(p, &one); err != nil {
			t.Fatalf("pin %d to CPU 0: %v", p, err)
		}
	}
	low := unix.SchedAttr{Size: unix.SizeofSchedAttr, Nice: 19}
	if err := unix.SchedSetAttr(pid, &low, 0); err != nil {
		t.Fatalf("nice 19 for %d: %v", pid, err)
	}
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		spinner.Process.Kill()
		spinner.Wait()
		normal := unix.SchedAttr{Size: unix.SizeofSchedAttr}
		if err := unix.SchedSetAttr(pid, &normal, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			t.Errorf("restore the scheduling of %d: %v", pid, err)
		}
	}
	t.Cleanup(restore)
	return restore
}
