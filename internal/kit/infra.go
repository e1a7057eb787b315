package kit

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// ToInfrastructure maps a Cluster or a Machine to the infrastructure object
// its spec.infrastructureRef names, when that is of group and kind: how an
// infrastructure provider's controller hears of changes to its owner.
func ToInfrastructure(group, kind string) handler.MapFunc {
	return func(_ context.Context, obj client.Object) []reconcile.Request {
		var ref clusterv1.ContractVersionedObjectReference
		switch o := obj.(type) {
		case *clusterv1.Cluster:
			ref = o.Spec.InfrastructureRef
		case *clusterv1.Machine:
			ref = o.Spec.InfrastructureRef
		default:
			return nil
		}
		if ref.APIGroup != group || ref.Kind != kind || ref.Name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}}
	}
}

// CoreOwnerName returns the name of obj's owner of a core kind (Cluster,
// Machine, …), whatever version of the core group the reference names; ""
// when it has none.
func CoreOwnerName(obj metav1.Object, kind string) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == kind && strings.HasPrefix(ref.APIVersion, clusterv1.GroupVersion.Group+"/") {
			return ref.Name
		}
	}
	return ""
}

// ToClusterMembers maps a Cluster, or an object a Cluster owns (its
// infrastructure cluster), to the objects of newList's kind in its namespace
// that carry the cluster-name label of that Cluster: how an infrastructure
// provider's machine controller hears of changes to its cluster.
func ToClusterMembers(c client.Reader, newList func() client.ObjectList) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		name := obj.GetName()
		if _, isCluster := obj.(*clusterv1.Cluster); !isCluster {
			if name = CoreOwnerName(obj, clusterv1.ClusterKind); name == "" {
				return nil
			}
		}
		list := newList()
		if err := c.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
			return nil
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(items))
		for _, item := range items {
			if o, ok := item.(client.Object); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
			}
		}
		return reqs
	}
}
