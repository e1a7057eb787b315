package manager

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"capstan.dev/capstan/internal/contract"
	clustercontroller "capstan.dev/capstan/internal/controllers/cluster"
	clusterclasscontroller "capstan.dev/capstan/internal/controllers/clusterclass"
	clusterresourcesetcontroller "capstan.dev/capstan/internal/controllers/clusterresourceset"
	clustertopologycontroller "capstan.dev/capstan/internal/controllers/clustertopology"
	kubeadmconfigcontroller "capstan.dev/capstan/internal/controllers/kubeadmconfig"
	kubeadmcontrolplanecontroller "capstan.dev/capstan/internal/controllers/kubeadmcontrolplane"
	machinecontroller "capstan.dev/capstan/internal/controllers/machine"
	machinedeploymentcontroller "capstan.dev/capstan/internal/controllers/machinedeployment"
	machinehealthcheckcontroller "capstan.dev/capstan/internal/controllers/machinehealthcheck"
	machinepoolcontroller "capstan.dev/capstan/internal/controllers/machinepool"
	machinesetcontroller "capstan.dev/capstan/internal/controllers/machineset"
	"capstan.dev/capstan/internal/providers/inmemory"
	"capstan.dev/capstan/internal/providers/local"
	"capstan.dev/capstan/internal/providers/qemu"
	"capstan.dev/capstan/internal/webhook"
	"capstan.dev/capstan/internal/workload"
)

// setupControllers registers every controller with mgr.
func setupControllers(ctx context.Context, mgr ctrl.Manager, o Options) error {
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
	if err := clusters.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(ClusterController)}); err != nil {
		return err
	}
	classes := &clusterclasscontroller.Reconciler{Client: mgr.GetClient(), Resolver: resolver}
	if err := classes.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(ClusterClassController)}); err != nil {
		return err
	}
	if o.ClusterKubeconfigDir != "" {
		if err := setupKubeconfigFiles(mgr, o.ClusterKubeconfigDir); err != nil {
			return err
		}
	}
	if o.Webhook != nil {
		hooks := *o.Webhook
		hooks.FilteredCache = o.Namespace != "" || o.WatchFilter != ""
		if _, err := webhook.Setup(ctx, mgr, hooks); err != nil {
			return err
		}
	}
	topologies := &clustertopologycontroller.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Recorder: mgr.GetEventRecorder("clustertopology-controller"),
	}
	if err := topologies.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(ClusterTopologyController)}); err != nil {
		return err
	}
	machines := &machinecontroller.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Workload: workloads,
		Recorder: mgr.GetEventRecorder("machine-controller"),
	}
	if err := machines.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(MachineController)}); err != nil {
		return err
	}
	sets := &machinesetcontroller.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Recorder: mgr.GetEventRecorder("machineset-controller"),
	}
	if err := sets.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(MachineSetController)}); err != nil {
		return err
	}
	deployments := &machinedeploymentcontroller.Reconciler{
		Client:               mgr.GetClient(),
		Recorder:             mgr.GetEventRecorder("machinedeployment-controller"),
		RevisionHistoryLimit: o.RevisionHistoryLimit,
	}
	if err := deployments.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(MachineDeploymentController)}); err != nil {
		return err
	}
	pools := &machinepoolcontroller.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Workload: workloads,
		Recorder: mgr.GetEventRecorder("machinepool-controller"),
	}
	if err := pools.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(MachinePoolController)}); err != nil {
		return err
	}
	healthChecks := &machinehealthcheckcontroller.Reconciler{
		Client:   mgr.GetClient(),
		Workload: workloads,
		Recorder: mgr.GetEventRecorder("machinehealthcheck-controller"),
	}
	if err := healthChecks.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(MachineHealthCheckController)}); err != nil {
		return err
	}
	bootstrapConfigs := &kubeadmconfigcontroller.Reconciler{
		Client:   mgr.GetClient(),
		Workload: workloads,
		Recorder: mgr.GetEventRecorder("kubeadmconfig-controller"),
	}
	if err := bootstrapConfigs.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(KubeadmConfigController)}); err != nil {
		return err
	}
	controlPlanes := &kubeadmcontrolplanecontroller.Reconciler{
		Client:   mgr.GetClient(),
		Resolver: resolver,
		Workload: workloads,
		Recorder: mgr.GetEventRecorder("kubeadmcontrolplane-controller"),
	}
	if err := controlPlanes.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(KubeadmControlPlaneController)}); err != nil {
		return err
	}
	if err := setupClusterResourceSets(ctx, mgr, o, workloads); err != nil {
		return err
	}
	if o.Local != nil {
		lo := *o.Local
		if lo.MaxConcurrentReconciles == 0 {
			lo.MaxConcurrentReconciles = max(o.concurrency(LocalMachineController), o.concurrency(LocalClusterController))
		}
		if err := local.Setup(ctx, mgr, lo); err != nil {
			return err
		}
	}
	if o.QEMU != nil {
		qo := *o.QEMU
		if qo.MaxConcurrentReconciles == 0 {
			qo.MaxConcurrentReconciles = max(o.concurrency(QEMUMachineController), o.concurrency(QEMUClusterController))
		}
		if err := qemu.Setup(ctx, mgr, qo); err != nil {
			return err
		}
	}
	if o.InMemory != nil {
		io := *o.InMemory
		if io.MaxConcurrentReconciles == 0 {
			io.MaxConcurrentReconciles = max(o.concurrency(inmemory.InMemoryMachineController), o.concurrency(inmemory.InMemoryClusterController))
		}
		if _, err := inmemory.Setup(ctx, mgr, io); err != nil {
			return err
		}
	}
	return nil
}

// setupClusterResourceSets registers the ClusterResourceSet and binding
// controllers, with the cache of resource metadata the first watches: its
// own, because the manager's caches neither ConfigMaps nor the unlabelled
// Secrets that ClusterResourceSets name (see secrets.go).
func setupClusterResourceSets(ctx context.Context, mgr ctrl.Manager, o Options, workloads *workload.ClusterCache) error {
	filter, err := o.watchFilter()
	if err != nil {
		return err
	}
	resourceOpts := cache.Options{
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		HTTPClient:           mgr.GetHTTPClient(),
		DefaultLabelSelector: filter,
	}
	if o.Namespace != "" {
		resourceOpts.DefaultNamespaces = map[string]cache.Config{o.Namespace: {}}
	}
	resources, err := clusterresourcesetcontroller.NewResourceCache(mgr.GetConfig(), resourceOpts)
	if err != nil {
		return err
	}
	if err := mgr.Add(resources); err != nil {
		return err
	}
	sets := &clusterresourcesetcontroller.Reconciler{
		Client:    mgr.GetClient(),
		Workload:  workloads,
		Recorder:  mgr.GetEventRecorder("clusterresourceset-controller"),
		Resources: resources,
	}
	if err := sets.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(ClusterResourceSetController)}); err != nil {
		return err
	}
	bindings := &clusterresourcesetcontroller.BindingReconciler{Client: mgr.GetClient()}
	return bindings.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency(ClusterResourceSetBindingController)})
}
