package terminalkubernetes

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var labelValueRE = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

// leaseKeeper holds this instance's Lease, renewed every third of its
// duration, and removes the pods of dead instances of the same identity:
// an instance is dead when its lease is gone, or when it has not been
// renewed for a whole duration as this instance's clock sees it (so clocks
// of different machines need not agree). The first sweep runs before New
// returns: pods whose dsh is long gone are removed at load; those of a dsh
// killed a moment ago, once its lease has run out.
type leaseKeeper struct {
	b     *Backend
	name  string
	every time.Duration
	dur   time.Duration

	stop chan struct{}
	done chan struct{}
	once sync.Once

	// seen is the renew time of each other instance's lease as last seen,
	// and when this instance first saw it.
	seen map[string]observed
}

type observed struct {
	renew string
	at    time.Time
}

const (
	labelLeaseOf = "dsh.dev/lease-of"
	leaseHolder  = "dsh-backend-kubernetes"
)

func startLease(ctx context.Context, b *Backend) (*leaseKeeper, error) {
	dur := time.Duration(b.cfg.LeaseSeconds) * time.Second
	k := &leaseKeeper{
		b:     b,
		name:  "dsh-" + b.cfg.Identity + "-" + b.instance,
		every: dur / 3,
		dur:   dur,
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		seen:  make(map[string]observed),
	}
	ctx, cancel := context.WithTimeout(ctx, statusBound)
	defer cancel()
	now := metav1.NewMicroTime(time.Now())
	secs := int32(b.cfg.LeaseSeconds)
	holder := leaseHolder + "@" + hostname()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:   k.name,
			Labels: map[string]string{labelManagedBy: managedByDSH, labelIdentity: b.cfg.Identity, labelInstance: b.instance, labelLeaseOf: "instance"},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}
	if _, err := b.api.CoordinationV1().Leases(b.ns).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("%w: create this instance's lease %s/%s: %v", ErrUnreachable, b.ns, k.name, err)
	}
	k.sweep(ctx)
	go k.run()
	return k, nil
}

func (k *leaseKeeper) run() {
	defer close(k.done)
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), k.every)
		if err := k.renew(ctx); err != nil {
			k.b.log.Warn("renewing this instance's lease", "lease", k.name, "err", err)
		}
		k.sweep(ctx)
		cancel()
	}
}

// renew moves the lease's renew time to now.
func (k *leaseKeeper) renew(ctx context.Context) error {
	leases := k.b.api.CoordinationV1().Leases(k.b.ns)
	lease, err := leases.Get(ctx, k.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.NewMicroTime(time.Now())
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// sweep deletes the pods, and the leases, of dead instances of this
// identity.
func (k *leaseKeeper) sweep(ctx context.Context) {
	b := k.b
	pods, err := b.api.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: labelManagedBy + "=" + managedByDSH + "," + labelIdentity + "=" + b.cfg.Identity})
	if err != nil {
		b.log.Debug("listing the pods of this identity", "err", err)
		return
	}
	leases, err := b.api.CoordinationV1().Leases(b.ns).List(ctx, metav1.ListOptions{LabelSelector: labelLeaseOf + "=instance," + labelIdentity + "=" + b.cfg.Identity})
	if err != nil {
		b.log.Debug("listing the leases of this identity", "err", err)
		return
	}
	now := time.Now()
	alive := map[string]bool{b.instance: true}
	var dead []string
	for _, l := range leases.Items {
		inst := l.Labels[labelInstance]
		if inst == b.instance {
			continue
		}
		renew := ""
		if l.Spec.RenewTime != nil {
			renew = l.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
		}
		dur := k.dur
		if l.Spec.LeaseDurationSeconds != nil {
			dur = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		}
		o, ok := k.seen[inst]
		if !ok || o.renew != renew {
			o = observed{renew: renew, at: now}
			k.seen[inst] = o
		}
		// Unchanged for a whole duration as seen from here, or renewed
		// last long ago by any clock's account.
		stale := now.Sub(o.at) > dur || (l.Spec.RenewTime != nil && now.Sub(l.Spec.RenewTime.Time) > 2*dur+time.Minute)
		if stale {
			dead = append(dead, l.Name)
			delete(k.seen, inst)
			continue
		}
		alive[inst] = true
	}
	var errs []error
	grace := int64(0)
	for _, p := range pods.Items {
		inst := p.Labels[labelInstance]
		if alive[inst] || p.DeletionTimestamp != nil {
			continue
		}
		b.log.Info("removing a pod whose dsh is gone", "pod", p.Name, "instance", inst)
		if err := b.api.CoreV1().Pods(b.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for _, name := range dead {
		if err := b.api.CoordinationV1().Leases(b.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		b.log.Warn("removing what dead instances left", "err", err)
	}
}

// close stops renewing and deletes the lease: this instance's pods are
// gone by now.
func (k *leaseKeeper) close(ctx context.Context) error {
	k.once.Do(func() { close(k.stop) })
	select {
	case <-k.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	err := k.b.api.CoordinationV1().Leases(k.b.ns).Delete(ctx, k.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("terminal-kubernetes: delete this instance's lease: %w", err)
	}
	return nil
}
