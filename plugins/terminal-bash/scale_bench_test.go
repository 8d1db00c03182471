//go:build linux

package terminalbash

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// BenchmarkExecTrueAmongIdle is BenchmarkExecTrue with other idle sessions
// alive: the per-call cost must not grow with their number.
func BenchmarkExecTrueAmongIdle(b *testing.B) {
	for _, idle := range []int{0, 100, 400} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			backend := newTestBackend(b, nil)
			for i := range idle {
				ts, err := backend.Spawn(context.Background(), termapi.SpawnSpec{SessionID: fmt.Sprintf("idle-%d", i), OwnerID: "owner"})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { ts.Close(context.Background(), "bench over") })
			}
			ts, err := backend.Spawn(context.Background(), termapi.SpawnSpec{SessionID: "hot", OwnerID: "owner"})
			if err != nil {
				b.Fatal(err)
			}
			s := ts.(*session)
			b.Cleanup(func() { s.Close(context.Background(), "bench over") })
			ctx := context.Background()
			defer reportShellCPU(b, s)()
			for b.Loop() {
				sn, err := s.Exec(ctx, termapi.ExecRequest{Command: "true", Stream: true})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sn.Output(ctx); err != io.EOF {
					b.Fatalf("output: %v", err)
				}
				if _, err := sn.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
