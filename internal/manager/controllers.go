package manager

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"capstan.dev/capstan/internal/contract"
	clustercontroller "capstan.dev/capstan/internal/controllers/cluster"
)

// setupControllers registers every controller with mgr.
func setupControllers(_ context.Context, mgr ctrl.Manager, o Options) error {
	resolver := &contract.Resolver{Reader: mgr.GetClient()}
	clusters := &clustercontroller.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Recorder: mgr.GetEventRecorder("cluster-controller"),
	}
	return clusters.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(ClusterController)})
}
