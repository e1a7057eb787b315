package machinepool

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"capstan.dev/capstan/internal/workload"
)

// workloadClient is a client of the pool's workload cluster whose Node
// reads come from the shared cache, with the watch that wakes the pool when
// one of its Nodes changes.
func (r *Reconciler) workloadClient(ctx context.Context, s *scope) (client.Client, error) {
	key := client.ObjectKeyFromObject(s.cluster)
	if err := r.Workload.Watch(ctx, key, workload.WatchInput{
		Name:    "machinepool-nodes",
		Watcher: r.controller,
		Kind:    &corev1.Node{},
		Handler: handler.EnqueueRequestsFromMapFunc(r.nodeToMachinePool(s.mp.Namespace)),
	}); err != nil {
		return nil, err
	}
	return r.Workload.GetClient(ctx, key)
}

// reconcileNodes finds the Nodes of the pool's provider IDs and records
// them, in the order of spec.providerIDList, in status.nodeRefs.
func (r *Reconciler) reconcileNodes(ctx context.Context, s *scope) (time.Duration, error) {
	mp := s.mp
	if len(mp.Spec.ProviderIDList) == 0 {
		mp.Status.NodeRefs = nil
		return 0, nil
	}
	if !workload.Reachable(s.cluster) || r.Workload == nil {
		return 0, nil
	}
	c, err := r.workloadClient(ctx, s)
	if err != nil {
		s.nodesErr = err
		return workload.RetryAfter(err), nil
	}
	nodes, err := nodesByProviderID(ctx, c)
	if err != nil {
		s.nodesErr = err
		return workload.RetryAfter(err), nil
	}
	s.nodes = map[string]*corev1.Node{}
	var refs []corev1.ObjectReference
	for _, id := range mp.Spec.ProviderIDList {
		n, ok := nodes[id]
		if !ok {
			continue
		}
		s.nodes[id] = n
		refs = append(refs, corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID})
	}
	mp.Status.NodeRefs = refs
	return 0, nil
}

// nodesByProviderID lists the workload cluster's Nodes by provider ID.
func nodesByProviderID(ctx context.Context, c client.Reader) (map[string]*corev1.Node, error) {
	list := &corev1.NodeList{}
	if err := c.List(ctx, list); err != nil {
		return nil, err
	}
	out := make(map[string]*corev1.Node, len(list.Items))
	for i := range list.Items {
		if id := list.Items[i].Spec.ProviderID; id != "" {
			out[id] = &list.Items[i]
		}
	}
	return out, nil
}

// nodeReady tells whether a Node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
