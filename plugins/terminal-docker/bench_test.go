package terminaldocker

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

	"github.com/dshdev/dsh/plugins/terminal-docker/dockertest"
	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// BenchmarkExecTrue measures one command round trip through a container
// exec: `true`, settled by its end marker and prompt.
func BenchmarkExecTrue(b *testing.B) {
	host := dockertest.Daemon(b)
	bk := newBenchBackend(b, host)
	s := benchSpawn(b, bk, "bench")
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

// BenchmarkSpawn measures a session's start and close: a container created
// and started, bash at its prompt, then the container removed. With
// DSH_BENCH_PARALLEL=N, N sessions start at once per iteration and the
// time is per session.
func BenchmarkSpawn(b *testing.B) {
	host := dockertest.Daemon(b)
	bk := newBenchBackend(b, host)
	n, _ := strconv.Atoi(os.Getenv("DSH_BENCH_PARALLEL"))
	n = max(n, 1)
	start := time.Now()
	sessions := 0
	for i := 0; b.Loop(); i++ {
		var wg sync.WaitGroup
		for j := range n {
			wg.Go(func() {
				s := benchSpawn(b, bk, fmt.Sprintf("bench-%d-%d", i, j))
				ctx, cancel := context.WithTimeout(context.Background(), waitLong)
				defer cancel()
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

// TestIdleContainerMemory reports what an idle session costs the machine:
// the memory its container's cgroup charges, with the shell at its prompt.
// It only reports; it asserts nothing about the number.
func TestIdleContainerMemory(t *testing.T) {
	host := dockertest.Daemon(t)
	b := newBackend(t, testConfig(host))
	const n = 5
	var total int64
	for i := range n {
		s := spawn(t, b, "")
		out := mustComplete(t, s, "cat /sys/fs/cgroup/memory.current 2>/dev/null || cat /sys/fs/cgroup/memory/memory.usage_in_bytes", 0)
		v, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("session %d: memory %q", i, out)
		}
		total += v
	}
	t.Logf("an idle container shell charges %.1f MiB to its cgroup (mean of %d)", float64(total)/n/(1<<20), n)
}

func newBenchBackend(b *testing.B, host string) *Backend {
	b.Helper()
	cfg := testConfig(host)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	bk, err := New(ctx, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bk.Close(context.Background()) })
	return bk
}

func benchSpawn(b *testing.B, bk *Backend, id string) *inband.Session {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	ts, err := bk.Spawn(ctx, termapi.SpawnSpec{SessionID: id, OwnerID: id})
	if err != nil {
		b.Fatal(err)
	}
	s := ts.(*inband.Session)
	b.Cleanup(func() { s.Close(context.Background(), "bench over") })
	return s
}
