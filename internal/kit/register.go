package kit

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// defaultWorkers is how many reconciles of one provider controller run at
// once when its options leave it open.
const defaultWorkers = 10

// ProviderOptions are the controller options of a provider whose options
// say workers reconciles at once per controller; 0 or less means the default.
func ProviderOptions(workers int) controller.Options {
	if workers <= 0 {
		workers = defaultWorkers
	}
	return controller.Options{MaxConcurrentReconciles: workers}
}

// InfraController is what sets one infrastructure provider's controller
// apart from another's when it is registered; the watches themselves are
// the same for every provider.
type InfraController struct {
	// Name of the controller, as it appears in logs and metrics.
	Name    string
	Options controller.Options
	// Wake, when not nil, brings objects back for what the API does not
	// show: a process that ended, a VM that stopped, a build that finished.
	Wake <-chan event.GenericEvent
	// Peers, when not nil, maps a change of one object of the kind to the
	// others of the kind that wait on it (a worker VM on its control
	// plane's bootstrap). It runs on the cache's events, so the objects it
	// returns read the change when they reconcile.
	Peers handler.MapFunc
}

// SetupInfraCluster registers r as the controller of an infrastructure
// cluster kind: it reconciles an object when it changes, when the Cluster
// whose spec.infrastructureRef names it changes, and when Wake says so.
func SetupInfraCluster[O client.Object, S any](mgr ctrl.Manager, c InfraController, r *Reconciler[O, S]) error {
	b, err := infraBuilder(mgr, c, r.NewObject(), &clusterv1.Cluster{})
	if err != nil {
		return err
	}
	return b.Complete(r)
}

// SetupInfraMachine registers r as the controller of an infrastructure
// machine kind: it reconciles an object when it changes, when the Machine
// whose spec.infrastructureRef names it changes, when its Cluster or the
// provider's infrastructure cluster (of infraCluster's kind) changes, and
// when Wake says so. newList returns an empty list of the machine kind, to
// find the machines of a cluster by their cluster-name label.
func SetupInfraMachine[O client.Object, S any](mgr ctrl.Manager, c InfraController, infraCluster client.Object, newList func() client.ObjectList, r *Reconciler[O, S]) error {
	b, err := infraBuilder(mgr, c, r.NewObject(), &clusterv1.Machine{})
	if err != nil {
		return err
	}
	toMembers := handler.EnqueueRequestsFromMapFunc(ToClusterMembers(mgr.GetClient(), newList))
	return b.
		Watches(infraCluster, toMembers).
		Watches(&clusterv1.Cluster{}, toMembers).
		Complete(r)
}

// infraBuilder starts the controller of obj's kind with the watches every
// infrastructure kind has: its own objects, the core owner whose
// infrastructureRef names them, and the wake channel.
func infraBuilder(mgr ctrl.Manager, c InfraController, obj client.Object, owner client.Object) (*builder.Builder, error) {
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return nil, fmt.Errorf("controller %s: %w", c.Name, err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(c.Name).
		WithOptions(c.Options).
		For(obj).
		Watches(owner, handler.EnqueueRequestsFromMapFunc(ToInfrastructure(gvk.Group, gvk.Kind)))
	if c.Wake != nil {
		b = b.WatchesRawSource(source.Channel(c.Wake, &handler.EnqueueRequestForObject{}))
	}
	if c.Peers != nil {
		b = b.Watches(obj, handler.EnqueueRequestsFromMapFunc(c.Peers))
	}
	return b, nil
}
