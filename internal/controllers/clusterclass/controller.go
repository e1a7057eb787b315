package clusterclass

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/topology"
	"capstan.dev/capstan/internal/topology/variables"
	"capstan.dev/capstan/internal/usererror"
)

// Reconciler reconciles ClusterClasses.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client   client.Client
	Resolver *contract.Resolver

	templateWatches *contract.Tracker
	kit             kit.Reconciler[*clusterv1.ClusterClass, *scope]
}

// SetupWithManager registers the controller. Besides its ClusterClasses it
// watches the kinds of the templates they point at (a template created after
// its class wakes the class, which then owns it) and the metadata of CRDs:
// a provider upgrade that moves a contract label changes which references
// are up to date.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	r.kit = kit.Reconciler[*clusterv1.ClusterClass, *scope]{
		Client:    r.Client,
		NewObject: func() *clusterv1.ClusterClass { return &clusterv1.ClusterClass{} },
		Options:   []patch.Option{patch.SoleStatusWriter()},
		Scope:     r.scope,
		Run:       r.run,
		Report:    updateStatus,
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.ClusterClass{}, builder.WithPredicates(kit.NotStatusOnly)).
		Watches(crd, handler.EnqueueRequestsFromMapFunc(r.crdToClasses),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(opts).
		Named("clusterclass").
		Build(r)
	if err != nil {
		return err
	}
	r.templateWatches = &contract.Tracker{
		Controller: c,
		Cache:      mgr.GetCache(),
		Handler:    handler.EnqueueRequestsFromMapFunc(r.templateToClasses),
		// A template's creation and its owner references going missing
		// matter; its content does not.
		Predicates: []predicate.Predicate{predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return true },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return len(e.ObjectOld.GetOwnerReferences()) != len(e.ObjectNew.GetOwnerReferences())
			},
			DeleteFunc: func(event.DeleteEvent) bool { return true },
		}},
	}
	return nil
}

// Reconcile brings one ClusterClass's template ownership and status up to
// date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *Reconciler) classesIn(ctx context.Context, opts ...client.ListOption) []clusterv1.ClusterClass {
	list := &clusterv1.ClusterClassList{}
	if err := r.Client.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ClusterClasses")
		return nil
	}
	return list.Items
}

// crdToClasses wakes every class that points at a kind of the CRD's group.
func (r *Reconciler) crdToClasses(ctx context.Context, obj client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, cc := range r.classesIn(ctx) {
		for _, ref := range templateRefs(&cc) {
			if contract.CRDName(ref.Ref.GroupVersionKind().Group, ref.Ref.Kind) == obj.GetName() {
				out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&cc)})
				break
			}
		}
	}
	return out
}

// templateToClasses wakes the classes of the template's namespace that
// point at it.
func (r *Reconciler) templateToClasses(ctx context.Context, obj client.Object) []ctrl.Request {
	gk := obj.GetObjectKind().GroupVersionKind().GroupKind()
	var out []ctrl.Request
	for _, cc := range r.classesIn(ctx, client.InNamespace(obj.GetNamespace())) {
		for _, ref := range templateRefs(&cc) {
			if ref.Ref.Name == obj.GetName() && ref.Ref.GroupVersionKind().GroupKind() == gk {
				out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&cc)})
				break
			}
		}
	}
	return out
}

// scope is everything one reconcile learns about a ClusterClass.
type scope struct {
	cc     *clusterv1.ClusterClass
	paused bool

	// refsChecked tells whether every reference could be resolved;
	// outdated are the ones behind their CRD's contract version, refErrs
	// why the others could not be checked.
	refsChecked bool
	outdated    []outdatedRef
	refErrs     []error

	// variables are the definitions for status.variables; variableErrs
	// name the broken ones.
	variablesChecked bool
	variables        []clusterv1.ClusterClassStatusVariable
	variableErrs     field.ErrorList
}

func (r *Reconciler) scope(_ context.Context, cc *clusterv1.ClusterClass) (*scope, error) {
	return &scope{cc: cc}, nil
}

func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	// A class belongs to no one Cluster: only its own annotation pauses it.
	if s.paused = pause.Reconcile(nil, s.cc); s.paused {
		return ctrl.Result{}, nil
	}
	if !s.cc.DeletionTimestamp.IsZero() {
		// Nothing to clean up: the templates go with the class through their
		// owner references.
		return ctrl.Result{}, nil
	}
	return kit.Steps(ctx, s, r.reconcileTemplates, r.reconcileVariables)
}

// templateRefs lists the class's template references in the order of its
// spec, each template once even when several classes share it.
func templateRefs(cc *clusterv1.ClusterClass) []topology.ClassTemplateRef {
	var out []topology.ClassTemplateRef
	seen := map[string]bool{}
	for _, cr := range topology.ClassTemplateRefs(cc) {
		key := cr.Ref.GroupVersionKind().GroupKind().String() + "/" + cr.Ref.Name
		if !seen[key] {
			seen[key] = true
			out = append(out, cr)
		}
	}
	return out
}

// reconcileTemplates resolves every template reference through its CRD's
// contract label, notes the references whose apiVersion is behind, and
// makes the class an owner of each template.
func (r *Reconciler) reconcileTemplates(ctx context.Context, s *scope) (time.Duration, error) {
	owner := metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: clusterv1.ClusterClassKind, Name: s.cc.Name, UID: s.cc.UID}
	var errs []error
	for _, cr := range templateRefs(s.cc) {
		gv, err := schema.ParseGroupVersion(cr.Ref.APIVersion)
		if err != nil {
			errs = append(errs, usererror.Mark(fmt.Errorf("%s: apiVersion %q is not group/version: fix the reference", cr.Field, cr.Ref.APIVersion)))
			continue
		}
		vref := clusterv1.ContractVersionedObjectReference{APIGroup: gv.Group, Kind: cr.Ref.Kind, Name: cr.Ref.Name}
		current, err := r.Resolver.GroupVersionKind(ctx, vref)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cr.Field, err))
			continue
		}
		if current.Version != gv.Version {
			s.outdated = append(s.outdated, outdatedRef{field: cr.Field, kind: cr.Ref.Kind, name: cr.Ref.Name, version: gv.Version, current: current.Version})
		}
		// The template is read at the contract's version: the one the class
		// names may no longer be served.
		_, err = r.Resolver.Claim(ctx, r.Client, r.templateWatches, vref, s.cc.Namespace, func(u *unstructured.Unstructured) error {
			if !hasOwner(u.GetOwnerReferences(), owner) {
				u.SetOwnerReferences(append(u.GetOwnerReferences(), owner))
			}
			return nil
		})
		if apierrors.IsNotFound(err) {
			err = usererror.Mark(fmt.Errorf("%s: %s %s does not exist in namespace %s: create it or fix the reference", cr.Field, cr.Ref.Kind, cr.Ref.Name, s.cc.Namespace))
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	s.refErrs = errs
	s.refsChecked = len(errs) == 0
	return 0, errors.Join(errs...)
}

// hasOwner tells whether refs already hold owner (a class deleted and
// created again under the same name has a new UID: it is a new owner).
func hasOwner(refs []metav1.OwnerReference, owner metav1.OwnerReference) bool {
	for _, ref := range refs {
		if ref.UID == owner.UID && ref.Kind == owner.Kind && ref.Name == owner.Name {
			return true
		}
	}
	return false
}

// reconcileVariables checks the class's variable definitions and gathers
// them for status.variables. A broken definition is the user's to fix: the
// condition names it, and the status keeps the definitions it last had, so
// that Clusters keep being checked against what was valid.
func (r *Reconciler) reconcileVariables(_ context.Context, s *scope) (time.Duration, error) {
	defs, errs := variables.Definitions(s.cc)
	s.variablesChecked = true
	s.variableErrs = errs
	if len(errs) == 0 {
		s.variables = defs
	}
	return 0, nil
}
