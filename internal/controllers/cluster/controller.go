package cluster

import (
	"context"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/enqueue"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pace"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/topology"
	"capstan.dev/capstan/internal/workload"
)

// Workload is what the controller needs of the workload cluster cache.
type Workload interface {
	GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
	Health(cluster client.ObjectKey) workload.Health
	Probe(ctx context.Context, cluster client.ObjectKey) error
	HealthSource(h handler.EventHandler) source.Source
	Disconnect(cluster client.ObjectKey)
}

// Reconciler reconciles Clusters.
type Reconciler struct {
	Client   client.Client
	Resolver *contract.Resolver
	// Workload may be nil: the RemoteConnectionProbe condition then stays
	// Unknown.
	Workload Workload
	Recorder events.EventRecorder

	externalWatches *contract.Tracker
	kit             kit.Reconciler[*clusterv1.Cluster, *scope]
}

// statusGate is what other controllers act on in a Cluster's status: the
// Machines wait for its infrastructure, bootstrap waits for its control
// plane, health checks and move read the conditions. Everything else
// (counters, summaries, messages) is paced.
var statusGate = pace.Fields([]string{"initialization"},
	clusterv1.PausedCondition, clusterv1.ClusterControlPlaneInitializedCondition,
	clusterv1.InfrastructureReadyCondition, clusterv1.ClusterRemoteConnectionProbeCondition)

// summaryDelay is how long the Cluster waits after a change of its Machines,
// MachineSets or MachineDeployments before it recounts them.
const summaryDelay = time.Second

// statusManager names the controller's server-side apply ownership of a
// topology Cluster's status.
const statusManager = "capstan-cluster"

// SetupWithManager registers the controller. Machines, MachineSets,
// MachineDeployments and MachinePools wake their Cluster (their counters feed its status);
// provider objects wake the Cluster that controls them.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := index.ByClusterName(ctx, mgr.GetFieldIndexer(), &clusterv1.Machine{}, &clusterv1.MachineSet{}, &clusterv1.MachineDeployment{}, &clusterv1.MachinePool{}); err != nil {
		return err
	}
	r.kit = kit.Reconciler[*clusterv1.Cluster, *scope]{
		Client:    r.Client,
		NewObject: func() *clusterv1.Cluster { return &clusterv1.Cluster{} },
		Pacer:     pace.NewPacer(pace.DefaultStatusInterval),
		Gate:      statusGate,
		// A managed Cluster's status is shared with the topology controller
		// (TopologyReconciled, the upgrade plans): each applies its part.
		OptionsFor: func(c *clusterv1.Cluster) []patch.Option {
			if c.Spec.Topology.IsDefined() {
				return []patch.Option{patch.OwnedStatus(statusManager, topology.StatusWithoutTopology)}
			}
			return []patch.Option{patch.SoleStatusWriter()}
		},
		Scope:  r.scope,
		Run:    r.run,
		Report: r.summarize,
	}
	// Worker counters change with every Machine; a short delay folds a
	// burst of changes into one status write.
	toCluster := enqueue.Coalesced(summaryDelay, enqueue.ClusterOfLabel)
	b := ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.Cluster{}).
		Watches(&clusterv1.Machine{}, toCluster).
		Watches(&clusterv1.MachineSet{}, toCluster).
		Watches(&clusterv1.MachineDeployment{}, toCluster).
		Watches(&clusterv1.MachinePool{}, toCluster).
		WithOptions(opts).
		Named("cluster")
	if r.Workload != nil {
		// A workload cluster that connects or drops wakes its Cluster.
		b = b.WatchesRawSource(r.Workload.HealthSource(nil))
	}
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	r.externalWatches = &contract.Tracker{
		Controller: c,
		Cache:      mgr.GetCache(),
		Handler:    handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &clusterv1.Cluster{}, handler.OnlyControllerOwner()),
	}
	return nil
}

// Reconcile brings one Cluster's status and owned objects up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *Reconciler) scope(_ context.Context, cluster *clusterv1.Cluster) (*scope, error) {
	return &scope{cluster: cluster}, nil
}

func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	cluster := s.cluster
	if s.paused = pause.Reconcile(cluster, cluster); s.paused {
		return ctrl.Result{}, nil
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	controllerutil.AddFinalizer(cluster, clusterv1.ClusterFinalizer)

	return kit.Steps(ctx, s,
		r.reconcileInfrastructure,
		r.reconcileControlPlane,
		r.reconcileMachines,
		r.reconcileRemoteConnection,
	)
}
