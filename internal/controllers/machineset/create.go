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
	if !obj.GetDeletionTimestamp().IsZero() {
		return obj, nil
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == s.cluster.UID {
			return obj, nil
		}
	}
	helper, err := patch.NewHelper(obj, r.writer())
	if err != nil {
		return nil, err
	}
	obj.SetOwnerReferences(append(obj.GetOwnerReferences(), metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: s.cluster.Name, UID: s.cluster.UID,
	}))
	if err := helper.Patch(ctx, obj); err != nil {
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
	if _, ok := s.ms.Annotations[DisableMachineCreateAnnotation]; ok {
		s.notCreated = "the " + DisableMachineCreateAnnotation + " annotation is set"
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
		r.event(s.ms, m, "Normal", "SuccessfulCreate", "Create", "Created Machine %s", m.Name)
		made = append(made, m)
	}
	s.machines = append(s.machines, made...)
	errs := []error{s.scaleUpErr}
	// New Machines learn at once whether they are up to date (a status
	// can only be written once the object exists).
	for _, m := range made {
		if _, err := r.setUpToDate(ctx, s, m); err != nil {
			errs = append(errs, err)
		}
	}
	return kerrors.NewAggregate(append(errs, r.waitForCache(ctx, made, created)))
}

// newMachine is the Machine the set creates under name, before the
// references to its cloned objects are filled in. It carries the Machine
// finalizer from the start, which saves the Machine controller a write.
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

// createMachine clones the set's bootstrap and infrastructure templates
// under a new Machine's name and creates the Machine. When any step fails,
// what was already cloned is deleted again.
func (r *Reconciler) createMachine(ctx context.Context, s *scope) (*clusterv1.Machine, error) {
	ms := s.ms
	name, err := machineName(ms.Spec.MachineNaming.Template, ms.Spec.ClusterName, ms.Name, randomString)
	if err != nil {
		return nil, err
	}
	m := newMachine(ms, name)
	var clones []*unstructured.Unstructured
	undo := func(cause error) error {
		errs := []error{cause}
		for _, obj := range clones {
			err := r.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting %s %s after the failure: %w", obj.GetKind(), obj.GetName(), err))
			}
		}
		return kerrors.NewAggregate(errs)
	}
	if ref := ms.Spec.Template.Spec.Bootstrap.ConfigRef; ref.IsDefined() {
		obj, err := r.clone(ctx, s.bootstrapTemplate, m)
		if err != nil {
			return nil, fmt.Errorf("cloning %s %s: %w", ref.Kind, ref.Name, err)
		}
		clones = append(clones, obj)
		m.Spec.Bootstrap.ConfigRef = contract.ReferenceTo(obj)
	}
	ref := ms.Spec.Template.Spec.InfrastructureRef
	obj, err := r.clone(ctx, s.infraTemplate, m)
	if err != nil {
		return nil, undo(fmt.Errorf("cloning %s %s: %w", ref.Kind, ref.Name, err))
	}
	clones = append(clones, obj)
	m.Spec.InfrastructureRef = contract.ReferenceTo(obj)

	if err := r.writer().Create(ctx, m); err != nil {
		return nil, undo(fmt.Errorf("creating Machine %s: %w", name, err))
	}
	return m, nil
}

// clone creates, under the Machine's name, the object the template
// describes, with the Machine's labels and annotations. The set is its
// controller until the Machine controller takes it over.
func (r *Reconciler) clone(ctx context.Context, tmpl *unstructured.Unstructured, m *clusterv1.Machine) (*unstructured.Unstructured, error) {
	if tmpl == nil {
		return nil, errors.New("the template was not read")
	}
	return contract.CloneTemplate(ctx, r.Resolver, r.writer(), tmpl, contract.Clone{
		Namespace: m.Namespace, Name: m.Name, ClusterName: m.Spec.ClusterName,
		Labels: m.Labels, Annotations: m.Annotations, Owner: m.OwnerReferences[0],
	})
}
