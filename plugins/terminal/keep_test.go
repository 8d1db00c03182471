package terminal_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// keptBackend is a stub backend whose keeper keeps one session per owner
// o0, o1, ...: List holds until gate closes, and counts its calls.
type keptBackend struct {
	stubBackend
	owners int
	gate   chan struct{}
	lists  atomic.Int32
}

func (b *keptBackend) List(ctx context.Context) ([]termapi.Info, error) {
	b.lists.Add(1)
	select {
	case <-b.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	infos := make([]termapi.Info, b.owners)
	for i := range infos {
		infos[i] = termapi.Info{ID: fmt.Sprintf("kept-%d", i), OwnerID: fmt.Sprintf("o%d", i), Capabilities: termapi.Capabilities{Keep: true}, Kept: &termapi.Kept{}}
	}
	return infos, nil
}

func (b *keptBackend) Attach(context.Context, string) (termapi.Session, error) {
	sess := newStubSession()
	sess.caps.Keep = true
	return sess, nil
}

// TestAdoptListsOnceForOwnersTogether: owners that come back together (a
// thousand HTTP clients after a restart) wait for one List of the kept
// sessions, rather than each asking the keeper for every one: N Lists of N
// sessions made reattaching a thousand shells take seconds.
func TestAdoptListsOnceForOwnersTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 8
		h := newHost(t)
		backend := &keptBackend{stubBackend: stubBackend{typ: "kept"}, owners: n, gate: make(chan struct{})}
		svc := newService(t, backend)
		owners := make([]*host.Owner, n)
		for i := range owners {
			owners[i] = newOwner(t, h, fmt.Sprintf("o%d", i))
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, o := range owners {
			wg.Go(func() {
				_, errs[i] = svc.Adopt(context.Background(), o, terminal.AdoptRequest{Type: "kept"})
			})
		}
		synctest.Wait() // every Adopt is in a List, or waits for one
		close(backend.gate)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("owner %d: Adopt: %v", i, err)
			}
		}
		if got := backend.lists.Load(); got != 1 {
			t.Errorf("%d owners coming back together made %d Lists, want 1", n, got)
		}
	})
}
