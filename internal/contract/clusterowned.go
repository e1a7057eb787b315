package contract

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// ClusterOwner is the owner reference (not a controller reference) that a
// Cluster holds on the templates its control plane and MachineSets clone.
// Tools find a cluster's objects by owner references (clusterctl move walks
// them; the garbage collector deletes templates with their Cluster), so a
// template without it would be left behind.
func ClusterOwner(c *clusterv1.Cluster) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: clusterv1.ClusterKind, Name: c.Name, UID: c.UID}
}

// EnsureClusterOwner adds ClusterOwner(c) to obj's owner references with a
// merge patch, unless obj already has it or is being deleted. It writes
// nothing when there is nothing to change.
func EnsureClusterOwner(ctx context.Context, w client.Writer, obj *unstructured.Unstructured, c *clusterv1.Cluster) error {
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == c.UID {
			return nil
		}
	}
	base := obj.DeepCopy()
	obj.SetOwnerReferences(append(obj.GetOwnerReferences(), ClusterOwner(c)))
	// The optimistic lock keeps a concurrent owner change by someone else
	// from being overwritten by the list this patch carries.
	if err := w.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("making Cluster %s an owner of %s %s: %w", c.Name, obj.GetKind(), obj.GetName(), err)
	}
	return nil
}
