//go:build linux

package terminalbash

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// TestProofDespiteBackgroundFlood: a background job that prints without
// pause keeps the terminal from ever being empty. A command waiting for
// input is still proven to wait, and the shell proven back at its prompt
// after the interrupt: output that keeps coming is the job's, not the
// foreground's.
func TestProofDespiteBackgroundFlood(t *testing.T) {
	s := spawn(t, newTestBackend(t, nil), "")
	dir := t.TempDir()
	gate, ready := filepath.Join(dir, "go"), filepath.Join(dir, "ready")
	// Once the command opens the gate, the flood prints a hundred more
	// lines and says so; the command waits for that before it reads, so
	// the flood is surely flowing during this command, however the machine
	// schedules it.
	mustExec(t, s, fmt.Sprintf(`(i=0; while :; do echo tick; [ -e %q ] && [ $((++i)) = 100 ] && : > %q; done) & FLOOD=$!`, gate, ready))
	out, res := execute(t, s, fmt.Sprintf(`: > %q; until [ -e %q ]; do :; done; read x`, gate, ready))
	if res.Reason != termapi.WaitStdinRead || res.Prompt || res.Exec.State != termapi.ExecRunning {
		t.Fatalf("read x under a flood settled %s (prompt %v) with %+v", res.Reason, res.Prompt, *res.Exec)
	}
	if !strings.Contains(res.Exec.Background+out, "tick") {
		t.Fatalf("the flood's output is missing")
	}
	if _, err := s.Signal(context.Background(), termapi.SIGINT); err != nil {
		t.Fatal(err)
	}
	sn := start(t, s, "", sendOpts{noSubmit: true, stream: true})
	drainOutput(t, sn)
	if res := wait(t, sn); !res.Prompt || res.Exec == nil || res.Exec.State != termapi.ExecAbandoned {
		t.Fatalf("after the interrupt: %s (prompt %v) with %+v", res.Reason, res.Prompt, res.Exec)
	}
	mustExec(t, s, "kill $FLOOD; wait $FLOOD")
}
