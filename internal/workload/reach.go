package workload

import (
	"errors"
	"time"

	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// Reachable tells whether a Cluster's workload API server is expected to
// answer: once the control plane is initialized, or, for a Cluster whose
// control plane is bare Machines, as soon as a kubeconfig may exist (their
// first Node is what initializes the control plane).
func Reachable(c *clusterv1.Cluster) bool {
	return ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false) || !c.Spec.ControlPlaneRef.IsDefined()
}

// RetryAfter is how soon to ask a workload cluster again after err: the
// cache retries a failed connection no sooner than every 10 s.
func RetryAfter(err error) time.Duration {
	if errors.Is(err, ErrClusterNotConnected) {
		return 15 * time.Second
	}
	return 5 * time.Second
}
