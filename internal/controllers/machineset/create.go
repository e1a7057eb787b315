package machineset

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/patch"
)

// reconcileTemplates reads the infrastructure and bootstrap templates the
// set clones and makes the Cluster one of their owners, as Cluster API does
// (so that they go with the Cluster and move with it). A template that does
// not exist yet is no error: its creation wakes the set.
func (r *Reconciler) reconcileTemplates(ctx context.Context, s *scope) (time.Duration, error) {
	spec := &s.ms.Spec.Template.Spec
	var errs []error
	read := func(field string, ref clusterv1.ContractVersionedObjectReference) *unstructured.Unstructured {
		obj, err := r.template(ctx, s, field, ref)
		if err != nil {
			s.templateErrs = append(s.templateErrs, err)
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
		return obj
	}
	s.infraTemplate = read("spec.template.spec.infrastructureRef", spec.InfrastructureRef)
	if spec.Bootstrap.ConfigRef.IsDefined() {
		s.bootstrapTemplate = read("spec.template.spec.bootstrap.configRef", spec.Bootstrap.ConfigRef)
	}
	return 0, kerrors.NewAggregate(errs)
}

// notFound keeps a NotFound error recognisable while saying which template
// is missing.
type notFound struct {
	msg string
	err error
}

func (e *notFound) Error() string { return e.msg }
func (e *notFound) Unwrap() error { return e.err }

func (r *Reconciler) template(ctx context.Context, s *scope, field string, ref clusterv1.ContractVersionedObjectReference) (*unstructured.Unstructured, error) {
	if !strings.HasSuffix(ref.Kind, contract.TemplateSuffix) || ref.Kind == contract.TemplateSuffix {
		return nil, fmt.Errorf("%s names %s %s, which is not a template: its kind must end in %q", field, ref.Kind, ref.Name, contract.TemplateSuffix)
	}
	gvk, err := r.Resolver.GroupVersionKind(ctx, ref)
	if err != nil {
		return nil, err
	}
	if r.templateWatches != nil {
		if err := r.templateWatches.Watch(gvk); err != nil {
			return nil, fmt.Errorf("watching %s: %w", gvk.Kind, err)
		}
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.ms.Namespace, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &notFound{msg: fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name), err: err}
		}
		return nil, err
	}
	if err := contract.EnsureClusterOwner(ctx, r.writer(), obj, s.cluster); err != nil {
		return nil, err
	}
	return obj, nil
}

// scale creates or deletes Machines until the set has spec.replicas of
// them, counting those already being deleted: a Machine is replaced only
// once it is gone.
func (r *Reconciler) scale(ctx context.Context, s *scope) (time.Duration, error) {
	if !s.machinesRead {
		return 0, nil
	}
	want, have := int(ptr.Deref(s.ms.Spec.Replicas, 0)), len(s.machines)
	switch {
	case have < want:
		return 0, r.scaleUp(ctx, s, want-have)
	case have > want:
		return 0, r.scaleDown(ctx, s, have-want)
	}
	return 0, nil
}

func (r *Reconciler) scaleUp(ctx context.Context, s *scope, n int) error {
	if _, ok := s.ms.Annotations[clusterv1.DisableMachineCreateAnnotation]; ok {
		s.notCreated = "the " + clusterv1.DisableMachineCreateAnnotation + " annotation is set"
		return nil
	}
	if !s.cluster.DeletionTimestamp.IsZero() {
		s.notCreated = "Cluster " + s.cluster.Name + " is being deleted"
		return nil
	}
	if len(s.templateErrs) > 0 {
		var why []string
		for _, err := range s.templateErrs {
			why = append(why, err.Error())
		}
		s.notCreated = strings.Join(why, "; ")
		return nil
	}
	var made []*clusterv1.Machine
	for range n {
		m, err := r.createMachine(ctx, s)
		if err != nil {
			s.scaleUpErr = err
			r.event(s.ms, nil, "Warning", "FailedCreate", "Create", "Failed to create a Machine: %v", err)
			break
		}
		ctrl.LoggerFrom(ctx).Info("Created Machine", "Machine", m.Name)
		made = append(made, m)
	}
	// One event per scale-up names every Machine it made: an event is an
	// API write, and one per Machine would be most of a big scale-up's.
	switch len(made) {
	case 0:
	case 1:
		r.event(s.ms, made[0], "Normal", "SuccessfulCreate", "Create", "Created Machine %s", made[0].Name)
	default:
		names := make([]string, len(made))
		for i, m := range made {
			names[i] = m.Name
		}
		r.event(s.ms, nil, "Normal", "SuccessfulCreate", "Create", "Created %d Machines: %s", len(made), strings.Join(names, ", "))
	}
	s.machines = append(s.machines, made...)
	// The Machines' objects are created only once the cache shows the
	// Machines: the controllers that act on a new object (the bootstrap and
	// infrastructure providers) look up its owning Machine in the same cache
	// when the object appears, and may not look again.
	errs := []error{patch.WaitForCache(ctx, r.Client, patch.Created, objects(made)...)}
	var clones []*unstructured.Unstructured
	if errs[0] == nil {
		for _, m := range made {
			objs, err := r.createClones(ctx, s, m)
			clones = append(clones, objs...)
			if err != nil {
				// The Machine stays: repairClones creates what it misses
				// on the next reconcile, as after a crash between the
				// creates. Deleting it instead would be a second way to
				// recover, and one that is not restart-safe either.
				s.scaleUpErr = err
				r.event(s.ms, m, "Warning", "FailedCreate", "Create", "Failed to create the objects of Machine %s: %v", m.Name, err)
				break
			}
		}
	}
	errs = append(errs, s.scaleUpErr)
	// New Machines learn at once whether they are up to date (a status
	// can only be written once the object exists).
	for _, m := range made {
		if _, err := r.setUpToDate(ctx, s, m); err != nil {
			errs = append(errs, err)
		}
	}
	// The next reconcile must see the clones too, or it would take a
	// Machine's objects for missing and try to create them again.
	return kerrors.NewAggregate(append(errs, patch.WaitForCache(ctx, r.clones, patch.Created, objects(clones)...)))
}

// newMachine is the Machine the set creates under name. It carries the
// Machine finalizer from the start, which saves the Machine controller a
// write.
func newMachine(ms *clusterv1.MachineSet, name string) *clusterv1.Machine {
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ms.Namespace,
			Name:            name,
			Labels:          machineLabels(ms),
			Annotations:     maps.Clone(ms.Spec.Template.Annotations),
			OwnerReferences: []metav1.OwnerReference{controllerRef(ms)},
			Finalizers:      []string{clusterv1.MachineFinalizer},
		},
		Spec: *ms.Spec.Template.Spec.DeepCopy(),
	}
	m.Spec.ClusterName = ms.Spec.ClusterName
	m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{}
	m.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{}
	return m
}

// createMachine creates a new Machine whose references name the clones of
// the set's templates under its name; createClones makes them once the
// Machine exists. The Machine comes first so that its objects can be
// created with the Machine as their controller: the Machine controller then
// has nothing to take over, which saves a write per object.
func (r *Reconciler) createMachine(ctx context.Context, s *scope) (*clusterv1.Machine, error) {
	ms := s.ms
	name, err := machineName(ms.Spec.MachineNaming.Template, ms.Spec.ClusterName, ms.Name, randomString)
	if err != nil {
		return nil, err
	}
	if s.infraTemplate == nil || (ms.Spec.Template.Spec.Bootstrap.ConfigRef.IsDefined() && s.bootstrapTemplate == nil) {
		return nil, errors.New("the templates were not read")
	}
	m := newMachine(ms, name)
	if ms.Spec.Template.Spec.Bootstrap.ConfigRef.IsDefined() {
		m.Spec.Bootstrap.ConfigRef = contract.ClonedReference(s.bootstrapTemplate, name)
	}
	m.Spec.InfrastructureRef = contract.ClonedReference(s.infraTemplate, name)
	if err := r.writer().Create(ctx, m); err != nil {
		return nil, fmt.Errorf("creating Machine %s: %w", name, err)
	}
	return m, nil
}

// createClones creates a new Machine's bootstrap and infrastructure objects
// from the set's templates, and returns those it made.
func (r *Reconciler) createClones(ctx context.Context, s *scope, m *clusterv1.Machine) ([]*unstructured.Unstructured, error) {
	var clones []*unstructured.Unstructured
	if m.Spec.Bootstrap.ConfigRef.IsDefined() {
		obj, err := r.clone(ctx, s.bootstrapTemplate, m)
		if err != nil {
			return clones, err
		}
		clones = append(clones, obj)
	}
	obj, err := r.clone(ctx, s.infraTemplate, m)
	if err != nil {
		return clones, err
	}
	return append(clones, obj), nil
}

// clone creates, under the Machine's name, the object the template
// describes, with the Machine's labels and annotations and the Machine as
// its controller. An object of that name that already exists counts as
// created: it is one an earlier attempt made, and the Machine controller
// takes over whatever its reference names in any case.
func (r *Reconciler) clone(ctx context.Context, tmpl *unstructured.Unstructured, m *clusterv1.Machine) (*unstructured.Unstructured, error) {
	obj, err := contract.CloneTemplate(ctx, r.Resolver, r.writer(), tmpl, contract.Clone{
		Namespace: m.Namespace, Name: m.Name, ClusterName: m.Spec.ClusterName,
		Labels: m.Labels, Annotations: m.Annotations, Owner: contract.MachineOwner(m),
	})
	return obj, err
}
