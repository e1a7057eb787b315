package machineset

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pace"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/plan"
)

// FieldManager is the field manager of every write the controller makes.
// The managed fields it leaves on Machines tell which labels and annotations
// came from the MachineSet's template.
const FieldManager = "capstan-machineset"

// Reconciler reconciles MachineSets.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client   client.Client
	Resolver *contract.Resolver
	// Recorder receives an event for each Machine created or deleted; it
	// may be nil.
	Recorder events.EventRecorder

	templateWatches *contract.Tracker
	// clones reads the objects sets clone from the manager's cache, where
	// indexer indexes their kinds as they show up.
	clones  client.Reader
	indexer client.FieldIndexer
	// pacer paces the set's writes, to its own status and to its
	// Machines' conditions.
	pacer *pace.Pacer
	kit   kit.Reconciler[*clusterv1.MachineSet, *scope]
}

// statusGate: of a MachineSet's status only Paused is waited on (by move);
// its counters, which the MachineDeployment reads to roll out, may lag by
// one pacing interval.
var statusGate = pace.Fields(nil, clusterv1.PausedCondition)

// SetupWithManager registers the controller. Besides its MachineSets it
// watches their Machines (and Machines nobody controls that a set might
// adopt), Clusters (pausing and unpausing, or appearing), the owning
// MachineDeployments (their template, rollout.after and revision decide
// whether Machines are up to date), and the kinds of the templates sets
// clone, so that a template created after its set wakes it.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	r.pacer = pace.NewPacer(pace.DefaultStatusInterval)
	r.kit = kit.Reconciler[*clusterv1.MachineSet, *scope]{
		Client:    r.Client,
		Writer:    r.writer(),
		NewObject: func() *clusterv1.MachineSet { return &clusterv1.MachineSet{} },
		Pacer:     r.pacer,
		Gate:      statusGate,
		Options:   []patch.Option{patch.SoleStatusWriter()},
		Scope:     r.scope,
		Run:       r.run,
		Report:    r.updateStatus,
	}
	r.clones, r.indexer = mgr.GetCache(), mgr.GetFieldIndexer()
	if err := index.ByClusterName(ctx, r.indexer, &clusterv1.Machine{}, &clusterv1.MachineSet{}); err != nil {
		return err
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.MachineSet{}, builder.WithPredicates(kit.NotStatusOnly)).
		Owns(&clusterv1.Machine{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.orphanToMachineSets)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToMachineSets), builder.WithPredicates(kit.ClusterChanged(kit.ClusterPaused))).
		Watches(&clusterv1.MachineDeployment{}, handler.EnqueueRequestsFromMapFunc(r.deploymentToMachineSets),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(opts).
		Named("machineset").
		Build(r)
	if err != nil {
		return err
	}
	r.templateWatches = &contract.Tracker{
		Controller: c,
		Cache:      mgr.GetCache(),
		Handler:    handler.EnqueueRequestsFromMapFunc(r.templateToMachineSets),
		Predicates: []predicate.Predicate{predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return true },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		}},
	}
	return nil
}

func (r *Reconciler) machineSetsIn(ctx context.Context, opts ...client.ListOption) []clusterv1.MachineSet {
	list := &clusterv1.MachineSetList{}
	if err := r.Client.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing MachineSets")
		return nil
	}
	return list.Items
}

func requests(sets []clusterv1.MachineSet, keep func(*clusterv1.MachineSet) bool) []ctrl.Request {
	var out []ctrl.Request
	for i := range sets {
		if keep(&sets[i]) {
			out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&sets[i])})
		}
	}
	return out
}

// orphanToMachineSets wakes the sets whose selector matches a Machine that
// no controller owns: one of them may adopt it.
func (r *Reconciler) orphanToMachineSets(ctx context.Context, obj client.Object) []ctrl.Request {
	if metav1.GetControllerOf(obj) != nil || len(obj.GetLabels()) == 0 {
		return nil
	}
	m, ok := obj.(*clusterv1.Machine)
	if !ok {
		return nil
	}
	set := labels.Set(obj.GetLabels())
	return requests(r.machineSetsIn(ctx, index.InCluster(m.Namespace, m.Spec.ClusterName)...), func(ms *clusterv1.MachineSet) bool {
		sel, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
		return err == nil && !sel.Empty() && sel.Matches(set)
	})
}

func (r *Reconciler) clusterToMachineSets(ctx context.Context, obj client.Object) []ctrl.Request {
	return requests(r.machineSetsIn(ctx, index.InCluster(obj.GetNamespace(), obj.GetName())...), func(*clusterv1.MachineSet) bool { return true })
}

func (r *Reconciler) deploymentToMachineSets(ctx context.Context, obj client.Object) []ctrl.Request {
	md, ok := obj.(*clusterv1.MachineDeployment)
	if !ok {
		return nil
	}
	return requests(r.machineSetsIn(ctx, append(index.InCluster(md.Namespace, md.Spec.ClusterName), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name})...),
		func(*clusterv1.MachineSet) bool { return true })
}

// templateToMachineSets wakes the sets that clone a template.
func (r *Reconciler) templateToMachineSets(ctx context.Context, obj client.Object) []ctrl.Request {
	gk := obj.GetObjectKind().GroupVersionKind().GroupKind()
	refers := func(ref clusterv1.ContractVersionedObjectReference) bool {
		return ref.Name == obj.GetName() && ref.GroupKind() == gk
	}
	return requests(r.machineSetsIn(ctx, client.InNamespace(obj.GetNamespace())), func(ms *clusterv1.MachineSet) bool {
		return refers(ms.Spec.Template.Spec.InfrastructureRef) || refers(ms.Spec.Template.Spec.Bootstrap.ConfigRef)
	})
}

// scope is everything one reconcile learns about a MachineSet.
type scope struct {
	ms      *clusterv1.MachineSet
	cluster *clusterv1.Cluster
	md      *clusterv1.MachineDeployment // the owning deployment, if it exists

	clusterMissing bool
	now            time.Time
	paused         bool

	// machines are the set's Machines (adopted ones included, deleting ones
	// too); machinesRead tells whether they could be listed.
	machines     []*clusterv1.Machine
	machinesRead bool
	adopt        map[string]bool // orphans this pass adopts

	infraTemplate, bootstrapTemplate *unstructured.Unstructured
	templateErrs                     []error // why a template could not be read

	scaleUpErr error  // why creating Machines failed
	repairErr  error  // why creating a Machine's missing objects failed
	notCreated string // why no Machine is created although some are missing
	deleting   string // what deletion waits for
}

// Reconcile brings one MachineSet's Machines and status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *Reconciler) scope(ctx context.Context, ms *clusterv1.MachineSet) (*scope, error) {
	cluster, err := kit.GetCluster(ctx, r.Client, ms.Namespace, ms.Spec.ClusterName)
	if err != nil {
		return nil, err
	}
	return &scope{ms: ms, cluster: cluster, clusterMissing: cluster == nil, now: time.Now()}, nil
}

func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	ms, cluster := s.ms, s.cluster
	if s.paused = pause.Reconcile(cluster, ms); s.paused {
		return ctrl.Result{}, nil
	}
	if !ms.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}
	if cluster == nil {
		// Nothing is created for a Cluster that does not exist; its creation
		// wakes the set, and the conditions say what it waits for.
		return ctrl.Result{}, nil
	}
	ensureMetadata(s)

	return kit.Steps(ctx, s,
		r.readDeployment,
		r.readMachines,
		r.reconcileTemplates,
		r.syncMachines,
		r.reconcileLeftoverClones,
		r.repairClones,
		r.remediate,
		r.scale,
	)
}

// writer writes with the controller's field manager.
func (r *Reconciler) writer() client.Client { return client.WithFieldOwner(r.Client, FieldManager) }

func (r *Reconciler) event(regarding, related client.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(regarding, related, eventType, reason, action, note, args...)
	}
}

// isDeploymentChild tells whether a MachineDeployment made the set.
func isDeploymentChild(ms *clusterv1.MachineSet) bool {
	_, ok := ms.Labels[clusterv1.MachineDeploymentNameLabel]
	return ok
}

func hasOwner(obj metav1.Object, kinds ...string) bool {
	for _, ref := range obj.GetOwnerReferences() {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != clusterv1.GroupVersion.Group {
			continue
		}
		for _, k := range kinds {
			if ref.Kind == k {
				return true
			}
		}
	}
	return false
}

// ensureMetadata does what Cluster API's defaulting webhook and its
// controller do to a MachineSet: the cluster-name label, a Cluster owner for
// a standalone set, a selector that its template's labels match, and
// spec.replicas.
func ensureMetadata(s *scope) {
	ms := s.ms
	controllerutil.AddFinalizer(ms, clusterv1.MachineSetFinalizer)
	if ms.Labels == nil {
		ms.Labels = map[string]string{}
	}
	ms.Labels[clusterv1.ClusterNameLabel] = ms.Spec.ClusterName
	if !isDeploymentChild(ms) && !hasOwner(ms, clusterv1.MachineDeploymentKind, "Cluster") {
		ms.OwnerReferences = append(ms.OwnerReferences, metav1.OwnerReference{
			APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: s.cluster.Name, UID: s.cluster.UID,
		})
	}

	sel := &ms.Spec.Selector
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	if ms.Spec.Template.Labels == nil {
		ms.Spec.Template.Labels = map[string]string{}
	}
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		sel.MatchLabels[clusterv1.MachineSetNameLabel] = contract.LabelValue(ms.Name)
		ms.Spec.Template.Labels[clusterv1.MachineSetNameLabel] = contract.LabelValue(ms.Name)
	}
	// Selector and template always name the cluster, so that a set never
	// counts another cluster's Machines.
	sel.MatchLabels[clusterv1.ClusterNameLabel] = ms.Spec.ClusterName
	ms.Spec.Template.Labels[clusterv1.ClusterNameLabel] = ms.Spec.ClusterName

	if ms.Spec.Replicas == nil {
		ms.Spec.Replicas = ptr.To(plan.DefaultReplicas(ms.Annotations))
	}
}

// readDeployment reads the MachineDeployment that made the set, if any.
func (r *Reconciler) readDeployment(ctx context.Context, s *scope) (time.Duration, error) {
	name := s.ms.Labels[clusterv1.MachineDeploymentNameLabel]
	if name == "" {
		return 0, nil
	}
	md := &clusterv1.MachineDeployment{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.ms.Namespace, Name: name}, md); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	s.md = md
	return 0, nil
}
