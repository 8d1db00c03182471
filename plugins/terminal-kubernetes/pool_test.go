package terminalkubernetes

import (
	"context"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
)

// waitWarm waits until the pool holds n running, unclaimed pods.
func waitWarm(t *testing.T, p *warmPool, n int) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		p.mu.Lock()
		ready := len(p.ready)
		p.mu.Unlock()
		if ready == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d warm pods, want %d", ready, n)
		}
		<-tick.C
	}
}

// An owner's first session takes a warm pod, relabelled as its own; the
// pool starts another; closing the backend deletes them all.
func TestWarmPods(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	cfg := testConfig(c, ns)
	cfg.WarmPods = 2
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	b, err := New(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitWarm(t, b.pool, 2)
	b.pool.mu.Lock()
	warm := append([]string(nil), b.pool.ready...)
	b.pool.mu.Unlock()
	s := spawn(t, b, "owner-w")
	if out := mustComplete(t, s, "echo $HOSTNAME", 0); out != warm[0]+"\n" {
		t.Errorf("the session runs in %q, want the first warm pod %s", out, warm[0])
	}
	if pods := c.Pods(t, ns, labelOwner+"=owner-w,"+labelPool+"="+poolClaimed); len(pods) != 1 || pods[0].Name != warm[0] {
		t.Errorf("the claimed pod: %d pods labelled for owner-w", len(pods))
	}
	waitWarm(t, b.pool, 2)
	if err := s.Close(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if pods := c.Pods(t, ns, labelManagedBy+"="+managedByDSH); len(pods) != 0 {
		t.Errorf("%d pods after the backend closed, want 0", len(pods))
	}
}
