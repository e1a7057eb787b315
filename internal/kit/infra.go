package kit

import (
	"context"
	"strings"

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
