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
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/machinecreate"
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
	made, err := r.creator().Create(ctx, n, func() (*clusterv1.Machine, error) { return newMachine(s) }, r.makers(s))
	if made.MachineErr != nil {
		s.scaleUpErr = made.MachineErr
		r.event(s.ms, nil, "Warning", "FailedCreate", "Create", "Failed to create a Machine: %v", made.MachineErr)
	}
	// One event per scale-up names every Machine it made: an event is an
	// API write, and one per Machine would be most of a big scale-up's.
	switch len(made.Machines) {
	case 0:
	case 1:
		r.event(s.ms, made.Machines[0], "Normal", "SuccessfulCreate", "Create", "Created Machine %s", made.Machines[0].Name)
	default:
		names := make([]string, len(made.Machines))
		for i, m := range made.Machines {
			names[i] = m.Name
		}
		r.event(s.ms, nil, "Normal", "SuccessfulCreate", "Create", "Created %d Machines: %s", len(made.Machines), strings.Join(names, ", "))
	}
	s.machines = append(s.machines, made.Machines...)
	if made.ObjectsErr != nil {
		s.scaleUpErr = made.ObjectsErr
		r.event(s.ms, made.Unfinished, "Warning", "FailedCreate", "Create", "Failed to create the objects of Machine %s: %v", made.Unfinished.Name, made.ObjectsErr)
	}
	errs := []error{err}
	// New Machines learn at once whether they are up to date (a status
	// can only be written once the object exists).
	for _, m := range made.Machines {
		if _, err := r.setUpToDate(ctx, s, m); err != nil {
			errs = append(errs, err)
		}
	}
	return kerrors.NewAggregate(errs)
}

// creator creates the set's Machines and their objects, Machines first.
func (r *Reconciler) creator() *machinecreate.Creator {
	return &machinecreate.Creator{Writer: r.writer(), FieldManager: FieldManager, Machines: r.Client, Objects: r.clones}
}

// makers clone the set's templates for its Machines. A clone carries what
// a new Machine of the set carries, so that a Machine's objects look alike
// whether they were made with it or repaired later.
func (r *Reconciler) makers(s *scope) machinecreate.Makers {
	clone := func(tmpl *unstructured.Unstructured) machinecreate.Maker {
		return machinecreate.TemplateClone{Resolver: r.Resolver, Writer: r.writer(), Template: tmpl,
			Labels: machineLabels(s.ms), Annotations: s.ms.Spec.Template.Annotations}
	}
	var makers machinecreate.Makers
	if s.bootstrapTemplate != nil {
		makers.Bootstrap = clone(s.bootstrapTemplate)
	}
	if s.infraTemplate != nil {
		makers.Infrastructure = clone(s.infraTemplate)
	}
	return makers
}

// newMachine is the next Machine the set creates, under a new name from
// its naming template, but for its references, which the creator sets to
// its clones. It carries the Machine finalizer from the start, which saves
// the Machine controller a write.
func newMachine(s *scope) (*clusterv1.Machine, error) {
	ms := s.ms
	name, err := machineName(ms.Spec.MachineNaming.Template, ms.Spec.ClusterName, ms.Name, randomString)
	if err != nil {
		return nil, err
	}
	if s.infraTemplate == nil || (ms.Spec.Template.Spec.Bootstrap.ConfigRef.IsDefined() && s.bootstrapTemplate == nil) {
		return nil, errors.New("the templates were not read")
	}
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
	return m, nil
}
