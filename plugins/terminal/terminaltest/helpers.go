package terminaltest

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Helpers for a backend's own tests, beside the kit: what every backend's
// tests do to run a command and read what it printed.

// Drain reads send's output to io.EOF, then waits for its result.
func Drain(t testing.TB, ctx context.Context, send termapi.Send) (string, termapi.SendResult) {
	t.Helper()
	var out strings.Builder
	for {
		chunk, err := send.Output(ctx)
		out.WriteString(chunk)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Output: %v", err)
		}
	}
	res, err := send.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return out.String(), res
}

// Exec runs command on s, which must run commands (Capabilities.Exec),
// streaming, and returns its output (with the line still being written
// last) and how its first send settled.
func Exec(t testing.TB, ctx context.Context, s termapi.Session, command string) (string, termapi.SendResult) {
	t.Helper()
	if !s.Capabilities().Exec {
		t.Fatalf("session %T does not run commands", s)
	}
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: command, Stream: true})
	if err != nil {
		t.Fatalf("Exec(%q): %v", command, err)
	}
	out, res := Drain(t, ctx, send)
	if res.Exec == nil {
		t.Fatalf("Exec(%q) settled without an ExecResult: %+v", command, res)
	}
	return out + res.Viewport[strings.LastIndexByte(res.Viewport, '\n')+1:], res
}

// MustComplete runs command as Exec does and requires that it ran to its
// end, with the shell back at its prompt, and status code; it returns the
// output.
func MustComplete(t testing.TB, ctx context.Context, s termapi.Session, command string, code int) string {
	t.Helper()
	out, res := Exec(t, ctx, s, command)
	if res.Reason != termapi.WaitStdinRead || !res.Prompt || res.Exec.State != termapi.ExecCompleted || res.Exec.ExitCode != code {
		t.Fatalf("Exec(%q) settled %s (prompt %v) with %+v, want completed with status %d; output:\n%s", command, res.Reason, res.Prompt, *res.Exec, code, out)
	}
	return out
}

// Spawn starts a session of b within bound, and closes it, within bound
// too, when the test ends.
func Spawn(t testing.TB, b termapi.Backend, spec termapi.SpawnSpec, bound time.Duration) termapi.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	s, err := b.Spawn(ctx, spec)
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		if err := s.Close(ctx, "test over"); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// CountLines runs command on s as the bash tool does (the output streamed,
// every line pulled), requires that it completed, and returns how many
// lines it printed. It is for benchmarks: it does not keep the output.
func CountLines(t testing.TB, ctx context.Context, s termapi.Session, command string) int {
	t.Helper()
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: command, Stream: true})
	if err != nil {
		t.Fatalf("Exec(%q): %v", command, err)
	}
	lines := 0
	for {
		text, err := send.Output(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Output: %v", err)
		}
		lines += strings.Count(text, "\n")
	}
	res, err := send.Wait(ctx)
	if err != nil || res.Exec == nil || res.Exec.State != termapi.ExecCompleted {
		t.Fatalf("Exec(%q) settled with %+v, %v; want it completed", command, res.Exec, err)
	}
	return lines
}

// WaitLong is how long a backend's own tests wait for any one thing that
// must happen. It is generous: it only turns a hang into a clear failure
// and never decides a result.
const WaitLong = 30 * time.Second

// Main runs a backend's test package and then fails it if any goroutine
// the tests started is still running: a backend must leave nothing
// behind. Use it as the package's TestMain.
func Main(m *testing.M) { goleak.VerifyTestMain(m) }
