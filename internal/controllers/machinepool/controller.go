package machinepool

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pace"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/workload"
)

// FieldManager is the field manager of the controller's writes, to its
// MachinePools, the objects they reference and the Machines they make.
const FieldManager = "capstan-machinepool"

// ProviderIDField indexes MachinePools by each entry of
// spec.providerIDList, so that a Node event finds its pool directly.
const ProviderIDField = "spec.providerIDList"

// Workload is what the controller needs of the shared workload cluster
// cache.
type Workload interface {
	GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
	GetReader(ctx context.Context, cluster client.ObjectKey) (client.Reader, error)
	Watch(ctx context.Context, cluster client.ObjectKey, input workload.WatchInput) error
}

// Reconciler reconciles MachinePools.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client   client.Client
	Resolver *contract.Resolver
	Workload Workload
	// Recorder receives an event for each Machine created or deleted; it
	// may be nil.
	Recorder events.EventRecorder

	controller controller.Controller
	// externalWatches wakes a pool when the bootstrap config or
	// infrastructure pool it controls changes; machineWatches when an
	// infrastructure machine labelled with its name does.
	externalWatches, machineWatches *contract.Tracker
	pacer                           *pace.Pacer
	kit                             kit.Reconciler[*clusterv1.MachinePool, *scope]
}

// SetupWithManager registers the controller. Besides its MachinePools it
// watches their Machines, Clusters (pause, control plane initialization,
// deletion), the provider objects they control and, once met, the
// infrastructure machines of their instances and the workload clusters'
// Nodes.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	r.pacer = pace.NewPacer(pace.DefaultStatusInterval)
	r.kit = kit.Reconciler[*clusterv1.MachinePool, *scope]{
		Client:    r.Client,
		Writer:    client.WithFieldOwner(r.Client, FieldManager),
		NewObject: func() *clusterv1.MachinePool { return &clusterv1.MachinePool{} },
		Pacer:     r.pacer,
		Gate:      pace.AllButTexts,
		Options:   []patch.Option{patch.SoleStatusWriter()},
		Scope:     r.scope,
		Run:       r.run,
		Report:    r.updateStatus,
	}
	if err := index.ByClusterName(ctx, mgr.GetFieldIndexer(), &clusterv1.Machine{}, &clusterv1.MachinePool{}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &clusterv1.MachinePool{}, ProviderIDField, func(o client.Object) []string {
		return o.(*clusterv1.MachinePool).Spec.ProviderIDList
	}); err != nil {
		return err
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.MachinePool{}, builder.WithPredicates(kit.NotStatusOnly)).
		Owns(&clusterv1.Machine{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToMachinePools),
			builder.WithPredicates(kit.ClusterChanged(kit.ClusterPaused, kit.ClusterControlPlaneInitialized, kit.ClusterDeleting))).
		WithOptions(opts).
		Named("machinepool").
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	r.externalWatches = &contract.Tracker{
		Controller: c,
		Cache:      mgr.GetCache(),
		Handler:    handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &clusterv1.MachinePool{}, handler.OnlyControllerOwner()),
	}
	r.machineWatches = &contract.Tracker{
		Controller: c,
		Cache:      mgr.GetCache(),
		Handler:    handler.EnqueueRequestsFromMapFunc(infraMachineToMachinePool),
	}
	return nil
}

func (r *Reconciler) clusterToMachinePools(ctx context.Context, obj client.Object) []reconcile.Request {
	pools := &clusterv1.MachinePoolList{}
	if err := r.Client.List(ctx, pools, index.InCluster(obj.GetNamespace(), obj.GetName())...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing MachinePools")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pools.Items))
	for i := range pools.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pools.Items[i])})
	}
	return reqs
}

// infraMachineToMachinePool wakes the pool whose instance an infrastructure
// machine is. The label holds the pool's name, unless it was too long for a
// label: such a pool is found through its controller owner chain instead
// (the infrastructure pool's owner), which the Machine watch covers.
func infraMachineToMachinePool(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[clusterv1.MachinePoolNameLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
}

// nodeToMachinePool maps a workload cluster's Node to the pools in
// namespace whose providerIDList holds its provider ID.
func (r *Reconciler) nodeToMachinePool(namespace string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		node, ok := obj.(*corev1.Node)
		if !ok || node.Spec.ProviderID == "" {
			return nil
		}
		pools := &clusterv1.MachinePoolList{}
		if err := r.Client.List(ctx, pools, client.InNamespace(namespace), client.MatchingFields{ProviderIDField: node.Spec.ProviderID}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(pools.Items))
		for i := range pools.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pools.Items[i])})
		}
		return reqs
	}
}

// scope is everything one reconcile learns about a MachinePool.
type scope struct {
	mp      *clusterv1.MachinePool
	cluster *clusterv1.Cluster
	now     time.Time

	paused bool

	bootstrap    *unstructured.Unstructured
	bootstrapErr error
	infra        *unstructured.Unstructured
	infraErr     error
	// infraPool is what the infrastructure pool reports; infraRead tells
	// whether it was read.
	infraPool contract.InfraMachinePool
	infraRead bool

	// machines are the pool's Machines (when its provider makes
	// infrastructure machines); machinesRead tells whether they were
	// listed.
	machines     []*clusterv1.Machine
	machinesRead bool
	machinesErr  error

	// nodes are the pool's Nodes by provider ID, once looked up.
	nodes    map[string]*corev1.Node
	nodesErr error

	deleting string // what deletion waits for
}

// Reconcile brings one MachinePool's objects, Machines and status up to
// date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *Reconciler) scope(ctx context.Context, mp *clusterv1.MachinePool) (*scope, error) {
	cluster, err := kit.GetCluster(ctx, r.Client, mp.Namespace, mp.Spec.ClusterName)
	if err != nil {
		return nil, err
	}
	return &scope{mp: mp, cluster: cluster, now: time.Now()}, nil
}

func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	mp := s.mp
	if s.paused = pause.Reconcile(s.cluster, mp); s.paused {
		return ctrl.Result{}, nil
	}
	if !mp.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if s.cluster == nil {
		// The Cluster's creation wakes the pool; the conditions say what it
		// waits for.
		return ctrl.Result{}, nil
	}
	ensureMetadata(s)
	return kit.Steps(ctx, s,
		r.reconcileBootstrap,
		r.reconcileInfrastructure,
		r.reconcileMachines,
		r.reconcileNodes,
	)
}

// ensureMetadata does what Cluster API's defaulting webhook and controller
// do to a MachinePool: the finalizer, the cluster-name label, the Cluster as
// an owner, and spec.replicas.
func ensureMetadata(s *scope) {
	mp := s.mp
	controllerutil.AddFinalizer(mp, clusterv1.MachinePoolFinalizer)
	if mp.Labels == nil {
		mp.Labels = map[string]string{}
	}
	mp.Labels[clusterv1.ClusterNameLabel] = mp.Spec.ClusterName
	owned := false
	for _, ref := range mp.OwnerReferences {
		if ref.UID == s.cluster.UID {
			owned = true
		}
	}
	if !owned {
		mp.OwnerReferences = append(mp.OwnerReferences, contract.ClusterOwner(s.cluster))
	}
	if mp.Spec.Replicas == nil {
		mp.Spec.Replicas = ptr.To(plan.DefaultReplicas(mp.Annotations))
	}
}

// poolOwner is the controller reference a MachinePool holds on its
// bootstrap config, infrastructure pool and Machines.
func poolOwner(mp *clusterv1.MachinePool) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(), Kind: clusterv1.MachinePoolKind,
		Name: mp.Name, UID: mp.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

func (r *Reconciler) event(regarding, related client.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(regarding, related, eventType, reason, action, note, args...)
	}
}
