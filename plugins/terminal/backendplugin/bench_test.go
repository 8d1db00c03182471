package backendplugin_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal"
	terminalbash "github.com/dshdev/dsh/plugins/terminal-bash"
)

// benchBackends are the shell backend in process and through the plugin
// protocol, for side-by-side numbers:
//
//	go test -run '^$' -bench ExecTrue -benchtime 2000x ./plugins/terminal/backendplugin/
//	go test -run '^$' -bench Seq -benchtime 20x ./plugins/terminal/backendplugin/
func benchBackends(b *testing.B) map[string]terminal.Backend {
	in, err := terminalbash.NewBackend(terminalbash.DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(context.Background()) })
	return map[string]terminal.Backend{"inprocess": in, "plugin": open(b, "{}")}
}

func benchSession(b *testing.B, backend terminal.Backend) terminal.Executor {
	ctx := context.Background()
	s, err := backend.Spawn(ctx, terminal.SpawnSpec{SessionID: "bench", OwnerID: "bench", Cwd: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background(), "bench over") })
	return s.(terminal.Executor)
}

// execStream runs command as the bash tool does (streamed output, then the
// result) and returns how many lines it printed.
func execStream(b *testing.B, s terminal.Executor, command string) int {
	ctx := context.Background()
	sn, err := s.Exec(ctx, terminal.ExecRequest{Command: command, Stream: true})
	if err != nil {
		b.Fatal(err)
	}
	lines := 0
	for {
		text, err := sn.Output(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		lines += strings.Count(text, "\n")
	}
	res, err := sn.Wait(ctx)
	if err != nil || res.Exec == nil || res.Exec.State != terminal.ExecCompleted {
		b.Fatalf("result %+v, %v", res, err)
	}
	return lines
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
				execStream(b, s, "true")
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
				if n := execStream(b, s, "seq 1 100000"); n != 100000 {
					b.Fatalf("%d lines", n)
				}
			}
		})
	}
}
