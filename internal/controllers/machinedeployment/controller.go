package machinedeployment

import (
	"context"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/enqueue"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pace"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/pause"
)

// Reconciler reconciles MachineDeployments.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder

	// RevisionHistoryLimit is how many old, empty MachineSets each
	// MachineDeployment keeps for rollbacks; nil means
	// plan.DefaultRevisionHistoryLimit. With 0 none is kept, and
	// plan.RollbackTemplate finds no earlier revision.
	RevisionHistoryLimit *int32
	kit                  kit.Reconciler[*clusterv1.MachineDeployment, *scope]
}

// statusGate: of a MachineDeployment's status only Paused is waited on (by
// move); counters and summaries are paced.
var statusGate = pace.Fields(nil, clusterv1.PausedCondition)

// SetupWithManager registers the controller. MachineSets wake the
// MachineDeployment that controls them, or those whose selector matches
// them while nobody controls them; Machines wake their MachineDeployment
// when something a condition summarises changes; Clusters wake their
// MachineDeployments when they are paused or resumed.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	r.kit = kit.Reconciler[*clusterv1.MachineDeployment, *scope]{
		Client:    r.Client,
		NewObject: func() *clusterv1.MachineDeployment { return &clusterv1.MachineDeployment{} },
		Pacer:     pace.NewPacer(pace.DefaultStatusInterval),
		Gate:      statusGate,
		Options:   []patch.Option{patch.SoleStatusWriter()},
		Scope:     r.scope,
		Run:       r.run,
		Report:    r.summarize,
	}
	if err := index.ByClusterName(ctx, mgr.GetFieldIndexer(), &clusterv1.Machine{}, &clusterv1.MachineSet{}, &clusterv1.MachineDeployment{}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.MachineDeployment{}, builder.WithPredicates(kit.NotStatusOnly)).
		Owns(&clusterv1.MachineSet{}).
		Watches(&clusterv1.MachineSet{}, handler.EnqueueRequestsFromMapFunc(r.orphanToDeployments)).
		// Machines only feed the summary conditions; a short delay folds a
		// burst of their changes into one status write.
		Watches(&clusterv1.Machine{}, enqueue.Coalesced(time.Second, machineToDeployment), builder.WithPredicates(machineSummaryChanged)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToDeployments), builder.WithPredicates(kit.ClusterChanged(kit.ClusterPaused))).
		WithOptions(opts).
		Named("machinedeployment").
		Complete(r)
}

// summarisedMachineConditions are the Machine conditions the
// MachineDeployment's own conditions are made from.
var summarisedMachineConditions = []string{
	clusterv1.ReadyCondition,
	clusterv1.UpToDateCondition,
	clusterv1.HealthCheckSucceededCondition,
	clusterv1.OwnerRemediatedCondition,
}

// machineSummaryChanged passes Machine events that can change the
// MachineDeployment's plan or conditions: a Machine appears, goes, starts
// being deleted, changes owner, or one of the summarised conditions changes
// status.
var machineSummaryChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*clusterv1.Machine)
	n, ok2 := e.ObjectNew.(*clusterv1.Machine)
	if !ok1 || !ok2 {
		return true
	}
	if o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
		o.Labels[clusterv1.MachineDeploymentNameLabel] != n.Labels[clusterv1.MachineDeploymentNameLabel] ||
		!reflect.DeepEqual(metav1.GetControllerOf(o), metav1.GetControllerOf(n)) {
		return true
	}
	for _, t := range summarisedMachineConditions {
		if conditionStatus(o, t) != conditionStatus(n, t) {
			return true
		}
	}
	return false
}}

func conditionStatus(obj interface{ GetConditions() []metav1.Condition }, t string) metav1.ConditionStatus {
	if c := conditions.Get(obj, t); c != nil {
		return c.Status
	}
	return ""
}

func machineToDeployment(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[clusterv1.MachineDeploymentNameLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
}

// orphanToDeployments maps a MachineSet nobody controls to the
// MachineDeployments that may adopt it.
func (r *Reconciler) orphanToDeployments(ctx context.Context, obj client.Object) []reconcile.Request {
	ms, ok := obj.(*clusterv1.MachineSet)
	if !ok || metav1.GetControllerOf(ms) != nil {
		return nil
	}
	list := &clusterv1.MachineDeploymentList{}
	if err := r.Client.List(ctx, list, index.InCluster(ms.Namespace, ms.Spec.ClusterName)...); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		md := &list.Items[i]
		if sel, err := selectorOf(md); err == nil && !sel.Empty() && sel.Matches(labels.Set(ms.Labels)) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(md)})
		}
	}
	return reqs
}

func (r *Reconciler) clusterToDeployments(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &clusterv1.MachineDeploymentList{}
	if err := r.Client.List(ctx, list, index.InCluster(obj.GetNamespace(), obj.GetName())...); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

func selectorOf(md *clusterv1.MachineDeployment) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(&md.Spec.Selector)
}

// Reconcile moves one MachineDeployment a step towards its spec and reports
// where it stands.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *Reconciler) scope(ctx context.Context, md *clusterv1.MachineDeployment) (*scope, error) {
	cluster, err := kit.GetCluster(ctx, r.Client, md.Namespace, md.Spec.ClusterName)
	if err != nil {
		return nil, err
	}
	return &scope{md: md, cluster: cluster, now: time.Now()}, nil
}

func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	md, cluster := s.md, s.cluster
	if s.paused = pause.Reconcile(cluster, md); s.paused {
		return ctrl.Result{}, nil
	}
	if !md.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}
	if cluster == nil {
		// The Cluster's creation wakes the MachineDeployment.
		s.waiting = "waiting for Cluster " + md.Spec.ClusterName + " to exist"
		return ctrl.Result{}, nil
	}
	r.reconcileMetadata(s)
	if err := r.readMachineSets(ctx, s, true); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.rollout(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.cleanupHistory(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: s.requeueAfter}, nil
}

// isController tells whether ref names md as controller.
func isController(ref *metav1.OwnerReference, md *clusterv1.MachineDeployment) bool {
	return ref != nil && ref.UID == md.UID && ref.Kind == clusterv1.MachineDeploymentKind
}
