package clustertopology

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/enqueue"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pace"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/topology"
	"capstan.dev/capstan/internal/topology/desired"
)

// FieldManager is the field manager of every write the topology makes: its
// server-side applies of the objects it makes, and its patches of the
// Cluster's references and status. Its managed fields on an object are the
// fields the topology owns there.
const FieldManager = "capstan-topology"

// Reconciler reconciles the managed topology of Clusters with
// spec.topology.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client   client.Client
	Resolver *contract.Resolver
	// Recorder receives an event for each object created, rotated or
	// deleted; it may be nil.
	Recorder events.EventRecorder
	// Compute computes the desired state; desired.Compute when nil.
	Compute func(desired.Input) (*desired.State, error)

	// providerWatches watches the provider kinds the topology makes and
	// reads (infrastructure cluster, control plane, templates).
	providerWatches *contract.Tracker
	kit             kit.Reconciler[*clusterv1.Cluster, *scope]
}

// statusGate: of what the topology reports, other controllers and users
// wait on the TopologyReconciled condition; the upgrade plans only report.
var statusGate = pace.Fields(nil, clusterv1.ClusterTopologyReconciledCondition)

// SetupWithManager registers the controller. Besides topology Clusters it
// watches their ClusterClass, the MachineDeployments, MachinePools and
// MachineHealthChecks the topology made, the deletion of MachineSets (which
// frees the templates they referenced), and the provider kinds it reads and
// makes, as it meets them.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Compute == nil {
		r.Compute = desired.Compute
	}
	if err := index.ByClusterName(ctx, mgr.GetFieldIndexer(), &clusterv1.MachineSet{}, &clusterv1.MachineDeployment{}, &clusterv1.MachinePool{}); err != nil {
		return err
	}
	if err := index.ByClusterClass(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	r.kit = kit.Reconciler[*clusterv1.Cluster, *scope]{
		Client:    r.Client,
		Writer:    client.WithFieldOwner(r.Client, FieldManager),
		NewObject: func() *clusterv1.Cluster { return &clusterv1.Cluster{} },
		Pacer:     pace.NewPacer(pace.DefaultStatusInterval),
		Gate:      statusGate,
		Options:   []patch.Option{patch.OwnedStatus(FieldManager, topology.TopologyStatus)},
		Scope:     r.scope,
		Run:       r.run,
		Report:    r.report,
	}
	toCluster := handler.EnqueueRequestsFromMapFunc(enqueue.ClusterOfLabel)
	made := builder.WithPredicates(topologyOwned)
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.Cluster{}, builder.WithPredicates(hasTopology, kit.NotStatusOnly)).
		Watches(&clusterv1.ClusterClass{}, handler.EnqueueRequestsFromMapFunc(r.classToClusters)).
		Watches(&clusterv1.MachineDeployment{}, toCluster, made).
		Watches(&clusterv1.MachinePool{}, toCluster, made).
		Watches(&clusterv1.MachineHealthCheck{}, toCluster, made).
		Watches(&clusterv1.MachineSet{}, toCluster, builder.WithPredicates(deletedOnly)).
		WithOptions(opts).
		Named("clustertopology").
		Build(r)
	if err != nil {
		return err
	}
	r.providerWatches = &contract.Tracker{
		Controller: c,
		Cache:      mgr.GetCache(),
		Handler:    toCluster,
		Predicates: []predicate.Predicate{topologyOwned},
	}
	return nil
}

// hasTopology lets through the Clusters with a managed topology; the Cluster
// controller alone looks after the others.
var hasTopology = predicate.NewPredicateFuncs(func(obj client.Object) bool {
	c, ok := obj.(*clusterv1.Cluster)
	return ok && c.Spec.Topology.IsDefined()
})

// topologyOwned lets through the objects a topology made.
var topologyOwned = predicate.NewPredicateFuncs(func(obj client.Object) bool {
	_, ok := obj.GetLabels()[clusterv1.ClusterTopologyOwnedLabel]
	return ok
})

// deletedOnly lets through deletions: a MachineSet that goes may free the
// templates it referenced.
var deletedOnly = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
}

// classToClusters wakes the Clusters whose topology uses a ClusterClass.
func (r *Reconciler) classToClusters(ctx context.Context, obj client.Object) []ctrl.Request {
	list := &clusterv1.ClusterList{}
	if err := r.Client.List(ctx, list, index.UsingClass(obj.GetNamespace(), obj.GetName())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the Clusters of a ClusterClass")
		return nil
	}
	out := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// scope is everything one reconcile learns about a topology Cluster.
type scope struct {
	cluster  *clusterv1.Cluster
	paused   bool
	pauseWhy string

	class          *clusterv1.ClusterClass
	classTemplates map[desired.TemplateKey]*unstructured.Unstructured
	current        desired.Current
	currentRead    bool
	state          *desired.State

	// notReady says what the topology waits for before computing anything
	// (a ClusterClass its controller has not reconciled yet), with the
	// condition reason to report it under.
	notReady, notReadyReason string
	// err is why the topology could not be computed or applied.
	err error
	// deleting says what the deletion of topology objects waits for.
	deleting string

	// written are the objects this reconcile wrote, which the cache must
	// show before the reconcile ends.
	written []*unstructured.Unstructured
	// applied are the objects as this reconcile applied them (or found
	// them needing nothing), whose references count as in use.
	applied []*unstructured.Unstructured
	// changed lists, by event reason, the objects this reconcile created,
	// updated or deleted ("KubeadmControlPlane demo-x"): one event per
	// reason says them all (reportChanges).
	changed map[string][]string
}

// Reconcile brings one Cluster's topology objects in line with its
// spec.topology.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *Reconciler) scope(_ context.Context, cluster *clusterv1.Cluster) (*scope, error) {
	if !cluster.Spec.Topology.IsDefined() {
		// Not a topology Cluster (any more): nothing to do or report.
		return nil, kit.NotYet(0)
	}
	return &scope{cluster: cluster}, nil
}

func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	defer r.reportChanges(s)
	if s.paused, s.pauseWhy = pause.Check(s.cluster, s.cluster); s.paused {
		return ctrl.Result{}, nil
	}
	if !s.cluster.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	res, err := kit.Steps(ctx, s,
		r.gather,
		r.computeState,
		r.applyState,
		r.removeTemplatesNotInUse,
	)
	if werr := r.waitForWrites(ctx, s.written); werr != nil && err == nil {
		err = werr
	}
	if err != nil && s.err == nil {
		s.err = err
	}
	return res, err
}

// missingRetry is how soon a topology looks again for an object it reads
// that does not exist yet and whose creation would not wake it.
const missingRetry = 10 * time.Second

// changeVerbs are the reasons of reportChanges' events, in the order they
// are reported, with the verb that starts each note.
var changeVerbs = []struct{ reason, action, verb string }{
	{createdReason, "Create", "Created"},
	{updatedReason, "Update", "Updated"},
	{deletedReason, "Delete", "Deleted"},
}

// changedMax bounds how many objects one event names.
const changedMax = 10

// noteChange remembers that this reconcile did reason to an object.
func (s *scope) noteChange(reason, kind, name string) {
	if s.changed == nil {
		s.changed = map[string][]string{}
	}
	s.changed[reason] = append(s.changed[reason], kind+" "+name)
}

// reportChanges records one event per kind of change this reconcile made,
// naming every object it concerns. One event per object would cost a
// write each for a new cluster, and the events API folds events of the
// same reason into one series whose note is the first one's, so the names
// after the first would be lost anyway.
func (r *Reconciler) reportChanges(s *scope) {
	for _, v := range changeVerbs {
		objs := s.changed[v.reason]
		if len(objs) == 0 {
			continue
		}
		note := strings.Join(objs, ", ")
		if len(objs) > changedMax {
			note = fmt.Sprintf("%s and %d more", strings.Join(objs[:changedMax], ", "), len(objs)-changedMax)
		}
		r.event(s.cluster, "Normal", v.reason, v.action, "%s %s", v.verb, note)
	}
}

func (r *Reconciler) event(regarding client.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(regarding, nil, eventType, reason, action, note, args...)
	}
}
