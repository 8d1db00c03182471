package terminalkubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// warmPool keeps pods started and unclaimed (Config.WarmPods): an owner's
// first session takes one instead of waiting for a pod to start, and the
// pool starts another. A claimed pod is relabelled with its owner and
// session.
type warmPool struct {
	b    *Backend
	size int

	mu       sync.Mutex
	ready    []string // running, unclaimed
	starting int
	closed   bool
	wg       sync.WaitGroup
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

const poolWarm, poolClaimed = "warm", "claimed"

func startPool(b *Backend, size int) *warmPool {
	p := &warmPool{b: b, size: size, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	p.refill()
	return p
}

// refill asks the pool to top itself up.
func (p *warmPool) refill() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *warmPool) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case <-p.kick:
		}
		p.mu.Lock()
		for !p.closed && len(p.ready)+p.starting < p.size {
			p.starting++
			p.wg.Add(1)
			go p.start()
		}
		p.mu.Unlock()
	}
}

// start starts one warm pod.
func (p *warmPool) start() {
	defer p.wg.Done()
	pod := p.b.buildPod(termapi.SpawnSpec{}, p.b.configLimits())
	pod.Labels[labelPool] = poolWarm
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.b.cfg.TimeoutMs)*time.Millisecond)
	defer cancel()
	err := p.b.startPod(ctx, pod)
	p.mu.Lock()
	p.starting--
	keep := err == nil && !p.closed
	if keep {
		p.ready = append(p.ready, pod.Name)
	}
	p.mu.Unlock()
	switch {
	case err != nil:
		p.b.log.Warn("starting a warm pod", "err", err)
		// Not again at once: what failed would fail again.
		select {
		case <-p.stop:
		case <-time.After(5 * time.Second):
			p.refill()
		}
	case !keep:
		dctx, dcancel := context.WithTimeout(context.Background(), statusBound)
		defer dcancel()
		_ = p.b.deletePod(dctx, pod.Name)
	}
}

// claim takes a warm pod for spec's owner, relabelled, or returns "" when
// none is ready.
func (p *warmPool) claim(ctx context.Context, spec termapi.SpawnSpec) string {
	p.mu.Lock()
	if len(p.ready) == 0 {
		p.mu.Unlock()
		p.refill()
		return ""
	}
	name := p.ready[0]
	p.ready = p.ready[1:]
	p.mu.Unlock()
	p.refill()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]string{labelPool: poolClaimed, labelOwner: labelValue(spec.OwnerID), labelSession: labelValue(spec.SessionID)},
		"annotations": map[string]string{annotationOwner: spec.OwnerID, annotationSession: spec.SessionID},
	}})
	if _, err := p.b.api.CoreV1().Pods(p.b.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		p.b.log.Warn("claiming a warm pod", "pod", name, "err", err)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusBound)
		defer cancel()
		_ = p.b.deletePod(dctx, name)
		return ""
	}
	return name
}

// close stops the pool and deletes its unclaimed pods.
func (p *warmPool) close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	p.wg.Wait()
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	var errs []error
	for _, name := range ready {
		errs = append(errs, p.b.deletePod(ctx, name))
	}
	return errors.Join(errs...)
}
