//go:build linux

package terminalbash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// TestStopJobEndsTheLine: SIGTSTP to a running command's job stops the job
// and ends the command line there, whatever surrounds the job: bash alone
// would break a loop and go on with the rest of the list at once, beside
// the stopped job. The job stays, stopped, for bg or fg.
func TestStopJobEndsTheLine(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	for _, shape := range []string{
		"%s; echo REST",
		"for i in 1 2 3; do %s; echo LOOP-$i; done; echo REST",
		"{ %s; echo REST; }",
		"f() { %s; echo REST; }; f",
		"%s | cat; echo REST",
		"%s",
	} {
		gate := filepath.Join(t.TempDir(), "gate")
		if err := syscall.Mkfifo(gate, 0o600); err != nil {
			t.Fatal(err)
		}
		job := fmt.Sprintf("sh -c 'echo up > %s; exec sleep 100'", gate)
		command := fmt.Sprintf(shape, job)
		sn, err := s.Exec(context.Background(), termapi.ExecRequest{Command: command, Stream: true, Captured: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadFile(gate); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Signal(context.Background(), termapi.SIGTSTP); err != nil {
			t.Fatalf("%s: SIGTSTP: %v", command, err)
		}
		out := drainOutput(t, sn)
		res := wait(t, sn)
		for res.Exec.State == termapi.ExecRunning && !res.Prompt {
			next := start(t, s, "", sendOpts{noSubmit: true, stream: true})
			out += drainOutput(t, next)
			res = wait(t, next)
		}
		out += res.Viewport
		if !res.Prompt || res.Exec.State != termapi.ExecAbandoned {
			t.Fatalf("%s: settled %s (prompt %v) with %+v", command, res.Reason, res.Prompt, *res.Exec)
		}
		if strings.Contains(out, "REST") || strings.Contains(out, "LOOP-") {
			t.Fatalf("%s: the rest of the line ran:\n%s", command, out)
		}
		jobs, _ := mustExec(t, s, "jobs; kill -9 %1; wait %1")
		if !strings.Contains(jobs, "Stopped") {
			t.Fatalf("%s: jobs: %q", command, jobs)
		}
	}
}

// TestJobReaderDoesNotTakeTheLine: a member of a stopped job that was
// inside its read of the terminal stays there (the kernel checks job
// control when a read begins), and would take the next command's line,
// nonce and all, while the shell waits at its prompt for it. Here the
// member ignores SIGTSTP, so it never leaves its read by itself; a member
// whose stop is still pending when the shell gets the terminal back is the
// same reader for a moment.
func TestJobReaderDoesNotTakeTheLine(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	sn, err := s.Exec(context.Background(), termapi.ExecRequest{Command: `sh -c '(trap "" TSTP; exec cat </dev/tty) & wait'`})
	if err != nil {
		t.Fatal(err)
	}
	for res := wait(t, sn); res.Reason != termapi.WaitStdinRead; res = wait(t, sn) {
		sn = start(t, s, "", sendOpts{noSubmit: true})
	}
	if _, err := s.Signal(context.Background(), termapi.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	res := wait(t, start(t, s, "", sendOpts{noSubmit: true}))
	for res.Exec == nil || res.Exec.State != termapi.ExecCompleted {
		res = wait(t, start(t, s, "", sendOpts{noSubmit: true}))
	}
	if res.Exec.ExitCode != 128+int(syscall.SIGTSTP) {
		t.Fatalf("the job's end: %+v", *res.Exec)
	}
	out, _ := mustExec(t, s, "echo REACHED")
	if strings.TrimSpace(out) != "REACHED" {
		t.Fatalf("output %q", out)
	}
	if jobs, _ := mustExec(t, s, "jobs; kill -9 %1; wait %1"); !strings.Contains(jobs, "Stopped") {
		t.Fatalf("jobs: %q", jobs)
	}
}
