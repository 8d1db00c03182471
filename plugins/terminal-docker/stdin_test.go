package terminaldocker

import (
	"context"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal-docker/dockertest"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

// TestStdinWaitProvenInContainer: where this machine cannot read the
// container's processes (a remote daemon, or a local one whose containers
// are not dsh's to read), the probe runs in an exec beside the shell and
// proves a program blocked reading the terminal from the container's own
// /proc; the send settles stdin_read although the silence bound is out of
// reach. A quiet program is not taken for a waiting one.
func TestStdinWaitProvenInContainer(t *testing.T) {
	b := newBackend(t, testConfig(dockertest.Daemon(t)))
	b.noLocalProof = true
	s := spawn(t, b, "")
	if !s.Capabilities().InputProof {
		t.Fatal("a container session with the probe does not report InputProof")
	}
	mustComplete(t, s, "export KEEP=kept", 0)
	for _, command := range []string{`read x`, `cat`, `bash -c 'read -p "Proceed? [y/N] " a'`} {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		start := time.Now()
		send, err := s.Exec(ctx, termapi.ExecRequest{Command: command, Stream: true, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, res := terminaltest.Drain(t, ctx, send)
		if res.Reason != termapi.WaitStdinRead || res.Prompt || res.Exec.State != termapi.ExecRunning {
			t.Fatalf("%s: settled %s (prompt %v) with %+v, want stdin_read with the command running", command, res.Reason, res.Prompt, *res.Exec)
		}
		t.Logf("%s: proven waiting after %v", command, time.Since(start))
		if _, err := s.Signal(ctx, termapi.SIGINT); err != nil {
			t.Fatal(err)
		}
		send, err = s.StartSend(ctx, termapi.SendRequest{Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, res = terminaltest.Drain(t, ctx, send); !res.Prompt {
			t.Fatalf("%s: after SIGINT the send settled %s, want the prompt", command, res.Reason)
		}
		cancel()
	}
	mustComplete(t, s, "sleep 1", 0)
	if got := mustComplete(t, s, `echo "$KEEP"`, 0); got != "kept\n" {
		t.Fatalf("the shell's state: %q", got)
	}
}
