package machine

import (
	"context"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	capstanpatch "capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/plan"
)

// Annotations Capstan keeps on every Node it manages, so that anyone on the
// workload cluster can tell which Machine a Node is.
const (
	NodeClusterNameAnnotation      = "cluster.x-k8s.io/cluster-name"
	NodeClusterNamespaceAnnotation = "cluster.x-k8s.io/cluster-namespace"
	NodeMachineAnnotation          = "cluster.x-k8s.io/machine"
	NodeOwnerKindAnnotation        = "cluster.x-k8s.io/owner-kind"
	NodeOwnerNameAnnotation        = "cluster.x-k8s.io/owner-name"
	// NodeManagedLabelsAnnotation lists the label keys Capstan copies from
	// the Machine, so that dropping one from the Machine is noticed.
	NodeManagedLabelsAnnotation = "cluster.x-k8s.io/labels-from-machine"
	// NodeManagedTaintsAnnotation lists the Always taints (key:effect)
	// Capstan keeps on the Node from the Machine's spec.taints, so that it
	// removes only its own when the Machine's list shrinks; its presence
	// says the Node has had its OnInitialization taints.
	NodeManagedTaintsAnnotation = "cluster.x-k8s.io/taints-from-machine"
)

// syncedLabel tells whether a Machine label is one Capstan copies to the
// Node: node roles and labels in the node-restriction and
// node.cluster.x-k8s.io domains, which kubelets may not set themselves.
func syncedLabel(key string) bool {
	domain, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	switch {
	case domain == "node-role.kubernetes.io",
		domain == "node-restriction.kubernetes.io", strings.HasSuffix(domain, ".node-restriction.kubernetes.io"),
		domain == "node.cluster.x-k8s.io", strings.HasSuffix(domain, ".node.cluster.x-k8s.io"):
		return true
	}
	return false
}

// syncNode puts the Machine's labels and identity annotations on its Node
// and reconciles the Machine's taints. It writes with JSON merge patches
// only, as upstream Cluster API does: every API server accepts them,
// including ones that serve no server-side apply (upstream's in-memory
// provider's simulated API servers refuse it with 415). A synced label the
// Machine no longer has is removed by name, from the list of keys the
// managed-labels annotation recorded, so everyone else's labels are left
// alone; an unchanged Node gets no write.
func (r *Reconciler) syncNode(ctx context.Context, c client.Client, s *scope) error {
	m, node := s.machine, s.node
	labels := map[string]any{}
	var keys []string
	for k, v := range m.Labels {
		if syncedLabel(k) {
			labels[k] = v
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	annotations := map[string]any{
		NodeClusterNameAnnotation:      m.Spec.ClusterName,
		NodeClusterNamespaceAnnotation: m.Namespace,
		NodeMachineAnnotation:          m.Name,
		NodeManagedLabelsAnnotation:    strings.Join(keys, ","),
	}
	for _, ref := range m.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			annotations[NodeOwnerKindAnnotation] = ref.Kind
			annotations[NodeOwnerNameAnnotation] = ref.Name
		}
	}
	if patch := nodeMetadataPatch(node, labels, annotations); patch != nil {
		// The patch leaves node as the API server returned it, so the
		// taints continue from the Node as it now is.
		node = node.DeepCopy()
		if err := c.Patch(ctx, node, capstanpatch.Merge(map[string]any{"metadata": patch})); err != nil {
			return err
		}
	}
	return syncTaints(ctx, c, node, m.Spec.Taints)
}

// nodeMetadataPatch is the merge patch of metadata that gives the Node the
// labels and annotations Capstan wants and drops the synced labels it put
// there before that the Machine no longer has; nil when nothing differs.
func nodeMetadataPatch(node *corev1.Node, labels, annotations map[string]any) map[string]any {
	setLabels := map[string]any{}
	for k, v := range labels {
		if have, ok := node.Labels[k]; !ok || have != v {
			setLabels[k] = v
		}
	}
	if prev := node.Annotations[NodeManagedLabelsAnnotation]; prev != "" {
		for _, k := range strings.Split(prev, ",") {
			if _, keep := labels[k]; !keep && syncedLabel(k) {
				if _, ok := node.Labels[k]; ok {
					setLabels[k] = nil
				}
			}
		}
	}
	setAnnotations := map[string]any{}
	for k, v := range annotations {
		if have, ok := node.Annotations[k]; !ok || have != v {
			setAnnotations[k] = v
		}
	}
	if len(setLabels) == 0 && len(setAnnotations) == 0 {
		return nil
	}
	patch := map[string]any{}
	if len(setLabels) > 0 {
		patch["labels"] = setLabels
	}
	if len(setAnnotations) > 0 {
		patch["annotations"] = setAnnotations
	}
	return patch
}

// syncTaints writes the Node's taints and taint-tracking annotation as
// plan.NodeTaints decides, with one merge patch preconditioned on the
// resourceVersion read (taints are a list a merge patch replaces whole, so a
// concurrent change must not be overwritten), and nothing when nothing
// changes.
func syncTaints(ctx context.Context, c client.Client, node *corev1.Node, want []clusterv1.MachineTaint) error {
	tracked, initialized := node.Annotations[NodeManagedTaintsAnnotation]
	decided := plan.NodeTaints(plan.NodeTaintsInput{Current: node.Spec.Taints, Tracked: tracked, Initialized: initialized, Want: want})
	if !decided.Changed {
		return nil
	}
	return c.Patch(ctx, node.DeepCopy(), capstanpatch.Merge(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": node.ResourceVersion,
			"annotations":     map[string]any{NodeManagedTaintsAnnotation: decided.Tracked},
		},
		"spec": map[string]any{"taints": decided.Taints},
	}))
}
