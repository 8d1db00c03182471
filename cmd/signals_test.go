//go:build linux

package dshcmd

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestE2EStdioRepeatedSignals: an agent client that shares dsh's process
// group passes on a person's Ctrl-C, then signals dsh again while it is
// shutting down. The second signal may cut the waiting short, never the
// kill: a process that ignores SIGTERM and SIGHUP and left the shell's job
// control (nohup) does not survive dsh.
func TestE2EStdioRepeatedSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cs, cmd, _ := startStdio(t)
			pid := bashPid(t, cs)
			up, termed, started := fifo(t), fifo(t), fifo(t)
			command := fmt.Sprintf(`nohup sh -c 'trap "echo 0 > %s" TERM; trap "" HUP; echo $$ > %s; while :; do sleep 1; done' >/dev/null 2>&1 &
%s`, termed, up, sleeper(started))
			go cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
			stubborn := readPid(t, up)
			pids := []int{pid, stubborn, readPid(t, started)}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			// The shutdown has asked the stubborn process to end, and it
			// has not: now the second signal.
			readPid(t, termed)
			if err := cmd.Process.Signal(sig); err != nil && err != os.ErrProcessDone {
				t.Fatal(err)
			}
			closed := make(chan error, 1)
			go func() { closed <- cs.Close() }() // waits for dsh to exit
			recv(t, closed, "dsh to exit")
			if !cmd.ProcessState.Exited() {
				t.Errorf("dsh did not exit by itself: %v", cmd.ProcessState)
			}
			assertGone(t, pids...)
		})
	}
}
