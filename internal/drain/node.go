package drain

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/patch"
)

// Cordon marks the node unschedulable (spec.unschedulable, which the node
// lifecycle controller turns into the node.kubernetes.io/unschedulable
// taint) so that evicted pods are not scheduled back onto it. It reads the
// node and writes only when the node is not cordoned yet, with a merge patch
// of that one field. A missing node is returned as the API's NotFound error.
func Cordon(ctx context.Context, c client.Client, nodeName string) error {
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return err
	}
	if node.Spec.Unschedulable {
		return nil
	}
	cordon := patch.Merge(map[string]any{"spec": map[string]any{"unschedulable": true}})
	if err := c.Patch(ctx, node, cordon); err != nil {
		return fmt.Errorf("cordoning node %s: %w", nodeName, err)
	}
	return nil
}

// NodeUnreachable reports whether the node's Ready condition is Unknown: its
// kubelet has stopped reporting, so pods there will not finish terminating by
// themselves.
func NodeUnreachable(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionUnknown
		}
	}
	return false
}

// TimeoutPassed reports whether a wait that started at start has run out of
// timeoutSeconds by now: the Machine's nodeDrainTimeoutSeconds against
// status.deletion.nodeDrainStartTime, or nodeVolumeDetachTimeoutSeconds
// against waitForNodeVolumeDetachStartTime. A timeout of 0 (or less) never
// passes, nor does one whose start has not been recorded.
func TimeoutPassed(start, now time.Time, timeoutSeconds int32) bool {
	if timeoutSeconds <= 0 || start.IsZero() {
		return false
	}
	return !now.Before(start.Add(time.Duration(timeoutSeconds) * time.Second))
}
