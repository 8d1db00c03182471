package terminalbash

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal"
)

// BenchmarkExecTrue measures the hot path of the bash tool: Exec of `true`
// until its end record has come and the terminal is drained. The command
// goes into the input channel, one line is typed, bash reads both, and the
// plumbing reports the end.
func BenchmarkExecTrue(b *testing.B) {
	s := benchSession(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sn, err := s.Exec(ctx, terminal.ExecRequest{Command: "true", Stream: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sn.Output(ctx); err != io.EOF {
			b.Fatalf("output: %v", err)
		}
		res, err := sn.Wait(ctx)
		if err != nil || res.Exec == nil || res.Exec.State != terminal.ExecCompleted {
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
		sn, err := s.StartSend(ctx, terminal.SendRequest{Text: "true", Submit: true})
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
		sn, err := s.Exec(ctx, terminal.ExecRequest{Command: "seq 1 100000", Stream: true})
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
		if err != nil || res.Exec == nil || res.Exec.State != terminal.ExecCompleted || lines != 100000 {
			b.Fatalf("result %+v, lines %d, err %v", res.Exec, lines, err)
		}
	}
}

// BenchmarkSpawn measures a spawn up to the shell ready at its prompt, and
// its close.
func BenchmarkSpawn(b *testing.B) {
	be := benchBackend(b)
	ctx := context.Background()
	for b.Loop() {
		s, err := be.Spawn(ctx, terminal.SpawnSpec{SessionID: "bench", OwnerID: "bench"})
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
	s, err := benchBackend(b).Spawn(context.Background(), terminal.SpawnSpec{SessionID: "bench", OwnerID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return s.(*session)
}
