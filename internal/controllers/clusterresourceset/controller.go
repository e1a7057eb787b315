package clusterresourceset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	addonsv1 "capstan.dev/capstan/api/addons/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/workload"
)

// Workload is what the controller needs of the workload cluster cache.
type Workload interface {
	GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
}

// notConnectedRetry is how soon a Cluster whose workload cluster could not
// be reached is tried again.
const notConnectedRetry = 15 * time.Second

// Reconciler reconciles ClusterResourceSets.
type Reconciler struct {
	Client   client.Client
	Workload Workload
	Recorder events.EventRecorder
	// Resources is the cache of ConfigMap and resource-set Secret metadata
	// (NewResourceCache) whose events wake the ClusterResourceSets naming
	// them; it must run (be added to the manager).
	Resources cache.Cache

	kit kit.Reconciler[*addonsv1.ClusterResourceSet, *scope]
}

// clusterLabels is the part of a Cluster that decides which
// ClusterResourceSets select it.
var clusterLabels kit.ClusterAspect = func(c *clusterv1.Cluster) any { return c.Labels }

// SetupWithManager registers the controller and its watches: its
// ClusterResourceSets, the Clusters they may select, and the ConfigMaps and
// Secrets they may name.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Resources == nil {
		return errors.New("clusterresourceset: Resources cache is not set")
	}
	r.kit = kit.Reconciler[*addonsv1.ClusterResourceSet, *scope]{
		Client:    r.Client,
		NewObject: func() *addonsv1.ClusterResourceSet { return &addonsv1.ClusterResourceSet{} },
		Scope:     r.scope,
		Run:       r.run,
		Report:    r.report,
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&addonsv1.ClusterResourceSet{}, builder.WithPredicates(kit.NotStatusOnly)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToSets),
			// A Cluster is selected by its labels and served once its
			// control plane is up; a deleting one is served no more.
			builder.WithPredicates(kit.ClusterChanged(clusterLabels, kit.ClusterControlPlaneInitialized, kit.ClusterDeleting))).
		WatchesRawSource(source.Kind(r.Resources, configMapMeta(), handler.TypedEnqueueRequestsFromMapFunc(r.resourceToSets), changedResource)).
		WatchesRawSource(source.Kind(r.Resources, secretMeta(), handler.TypedEnqueueRequestsFromMapFunc(r.resourceToSets), changedResource)).
		WithOptions(opts).
		Named("clusterresourceset").
		Complete(r)
}

// changedResource passes the creation and changes of a resource, not its
// deletion: what was applied stays, and a reconcile would only report the
// resource missing, which the next change of the set reports anyway.
var changedResource = predicate.TypedFuncs[*metav1.PartialObjectMetadata]{
	DeleteFunc: func(event.TypedDeleteEvent[*metav1.PartialObjectMetadata]) bool { return false },
}

func (r *Reconciler) clusterToSets(ctx context.Context, o client.Object) []reconcile.Request {
	sets := &addonsv1.ClusterResourceSetList{}
	if err := r.Client.List(ctx, sets, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range sets.Items {
		if selects(&sets.Items[i], o.GetLabels()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sets.Items[i])})
		}
	}
	return reqs
}

// selects tells whether crs picks a Cluster with these labels; an empty or
// unparseable selector picks none.
func selects(crs *addonsv1.ClusterResourceSet, clusterLabels map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(&crs.Spec.ClusterSelector)
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(clusterLabels))
}

// resourceToSets maps a ConfigMap or Secret to the ClusterResourceSets that
// name it: its owners, and those naming it that have not taken ownership
// yet (it was created after them).
func (r *Reconciler) resourceToSets(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
	var reqs []reconcile.Request
	seen := map[string]bool{}
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.Namespace, Name: name}})
		}
	}
	for _, ref := range o.OwnerReferences {
		if ref.Kind == addonsv1.ClusterResourceSetKind && strings.HasPrefix(ref.APIVersion, addonsv1.GroupVersion.Group+"/") {
			add(ref.Name)
		}
	}
	sets := &addonsv1.ClusterResourceSetList{}
	if err := r.Client.List(ctx, sets, client.InNamespace(o.Namespace)); err != nil {
		return reqs
	}
	for _, crs := range sets.Items {
		if slices.Contains(crs.Spec.Resources, addonsv1.ResourceRef{Kind: o.Kind, Name: o.Name}) {
			add(crs.Name)
		}
	}
	return reqs
}

// scope is what one reconcile of a ClusterResourceSet gathers and finds.
type scope struct {
	crs *addonsv1.ClusterResourceSet
	// clusters are the Clusters the selector picks, by name.
	clusters  []*clusterv1.Cluster
	resources []*resource
	paused    bool

	// What the report says: Clusters still waiting for their control
	// plane, and what failed where.
	waiting  []string
	failures []string
	internal []string
}

// Reconcile applies one ClusterResourceSet's resources to the Clusters it
// selects.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *Reconciler) scope(_ context.Context, crs *addonsv1.ClusterResourceSet) (*scope, error) {
	return &scope{crs: crs}, nil
}

func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	crs := s.crs
	if !crs.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(crs, addonsv1.ClusterResourceSetFinalizer) {
			return ctrl.Result{}, nil
		}
		if err := r.releaseBindings(ctx, crs); err != nil {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(crs, addonsv1.ClusterResourceSetFinalizer)
		return ctrl.Result{}, nil
	}
	if s.paused = pause.Reconcile(nil, crs); s.paused {
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(crs, addonsv1.ClusterResourceSetFinalizer) {
		// Nothing is recorded in a binding before the finalizer that
		// removes it is stored; its write wakes the set again.
		return ctrl.Result{}, nil
	}
	return kit.Steps(ctx, s, r.readResources, r.selectClusters, r.applyToClusters)
}

// readResources reads every resource and makes the set one of its owners.
func (r *Reconciler) readResources(ctx context.Context, s *scope) (time.Duration, error) {
	var errs []error
	for _, ref := range s.crs.Spec.Resources {
		res, err := r.readResource(ctx, s.crs.Namespace, ref)
		if err != nil {
			s.internal = append(s.internal, fmt.Sprintf("reading %s %s failed", ref.Kind, ref.Name))
			errs = append(errs, err)
			continue
		}
		s.resources = append(s.resources, res)
		if err := r.ensureOwnedBy(ctx, s.crs, res); err != nil {
			errs = append(errs, err)
		}
	}
	// A resource's problem is the user's to fix and goes into the report;
	// the fix (creating or changing the resource) wakes the set through the
	// resource cache, so nothing is retried here.
	return 0, errors.Join(errs...)
}

// selectClusters lists the Clusters of the set's namespace its selector
// picks.
func (r *Reconciler) selectClusters(ctx context.Context, s *scope) (time.Duration, error) {
	sel, err := metav1.LabelSelectorAsSelector(&s.crs.Spec.ClusterSelector)
	if err != nil || sel.Empty() {
		// The API refuses such selectors; an older object may still hold one.
		s.failures = append(s.failures, "spec.clusterSelector selects no Cluster: give it matchLabels or matchExpressions")
		return 0, nil
	}
	list := &clusterv1.ClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.crs.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		s.internal = append(s.internal, "listing the Clusters failed")
		return 0, err
	}
	for i := range list.Items {
		s.clusters = append(s.clusters, &list.Items[i])
	}
	slices.SortFunc(s.clusters, func(a, b *clusterv1.Cluster) int { return strings.Compare(a.Name, b.Name) })
	return 0, nil
}

// applyToClusters asks plan.PlanAddons what to apply where, applies it, and
// records the outcome in each Cluster's binding.
func (r *Reconciler) applyToClusters(ctx context.Context, s *scope) (time.Duration, error) {
	crs := s.crs
	strategy := addonsv1.ClusterResourceSetStrategy(crs.Spec.Strategy)
	var usable []plan.AddonResource
	byRef := map[addonsv1.ResourceRef]*resource{}
	for _, res := range s.resources {
		usable = append(usable, plan.AddonResource{Ref: res.ref, Hash: res.hash})
		byRef[res.ref] = res
	}
	bindings := map[string]*addonsv1.ClusterResourceSetBinding{}
	var targets []plan.AddonCluster
	for _, c := range s.clusters {
		b := &addonsv1.ClusterResourceSetBinding{}
		switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(c), b); {
		case apierrors.IsNotFound(err):
			b = nil
		case err != nil:
			return 0, err
		}
		bindings[c.Name] = b
		targets = append(targets, plan.AddonCluster{
			Name:                    c.Name,
			ControlPlaneInitialized: ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false),
			Deleting:                !c.DeletionTimestamp.IsZero(),
			Records:                 records(b, crs.Name),
		})
	}
	p := plan.PlanAddons(strategy, usable, targets)
	s.waiting = p.Waiting

	var requeue time.Duration
	var errs []error
	for _, c := range s.clusters {
		refs := p.Apply[c.Name]
		if len(refs) == 0 {
			continue
		}
		log := ctrl.LoggerFrom(ctx).WithValues("cluster", c.Name)
		remote, err := r.Workload.GetClient(ctx, client.ObjectKeyFromObject(c))
		if err != nil {
			s.failures = append(s.failures, fmt.Sprintf("Cluster %s: %s", c.Name, connectMessage(err)))
			if errors.Is(err, workload.ErrClusterNotConnected) {
				requeue = kit.Soonest(requeue, notConnectedRetry)
				continue
			}
			errs = append(errs, err)
			continue
		}
		entry := addonsv1.ResourceSetBinding{ClusterResourceSetName: crs.Name}
		if b := bindings[c.Name]; b != nil {
			if e := b.Entry(crs.Name); e != nil {
				entry.Resources = slices.Clone(e.Resources)
			}
		}
		now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
		for _, ref := range refs {
			res := byRef[ref]
			applyErr := applyResource(ctx, remote, strategy, res.objects)
			record := addonsv1.ResourceBinding{ResourceRef: ref, Hash: res.hash, LastAppliedTime: now, Applied: ptr.To(applyErr == nil)}
			setRecord(&entry, record)
			if applyErr != nil {
				log.Error(applyErr, "Applying ClusterResourceSet resource failed", "kind", ref.Kind, "name", ref.Name)
				s.failures = append(s.failures, fmt.Sprintf("applying %s %s to Cluster %s failed: %v", ref.Kind, ref.Name, c.Name, applyErr))
				r.event(crs, c, "Warning", "ApplyFailed", "Applying %s %s to Cluster %s failed: %v", ref.Kind, ref.Name, c.Name, applyErr)
				errs = append(errs, applyErr)
				continue
			}
			log.Info("Applied ClusterResourceSet resource", "kind", ref.Kind, "name", ref.Name, "hash", res.hash)
			r.event(crs, c, "Normal", "Applied", "Applied %s %s to Cluster %s", ref.Kind, ref.Name, c.Name)
		}
		if err := r.writeBinding(ctx, crs, c, bindings[c.Name], entry); err != nil {
			s.internal = append(s.internal, fmt.Sprintf("recording what was applied to Cluster %s failed", c.Name))
			errs = append(errs, err)
		}
	}
	return requeue, errors.Join(errs...)
}

// records reads a binding's entry for the named set into what the plan
// takes.
func records(b *addonsv1.ClusterResourceSetBinding, crsName string) map[addonsv1.ResourceRef]plan.AddonRecord {
	if b == nil {
		return nil
	}
	e := b.Entry(crsName)
	if e == nil {
		return nil
	}
	out := map[addonsv1.ResourceRef]plan.AddonRecord{}
	for _, rec := range e.Resources {
		out[rec.ResourceRef] = plan.AddonRecord{Applied: ptr.Deref(rec.Applied, false), Hash: rec.Hash}
	}
	return out
}

// setRecord replaces the entry's record of the same resource, or adds one.
func setRecord(e *addonsv1.ResourceSetBinding, rec addonsv1.ResourceBinding) {
	if old := e.Record(rec.ResourceRef); old != nil {
		*old = rec
		return
	}
	e.Resources = append(e.Resources, rec)
}

func connectMessage(err error) string {
	var nc *workload.NotConnectedError
	if errors.As(err, &nc) {
		return nc.Message
	}
	return "reaching the workload cluster failed"
}

func (r *Reconciler) event(crs *addonsv1.ClusterResourceSet, cluster *clusterv1.Cluster, kind, reason, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(crs, cluster, kind, reason, "Apply", note, args...)
	}
}

// report sets ResourcesApplied from what the reconcile found.
func (r *Reconciler) report(s *scope) {
	crs := s.crs
	if !crs.DeletionTimestamp.IsZero() {
		return
	}
	crs.Status.ObservedGeneration = crs.Generation
	if s.paused {
		return
	}
	var wrongType, problems []string
	for _, res := range s.resources {
		switch {
		case res.wrongType:
			wrongType = append(wrongType, res.problem)
		case res.problem != "":
			problems = append(problems, res.problem)
		}
	}
	for _, c := range s.waiting {
		problems = append(problems, fmt.Sprintf("Cluster %s: waiting for its control plane to be initialized", c))
	}
	problems = append(problems, s.failures...)
	c := metav1.Condition{Type: addonsv1.ResourcesAppliedCondition, Status: metav1.ConditionTrue, Reason: addonsv1.ResourcesAppliedReason}
	switch {
	case len(wrongType) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, addonsv1.ResourcesAppliedWrongSecretTypeReason, bullets(append(wrongType, problems...))
	case len(problems) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, addonsv1.ResourcesNotAppliedReason, bullets(problems)
	case len(s.internal) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, addonsv1.ResourcesAppliedInternalErrorReason, bullets(append(s.internal, "see the controller's log"))
	}
	conditions.Set(crs, c)
}

// bullets writes one line as is and several as a list.
func bullets(lines []string) string {
	if len(lines) == 1 {
		return lines[0]
	}
	return "* " + strings.Join(lines, "\n* ")
}
