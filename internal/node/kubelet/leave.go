package kubelet

import (
	"context"
	"time"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
)

// leaveLoop answers the Node's leave-load-balancer request: it runs OnLeave
// and then annotates the Node as having left. It runs on its own so that
// OnLeave (which waits for the load balancer) never delays a heartbeat.
func (k *kubelet) leaveLoop(ctx context.Context) {
	// answered remembers the request already answered, so a cache that has
	// not yet seen our own annotation does not run OnLeave twice.
	answered := false
	retry := time.NewTicker(k.o.HeartbeatInterval)
	defer retry.Stop()
	for {
		node, err := k.node()
		if err == nil {
			asked := node.Annotations[controlplanev1.LeaveLoadBalancerAnnotation] == "true"
			left := node.Annotations[controlplanev1.LeftLoadBalancerAnnotation] == "true"
			switch {
			case !asked:
				answered = false
			case asked && !left && !answered:
				if k.leave(ctx) {
					answered = true
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-k.leaveCh:
		case <-retry.C:
		}
	}
}

// leave runs OnLeave and answers; it reports success.
func (k *kubelet) leave(ctx context.Context) bool {
	k.log.Info("Asked to leave the load balancer")
	if k.o.OnLeave != nil {
		if err := k.o.OnLeave(ctx); err != nil {
			if ctx.Err() == nil {
				k.log.Error(err, "Leaving the load balancer failed; will retry")
			}
			return false
		}
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{controlplanev1.LeftLoadBalancerAnnotation: "true"}}}
	if _, err := k.patchNode(ctx, k.client, patch, ""); err != nil {
		if ctx.Err() == nil {
			k.log.Error(err, "Answering the leave-load-balancer request failed; will retry")
		}
		return false
	}
	k.log.Info("Left the load balancer")
	return true
}
