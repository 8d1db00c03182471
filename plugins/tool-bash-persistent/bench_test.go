package bashtool_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshdev/dsh/host"
	terminalbash "github.com/dshdev/dsh/plugins/terminal-bash"
)

// The tool's benchmarks, end to end through the tools service with real
// bash on a real PTY: what a model's call costs in-process. Compare with
// the PTY floor (../../../shared/tools/ptylimit) and the original tool
// (../../../shared/peer); README's Performance section has both.
//
//	go test -run '^$' -bench . -benchtime 200x ./plugins/tool-bash-persistent/

// BenchmarkTrue is a warm call of `true`: the per-call overhead.
func BenchmarkTrue(b *testing.B) {
	hs := newHarness(b, "", "")
	o := hs.owner(b, "bench")
	defer reportShellCPU(b, hs, o)()
	latencies(b, func() { hs.expect(b, o, "true", "") })
}

// reportShellCPU reports, when the returned func runs, the CPU owner's
// shell spent per call: the bash half of a call's cost.
func reportShellCPU(b *testing.B, hs *harness, o *host.Owner) func() {
	pid, err := strconv.Atoi(hs.run(b, o, "echo $$"))
	if err != nil {
		b.Fatal(err)
	}
	before, self := processCPU(b, pid), selfCPU(b)
	return func() {
		b.ReportMetric(float64((processCPU(b, pid)-before).Microseconds())/float64(b.N), "bash-µs/op")
		b.ReportMetric(float64((selfCPU(b)-self).Microseconds())/float64(b.N), "dsh-µs/op")
	}
}

// selfCPU is the user and system time of this process: dsh's half.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the user and system time of pid, from /proc/<pid>/stat
// (fields 14 and 15, in clock ticks of 1/100 s).
func processCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// BenchmarkEcho is a warm call with output.
func BenchmarkEcho(b *testing.B) {
	hs := newHarness(b, "", "")
	o := hs.owner(b, "bench")
	hs.expect(b, o, "echo hi", "hi")
	latencies(b, func() { hs.expect(b, o, "echo hi", "hi") })
}

// BenchmarkFirstCall is the first call of a new owner: spawning its shell,
// initializing it, and running `true`.
func BenchmarkFirstCall(b *testing.B) {
	hs := newHarness(b, "", "")
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		o, err := hs.h.NewOwner(fmt.Sprintf("first-%d", i), b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		hs.expect(b, o, "true", "")
		ds = append(ds, time.Since(start))
		b.StopTimer()
		if err := o.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	report(b, ds)
}

// BenchmarkFirstCallWarm is BenchmarkFirstCall with a warm pool of shells
// (terminal-bash's warmShells), full when each owner comes: the new
// owner's session takes a waiting shell, which the hand-over makes its
// own, and runs `true`.
func BenchmarkFirstCallWarm(b *testing.B) {
	hs := newHarness(b, "", `{"warmShells": 2}`)
	var backend *terminalbash.Backend
	for _, in := range hs.h.Instances() {
		if be, ok := in.Value.(*terminalbash.Backend); ok {
			backend = be
		}
	}
	if backend == nil {
		b.Skip("the shells are not terminal-bash's in this process: no warm pool")
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := backend.AwaitWarm(ctx, 2); err != nil {
			b.Fatal(err)
		}
		cancel()
		o, err := hs.h.NewOwner(fmt.Sprintf("first-%d", i), b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		hs.expect(b, o, "true", "")
		ds = append(ds, time.Since(start))
		b.StopTimer()
		if err := o.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	report(b, ds)
}

// BenchmarkSeq100k is `seq 1 100000` (588,895 bytes): the whole output is
// streamed, the head and tail kept, and the rest saved to the owner's file.
func BenchmarkSeq100k(b *testing.B) {
	hs := newHarness(b, "", "")
	o := hs.owner(b, "bench")
	b.SetBytes(588895)
	latencies(b, func() {
		got := hs.run(b, o, "seq 1 100000")
		// The tail ends with the line that names the saved output.
		if !strings.HasPrefix(got, "1\n2\n") || !strings.Contains(got, "\n100000\n[full output: ") {
			b.Fatalf("head or tail missing: %q ... %q", got[:min(len(got), 100)], got[max(0, len(got)-200):])
		}
	})
}

// latencies runs fn b.N times and reports the median and 90th percentile
// beside the mean, since a mean hides the shape of a latency distribution.
func latencies(b *testing.B, fn func()) {
	b.Helper()
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		fn()
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	report(b, ds)
}

func report(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*9/10].Microseconds())/1000, "p90-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
}
