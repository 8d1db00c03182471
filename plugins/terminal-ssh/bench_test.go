package terminalssh

import (
	"context"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// BenchmarkStdinWait measures how long a command waiting for input takes
// to be proven so over SSH, through the probe beside the shell (the
// server is on loopback): ms-to-proof is from Exec to the settled send.
// Each round then interrupts it and waits for the prompt.
//
//	go test -run '^$' -bench StdinWait -benchtime 50x ./plugins/terminal-ssh/
func BenchmarkStdinWait(b *testing.B) {
	for _, command := range []string{"read x", "cat"} {
		b.Run(command, func(b *testing.B) {
			s := spawn(b, newBackend(b, nil), "")
			ctx := context.Background()
			var waited time.Duration
			for b.Loop() {
				start := time.Now()
				send, err := s.Exec(ctx, termapi.ExecRequest{Command: command, Stream: true})
				if err != nil {
					b.Fatal(err)
				}
				_, res := drain(b, ctx, send)
				waited += time.Since(start)
				if res.Reason != termapi.WaitStdinRead || res.Prompt {
					b.Fatalf("%s settled %s (prompt %v)", command, res.Reason, res.Prompt)
				}
				if _, err := s.Signal(ctx, termapi.SIGINT); err != nil {
					b.Fatal(err)
				}
				send, err = s.StartSend(ctx, termapi.SendRequest{Stream: true})
				if err != nil {
					b.Fatal(err)
				}
				if _, res = drain(b, ctx, send); !res.Prompt {
					b.Fatalf("after SIGINT: %s", res.Reason)
				}
			}
			b.ReportMetric(float64(waited.Microseconds())/1000/float64(b.N), "ms-to-proof")
		})
	}
}
