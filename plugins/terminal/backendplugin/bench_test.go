package backendplugin_test

import (
	"context"
	"slices"
	"testing"
	"time"

	terminalbash "github.com/dshdev/dsh/plugins/terminal-bash"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

// benchBackends are the shell backend in process and through the plugin
// protocol, for side-by-side numbers:
//
//	go test -run '^$' -bench ExecTrue -benchtime 2000x ./plugins/terminal/backendplugin/
//	go test -run '^$' -bench Seq -benchtime 20x ./plugins/terminal/backendplugin/
func benchBackends(b *testing.B) map[string]termapi.Backend {
	in, err := terminalbash.NewBackend(terminalbash.DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(context.Background()) })
	return map[string]termapi.Backend{"inprocess": in, "plugin": open(b, "{}")}
}

func benchSession(b *testing.B, backend termapi.Backend) termapi.Session {
	ctx := context.Background()
	s, err := backend.Spawn(ctx, termapi.SpawnSpec{SessionID: "bench", OwnerID: "bench", Cwd: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background(), "bench over") })
	return s
}

// BenchmarkExecTrue is the per-call cost: Exec of `true` until it settles
// at the prompt. It reports the median call.
func BenchmarkExecTrue(b *testing.B) {
	for name, backend := range benchBackends(b) {
		b.Run(name, func(b *testing.B) {
			s := benchSession(b, backend)
			var took []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				terminaltest.CountLines(b, context.Background(), s, "true")
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
		})
	}
}

// BenchmarkExecSeq100k is output throughput: `seq 1 100000` (588,895
// bytes) streamed to a caller that pulls every line.
func BenchmarkExecSeq100k(b *testing.B) {
	for name, backend := range benchBackends(b) {
		b.Run(name, func(b *testing.B) {
			s := benchSession(b, backend)
			b.SetBytes(588895)
			for b.Loop() {
				if n := terminaltest.CountLines(b, context.Background(), s, "seq 1 100000"); n != 100000 {
					b.Fatalf("%d lines", n)
				}
			}
		})
	}
}
