//go:build linux

package terminalbash

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// osThreads is how many OS threads this process has.
func osThreads(t testing.TB) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// TestThreadsDoNotGrowWithShells: an idle session holds no OS thread. A
// thread blocked in wait4 or read per shell would make a thousand shells a
// thousand threads.
func TestThreadsDoNotGrowWithShells(t *testing.T) {
	const shells = 150
	b := newTestBackend(t, nil)
	// Warm up: the runtime's own threads, and one session's worth.
	spawn(t, b, "")
	before := osThreads(t)
	for i := range shells {
		ts, err := b.Spawn(context.Background(), termapi.SpawnSpec{SessionID: fmt.Sprintf("idle-%d", i), OwnerID: "owner"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ts.Close(context.Background(), "test over") })
	}
	after := osThreads(t)
	t.Logf("%d OS threads before, %d with %d more shells", before, after, shells)
	if after-before > shells/10 {
		t.Fatalf("%d more OS threads for %d idle shells", after-before, shells)
	}
}
