package terminalkubernetes

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// BenchmarkExecTrue measures one command round trip through a pod's kept
// exec: `true`, settled by its end marker and prompt.
func BenchmarkExecTrue(b *testing.B) {
	c := kubetest.Require(b)
	bk := newBackend(b, testConfig(c, c.Namespace(b)))
	s := spawn(b, bk, "bench")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sn, err := s.Exec(ctx, termapi.ExecRequest{Command: "true", Stream: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sn.Output(ctx); err != io.EOF {
			b.Fatalf("output: %v", err)
		}
		if res, err := sn.Wait(ctx); err != nil || res.Exec == nil || res.Exec.State != termapi.ExecCompleted {
			b.Fatalf("result %+v, %v", res, err)
		}
	}
}

// BenchmarkSpawn measures an owner's first session from nothing to its
// prompt and back: the pod created and Running (its init container
// copying the helper), the shell's and the helper's execs opened, bash at
// its prompt, then the pod deleted (grace period 0). With
// DSH_BENCH_PARALLEL=N, N owners start at once per iteration and the time
// is per iteration.
func BenchmarkSpawn(b *testing.B) {
	c := kubetest.Require(b)
	cfg := testConfig(c, c.Namespace(b))
	bk := newBackend(b, cfg)
	n, _ := strconv.Atoi(os.Getenv("DSH_BENCH_PARALLEL"))
	n = max(n, 1)
	start := time.Now()
	sessions := 0
	for i := 0; b.Loop(); i++ {
		var wg sync.WaitGroup
		for j := range n {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitLong)
				defer cancel()
				id := fmt.Sprintf("bench-%d-%d", i, j)
				s, err := bk.Spawn(ctx, termapi.SpawnSpec{SessionID: id, OwnerID: id})
				if err != nil {
					b.Error(err)
					return
				}
				if err := s.Close(ctx, "bench"); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		sessions += n
	}
	b.ReportMetric(float64(sessions)/time.Since(start).Seconds(), "sessions/s")
}

// TestIdlePodMemory reports what an idle owner's pod costs the node: the
// memory its shell container's cgroup charges (the helper, the shell at
// its prompt, page cache of what they read), as the container sees it. It
// only reports; it asserts nothing about the number.
func TestIdlePodMemory(t *testing.T) {
	c := kubetest.Require(t)
	b := newBackend(t, testConfig(c, c.Namespace(t)))
	const n = 5
	var total int64
	for i := range n {
		s := spawn(t, b, fmt.Sprintf("idle-%d", i))
		out := mustComplete(t, s, "cat /sys/fs/cgroup/memory.current 2>/dev/null || cat /sys/fs/cgroup/memory/memory.usage_in_bytes", 0)
		v, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("session %d: memory %q", i, out)
		}
		total += v
	}
	t.Logf("an idle pod's shell container charges %.1f MiB to its cgroup (mean of %d)", float64(total)/n/(1<<20), n)
}
