package terminalbash

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal"
)

// BenchmarkSendTrue measures a send of `true` settled by the prompt marker:
// write, echo, bash running the builtin, the marker and prompt, settle.
func BenchmarkSendTrue(b *testing.B) {
	s := benchSession(b)
	b.ReportAllocs()
	sendTrueLoop(b, s)
}

// BenchmarkSendTrueNoMarker is BenchmarkSendTrue after `PROMPT_COMMAND=`:
// without the marker the stdin proof has to notice bash back at its prompt.
func BenchmarkSendTrueNoMarker(b *testing.B) {
	s := benchSession(b)
	ctx := context.Background()
	sn, err := s.StartSend(ctx, terminal.SendRequest{Text: "PROMPT_COMMAND=", Submit: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sn.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	sendTrueLoop(b, s)
}

// sendTrueLoop sends `true` until the benchmark is done, requiring each
// send to settle with the shell waiting for input again.
func sendTrueLoop(b *testing.B, s terminal.Session) {
	ctx := context.Background()
	for b.Loop() {
		sn, err := s.StartSend(ctx, terminal.SendRequest{Text: "true", Submit: true})
		if err != nil {
			b.Fatal(err)
		}
		res, err := sn.Wait(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if res.Reason != terminal.WaitStdinRead {
			b.Fatalf("reason %s, viewport %q", res.Reason, res.Viewport)
		}
	}
}

// BenchmarkSeq100k streams `seq 1 100000` (588,895 bytes of output) to a
// caller that pulls every line.
func BenchmarkSeq100k(b *testing.B) {
	s := benchSession(b)
	ctx := context.Background()
	b.SetBytes(588895)
	for b.Loop() {
		sn, err := s.StartSend(ctx, terminal.SendRequest{Text: "seq 1 100000", Submit: true, Stream: true})
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
		if err != nil || res.Reason != terminal.WaitStdinRead || lines != 100001 {
			b.Fatalf("reason %s, lines %d, err %v", res.Reason, lines, err)
		}
	}
}

// BenchmarkSpawn measures a spawn up to the first prompt, and its close.
func BenchmarkSpawn(b *testing.B) {
	be, err := NewBackend(DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
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

func benchSession(b *testing.B) terminal.Session {
	be, err := NewBackend(DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s, err := be.Spawn(ctx, terminal.SpawnSpec{SessionID: "bench", OwnerID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := s.Close(cctx, "bench"); err != nil {
			b.Error(err)
		}
	})
	return s
}
