package kubelet

import (
	"context"
	"fmt"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// leaseDuration is the Lease's advertised duration: four heartbeats, as a
// kubelet's 40 s for its 10 s renewal.
func leaseDuration(interval time.Duration) int32 {
	return int32(max(1, math.Ceil(statusEvery*interval.Seconds())))
}

// leaseKeeper renews the node's Lease. It keeps the last Lease it wrote so
// a renewal is a single update; only a conflict or a missing Lease costs a
// read.
type leaseKeeper struct {
	client   kubernetes.Interface
	node     string
	uid      types.UID
	duration int32
	last     *coordinationv1.Lease
}

func (l *leaseKeeper) renew(ctx context.Context, now time.Time) error {
	leases := l.client.CoordinationV1().Leases(NodeLeaseNamespace)
	if l.last == nil {
		existing, err := leases.Get(ctx, l.node, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			created, err := leases.Create(ctx, l.desired(nil, now), metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("creating Lease %s/%s: %w", NodeLeaseNamespace, l.node, err)
			}
			l.last = created
			return nil
		case err != nil:
			return fmt.Errorf("reading Lease %s/%s: %w", NodeLeaseNamespace, l.node, err)
		}
		l.last = existing
	}
	updated, err := leases.Update(ctx, l.desired(l.last, now), metav1.UpdateOptions{})
	if err != nil {
		// Someone else wrote or deleted it: read again next time.
		l.last = nil
		return fmt.Errorf("renewing Lease %s/%s: %w", NodeLeaseNamespace, l.node, err)
	}
	l.last = updated
	return nil
}

func (l *leaseKeeper) desired(base *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
	var lease *coordinationv1.Lease
	if base != nil {
		lease = base.DeepCopy()
	} else {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: NodeLeaseNamespace, Name: l.node}}
	}
	if len(lease.OwnerReferences) == 0 && l.uid != "" {
		// Owned by the Node, so deleting the Node removes its Lease.
		lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: l.node, UID: l.uid}}
	}
	lease.Spec.HolderIdentity = ptr.To(l.node)
	lease.Spec.LeaseDurationSeconds = ptr.To(l.duration)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
	return lease
}

// leaseLoop renews the Lease every heartbeat interval until ctx ends.
func (k *kubelet) leaseLoop(ctx context.Context) {
	ticker := time.NewTicker(k.o.HeartbeatInterval)
	defer ticker.Stop()
	for {
		// A deleted Node's Lease is garbage-collected with it; renewing
		// would only re-create it for the collector to delete again.
		if _, err := k.node(); apierrors.IsNotFound(err) {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				continue
			}
		}
		if err := k.lease.renew(ctx, time.Now()); err != nil && ctx.Err() == nil {
			k.log.Error(err, "Lease renewal failed; will retry")
			// Retry sooner than a full interval once: a single conflict
			// should not make the node look late.
			if sleep(ctx, min(time.Second, k.o.HeartbeatInterval/4)) {
				if err := k.lease.renew(ctx, time.Now()); err != nil && ctx.Err() == nil {
					k.log.Error(err, "Lease renewal failed; will retry")
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
