package manager

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"capstan.dev/capstan/internal/contract"
	clustercontroller "capstan.dev/capstan/internal/controllers/cluster"
	"capstan.dev/capstan/internal/workload"
)

// setupControllers registers every controller with mgr.
func setupControllers(_ context.Context, mgr ctrl.Manager, o Options) error {
	resolver := &contract.Resolver{Reader: mgr.GetClient()}
	workloads, err := workload.New(mgr.GetClient(), workload.Options{Scheme: mgr.GetScheme(), Logger: mgr.GetLogger().WithName("workload")})
	if err != nil {
		return err
	}
	if err := mgr.Add(workloads); err != nil {
		return err
	}
	clusters := &clustercontroller.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Workload: workloads,
		Recorder: mgr.GetEventRecorder("cluster-controller"),
	}
	return clusters.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(ClusterController)})
}
