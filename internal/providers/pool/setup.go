package pool

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/kit"
)

// SetupController registers r, under name, as the controller of a
// provider's pool kind: it reconciles a pool when it changes, when the
// MachinePool whose infrastructureRef names it changes, and when one of its
// instances (of instance's kind) or their Machines change.
func SetupController[O client.Object, S any](mgr ctrl.Manager, name string, opts controller.Options, instance client.Object, r *kit.Reconciler[O, S]) error {
	obj := r.NewObject()
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("controller %s: %w", name, err)
	}
	toPool := handler.EnqueueRequestsFromMapFunc(MemberToPool(mgr.GetClient(), gvk.Group, gvk.Kind))
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(opts).
		For(obj).
		Watches(&clusterv1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(MachinePoolToPool(gvk.Group, gvk.Kind))).
		Watches(instance, toPool).
		Watches(&clusterv1.Machine{}, toPool).
		Complete(r)
}
