package machine

import (
	"context"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pace"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/workload"
)

// ProviderIDField indexes Machines by spec.providerID, so a Node event finds
// its Machine without a list of every Machine.
const ProviderIDField = "spec.providerID"

// Workload is what the controller needs of the workload cluster cache.
type Workload interface {
	GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
	GetReader(ctx context.Context, cluster client.ObjectKey) (client.Reader, error)
	Watch(ctx context.Context, cluster client.ObjectKey, input workload.WatchInput) error
	// HealthSource tells when a workload cluster stops answering or
	// answers again, so that the Machines' Node conditions follow.
	HealthSource(h handler.EventHandler) source.Source
}

// Reconciler reconciles Machines.
type Reconciler struct {
	Client   client.Client
	Resolver *contract.Resolver
	Workload Workload
	Recorder events.EventRecorder

	controller      controller.Controller
	externalWatches *contract.Tracker
	kit             kit.Reconciler[*clusterv1.Machine, *scope]
}

// statusGate: every change of a Machine's status that others act on goes
// out at once; a changed condition message or reason is paced, and so are
// the times the Machine began waiting for its deletion hooks: they only
// report, and they come with a Deleting message that is paced too.
func statusGate(status map[string]any) any {
	pick, _ := pace.AllButTexts(status).(map[string]any)
	if d, ok := pick["deletion"].(map[string]any); ok {
		d = maps.Clone(d)
		delete(d, "waitForPreDrainHookStartTime")
		delete(d, "waitForPreTerminateHookStartTime")
		pick["deletion"] = d
		if len(d) == 0 {
			delete(pick, "deletion")
		}
	}
	return pick
}

// SetupWithManager registers the controller, the providerID index, and
// watches on Clusters (initialization and pause change what a Machine may
// do) and on provider objects the Machines own.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	r.kit = kit.Reconciler[*clusterv1.Machine, *scope]{
		Client:    r.Client,
		NewObject: func() *clusterv1.Machine { return &clusterv1.Machine{} },
		Pacer:     pace.NewPacer(pace.DefaultStatusInterval),
		Gate:      statusGate,
		OptionsFor: func(m *clusterv1.Machine) []patch.Option {
			return []patch.Option{patch.OwnedConditions(statusManager, ownedConditions(m)...)}
		},
		Scope:  r.scope,
		Run:    r.run,
		Report: r.summarize,
	}
	if err := index.ByClusterName(ctx, mgr.GetFieldIndexer(), &clusterv1.Machine{}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &clusterv1.Machine{}, ProviderIDField, func(o client.Object) []string {
		if id := o.(*clusterv1.Machine).Spec.ProviderID; id != "" {
			return []string{id}
		}
		return nil
	}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.Machine{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToMachines),
			// Pause, control plane initialization and deletion change what a
			// Machine may do; other Cluster writes would wake every Machine
			// for nothing.
			builder.WithPredicates(kit.ClusterChanged(kit.ClusterPaused, kit.ClusterControlPlaneInitialized, kit.ClusterDeleting))).
		WithOptions(opts).
		Named("machine")
	if r.Workload != nil {
		// A workload cluster that stops answering, or answers again, wakes
		// its Machines: their Node conditions must not go on reporting
		// what it said last, nor stay Unknown once it is back.
		b = b.WatchesRawSource(r.Workload.HealthSource(handler.EnqueueRequestsFromMapFunc(r.clusterToMachines)))
	}
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	r.externalWatches = &contract.Tracker{
		Controller: c,
		Cache:      mgr.GetCache(),
		Handler:    handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &clusterv1.Machine{}, handler.OnlyControllerOwner()),
	}
	return nil
}

func (r *Reconciler) clusterToMachines(ctx context.Context, obj client.Object) []reconcile.Request {
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, index.InCluster(obj.GetNamespace(), obj.GetName())...); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(machines.Items))
	for i := range machines.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&machines.Items[i])})
	}
	return reqs
}

// nodeToMachine maps a workload cluster's Node to the Machine in namespace
// whose providerID it carries.
func (r *Reconciler) nodeToMachine(namespace string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		node, ok := obj.(*corev1.Node)
		if !ok || node.Spec.ProviderID == "" {
			return nil
		}
		machines := &clusterv1.MachineList{}
		if err := r.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingFields{ProviderIDField: node.Spec.ProviderID}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(machines.Items))
		for i := range machines.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&machines.Items[i])})
		}
		return reqs
	}
}

// statusManager names the controller's server-side apply ownership of
// Machine status.
const statusManager = "capstan-machine"

// ownedConditions are the condition types this controller writes; the
// others on a Machine belong to its owner (UpToDate), health checks and
// control plane providers (readiness gates).
func ownedConditions(m *clusterv1.Machine) []string {
	owned := []string{
		clusterv1.BootstrapConfigReadyCondition, clusterv1.InfrastructureReadyCondition,
		clusterv1.NodeReadyCondition, clusterv1.NodeHealthyCondition,
		clusterv1.ReadyCondition, clusterv1.AvailableCondition,
		clusterv1.DeletingCondition, clusterv1.PausedCondition,
	}
	if !ownedByController(m) {
		owned = append(owned, clusterv1.UpToDateCondition)
	}
	return owned
}

// Reconcile brings one Machine a step closer to what its spec asks.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *Reconciler) scope(ctx context.Context, m *clusterv1.Machine) (*scope, error) {
	cluster, err := kit.GetCluster(ctx, r.Client, m.Namespace, m.Spec.ClusterName)
	if err != nil {
		return nil, err
	}
	return &scope{machine: m, cluster: cluster, now: time.Now()}, nil
}

func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	m := s.machine
	if s.paused = pause.Reconcile(s.cluster, m); s.paused {
		return ctrl.Result{}, nil
	}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[clusterv1.ClusterNameLabel] = m.Spec.ClusterName

	if !m.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if s.cluster == nil {
		// Machines are created with or just before their Cluster.
		s.clusterMissing = true
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if len(m.OwnerReferences) == 0 {
		// A standalone Machine goes with its Cluster.
		if err := controllerutil.SetOwnerReference(s.cluster, m, r.Client.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
	}
	controllerutil.AddFinalizer(m, clusterv1.MachineFinalizer)

	return kit.Steps(ctx, s,
		r.reconcileBootstrap,
		r.reconcileInfrastructure,
		r.reconcileNode,
		// Ready Machines wait out minReadySeconds before they are Available.
		func(context.Context, *scope) (time.Duration, error) { return s.availableIn(), nil },
	)
}
