//go:build linux

package dshcmd

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshdev/dsh/internal/cgtest"
)

// maxOutputGrowthKiB is how much dsh's resident memory may grow over its
// idle size while one call prints 50 MB or more: whatever a command
// prints, dsh keeps its head and tail, streams the rest to the saved
// file, and collects its garbage (issue 26, item 3).
const maxOutputGrowthKiB = 64 << 10

// TestE2ELargeOutputMemory: a call that prints 50 MB (a million lines)
// raises dsh's peak RSS by at most 64 MiB over its size after a first
// call; a call three times as long by no more. dsh runs in a memory
// cgroup of its own, so a regression fails the test, not the machine.
func TestE2ELargeOutputMemory(t *testing.T) {
	sizes := []int{50_000_000}
	if !testing.Short() {
		sizes = append(sizes, 150_000_000)
	}
	for _, size := range sizes {
		t.Run(strconv.Itoa(size/1_000_000)+"MB", func(t *testing.T) {
			g := cgtest.Memory(t, 1<<30)
			cmd := exec.Command(dshBinary(t), "serve", "--workdir", t.TempDir())
			cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			cs, err := newE2EClient().Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("connect: %v (stderr %q)", err, stderr.String())
			}
			defer closeAndWait(t, cs, cmd)
			pid := cmd.Process.Pid
			if err := g.Add(pid); err != nil {
				t.Fatal(err)
			}
			bash(t, cs, "true")
			base := vmKiB(t, procStatus(t, pid)["VmRSS"])
			// Peak RSS from here on.
			if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0); err != nil {
				t.Fatal(err)
			}
			text, _ := bash(t, cs, `head -c `+strconv.Itoa(size)+` /dev/zero | tr '\0' a | fold -w 49`)
			peak := vmKiB(t, procStatus(t, pid)["VmHWM"])
			t.Logf("dsh RSS %d KiB after a first call, peak %d KiB during %d bytes of output (+%d KiB)", base, peak, size, peak-base)
			if !strings.HasPrefix(text, strings.Repeat("a", 49)+"\n") || !strings.Contains(text, "\n[full output: ") {
				t.Fatalf("result: %q ... %q", text[:min(len(text), 200)], text[max(0, len(text)-300):])
			}
			if peak-base > maxOutputGrowthKiB {
				t.Fatalf("dsh's RSS grew by %d KiB while the call printed %d bytes, more than %d KiB", peak-base, size, maxOutputGrowthKiB)
			}
		})
	}
}
