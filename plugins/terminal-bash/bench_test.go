//go:build linux

package terminalbash

import (
	"context"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshdev/dsh/internal/proc"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

// BenchmarkExecTrue measures the hot path of the bash tool: Exec of `true`
// until its end record has come and the terminal is drained. The command
// goes into the input channel, one line is typed, bash reads both, and the
// plumbing reports the end.
func BenchmarkExecTrue(b *testing.B) {
	benchExecTrue(b, benchSession(b))
}

// BenchmarkExecTrueLimited is BenchmarkExecTrue in a shell with memory and
// pids limits, whose hit counters are read as each send settles. It skips
// where the machine cannot enforce them.
func BenchmarkExecTrueLimited(b *testing.B) {
	be := benchBackend(b)
	lim := termapi.Limits{Memory: 1 << 30, Pids: 512}
	if err := be.checkLimits(lim); err != nil {
		b.Skip(err)
	}
	s, err := be.Spawn(context.Background(), termapi.SpawnSpec{SessionID: "bench", OwnerID: "bench", Policy: termapi.Policy{Limits: lim}})
	if err != nil {
		b.Fatal(err)
	}
	benchExecTrue(b, s.(*session))
}

func benchExecTrue(b *testing.B, s *session) {
	ctx := context.Background()
	b.ReportAllocs()
	defer reportShellCPU(b, s)()
	for b.Loop() {
		sn, err := s.Exec(ctx, termapi.ExecRequest{Command: "true", Stream: true, Captured: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sn.Output(ctx); err != io.EOF {
			b.Fatalf("output: %v", err)
		}
		res, err := sn.Wait(ctx)
		if err != nil || res.Exec == nil || res.Exec.State != termapi.ExecCompleted {
			b.Fatalf("result %+v, %v", res, err)
		}
	}
}

// BenchmarkSendTrue measures a line typed by hand: `true` and Enter, settled
// when the prompt hook's claim is proven from /proc.
func BenchmarkSendTrue(b *testing.B) {
	s := benchSession(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sn, err := s.StartSend(ctx, termapi.SendRequest{Text: "true", Submit: true})
		if err != nil {
			b.Fatal(err)
		}
		res, err := sn.Wait(ctx)
		if err != nil || !res.Prompt {
			b.Fatalf("reason %s (prompt %v), %v", res.Reason, res.Prompt, err)
		}
	}
}

// BenchmarkExecSeq100k streams `seq 1 100000` (588,895 bytes of output) to a
// caller that pulls every line.
func BenchmarkExecSeq100k(b *testing.B) {
	s := benchSession(b)
	ctx := context.Background()
	b.SetBytes(588895)
	for b.Loop() {
		if lines := terminaltest.CountLines(b, ctx, s, "seq 1 100000"); lines != 100000 {
			b.Fatalf("seq printed %d lines, want 100000", lines)
		}
	}
}

// BenchmarkSpawn measures a spawn up to the shell ready at its prompt, and
// its close, unconfined and in the strictest sandbox (read-only, no
// network).
func BenchmarkSpawn(b *testing.B) {
	for _, mode := range []termapi.SandboxMode{"", termapi.SandboxReadOnly} {
		name := "unconfined"
		if mode != "" {
			name = "sandboxed"
		}
		b.Run(name, func(b *testing.B) { benchSpawn(b, mode) })
	}
}

func benchSpawn(b *testing.B, mode termapi.SandboxMode) {
	be := benchBackend(b)
	if mode != "" {
		be.sandbox.Network = false
	}
	ctx := context.Background()
	for b.Loop() {
		s, err := be.Spawn(ctx, termapi.SpawnSpec{SessionID: "bench", OwnerID: "bench", Policy: termapi.Policy{Sandbox: mode}})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.Close(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// reportShellCPU reports, when the returned func runs, the CPU the shell
// spent per operation: the bash half of a call's cost.
func reportShellCPU(b *testing.B, s *session) func() {
	before, self := shellCPU(b, s.pid), selfCPU(b)
	return func() {
		b.ReportMetric(float64((shellCPU(b, s.pid)-before).Microseconds())/float64(b.N), "bash-µs/op")
		b.ReportMetric(float64((selfCPU(b)-self).Microseconds())/float64(b.N), "dsh-µs/op")
	}
}

// selfCPU is the user and system time of this process: dsh's half.
func selfCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// shellCPU is the user and system time pid has used.
func shellCPU(b *testing.B, pid int) time.Duration {
	st, err := proc.ReadStat(pid)
	if err != nil {
		b.Fatal(err)
	}
	return st.CPU()
}

func benchBackend(b *testing.B) *Backend {
	be, err := NewBackend(DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := be.Close(ctx); err != nil {
			b.Error(err)
		}
	})
	return be
}

func benchSession(b *testing.B) *session {
	s, err := benchBackend(b).Spawn(context.Background(), termapi.SpawnSpec{SessionID: "bench", OwnerID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return s.(*session)
}

// BenchmarkWarmSpawnExecTrue is a new session's first Exec of `true` with a
// warm shell waiting: the hand-over, then the command. The pool is full
// when each session comes; the time of each step is reported apart.
func BenchmarkWarmSpawnExecTrue(b *testing.B) {
	be := newTestBackend(b, func(c *Config) { c.WarmShells = 2 })
	ctx := context.Background()
	var spawnT, execT []time.Duration
	i := 0
	for b.Loop() {
		b.StopTimer()
		awaitWarm(b, be, 2)
		i++
		cwd := b.TempDir()
		b.StartTimer()
		t0 := time.Now()
		ts, err := be.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-bench-" + strconv.Itoa(i), OwnerID: "bench", Cwd: cwd})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		s := ts.(*session)
		sn, err := s.Exec(ctx, termapi.ExecRequest{Command: "true", Stream: true, Captured: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sn.Output(ctx); err != io.EOF {
			b.Fatalf("output: %v", err)
		}
		if res, err := sn.Wait(ctx); err != nil || res.Exec == nil || res.Exec.State != termapi.ExecCompleted {
			b.Fatalf("result %+v, %v", res, err)
		}
		spawnT = append(spawnT, t1.Sub(t0))
		execT = append(execT, time.Since(t1))
		b.StopTimer()
		if err := s.Close(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(median(spawnT), "handover-p50-µs")
	b.ReportMetric(median(execT), "exec-p50-µs")
}

func median(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Microseconds())
}
