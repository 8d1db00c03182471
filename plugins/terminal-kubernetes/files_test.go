package terminalkubernetes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

// A session's files reach the pod whole, over both exec transports, from
// a byte to several MiB, in parts as the bash tool appends them: an exec's
// stdin delivered only 192 KiB of them before (see runInPod). Closing the
// session removes its files from a pod that stays.
func TestSessionFilesWhole(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	for _, transport := range []string{transportWebSocket, transportSPDY} {
		t.Run(transport, func(t *testing.T) {
			cfg := testConfig(c, ns)
			cfg.ExecTransport = transport
			b := newBackend(t, cfg)
			s := spawn(t, b, "files-"+transport)
			if !s.Capabilities().Files {
				t.Fatal("the session does not write files")
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			for _, size := range []int{0, 1, 64 << 10, 590 << 10, 5 << 20} {
				data := make([]byte, size)
				rand.Read(data)
				name := fmt.Sprintf("out-%d", size)
				// Written as the bash tool does: a first part, then the
				// rest appended.
				first := min(size, 3<<20)
				p, err := s.WriteFile(ctx, termapi.FileRequest{Name: name, Data: data[:first]})
				if err == nil && first < size {
					p, err = s.WriteFile(ctx, termapi.FileRequest{Name: name, Data: data[first:], Append: true})
				}
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(data)
				want := fmt.Sprintf("%d %s\n", size, hex.EncodeToString(sum[:]))
				if got := mustComplete(t, s, "echo $(wc -c < "+p+") $(sha256sum < "+p+" | cut -d' ' -f1)", 0); got != want {
					t.Errorf("%d bytes written: the file in the pod has %q, want %q", size, got, want)
				}
			}
			// A second session keeps the pod; the first one's files go
			// with it.
			p, err := s.WriteFile(ctx, termapi.FileRequest{Name: "kept", Data: []byte("x")})
			if err != nil {
				t.Fatal(err)
			}
			other := terminaltest.Spawn(t, b, termapi.SpawnSpec{SessionID: "pty-second-" + transport, OwnerID: "files-" + transport}, waitLong)
			if err := s.Close(ctx, "test"); err != nil {
				t.Fatal(err)
			}
			if got := mustComplete(t, other, "test -e "+path.Dir(p)+" && echo there || echo gone", 0); got != "gone\n" {
				t.Errorf("the closed session's files in the pod: %q", got)
			}
		})
	}
}
