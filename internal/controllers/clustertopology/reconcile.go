package clustertopology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/ssa"
	"capstan.dev/capstan/internal/topology/desired"
	"capstan.dev/capstan/internal/usererror"
)

// Event reasons (upstream's): what the topology created (a rotated
// template included), changed and deleted.
const (
	createdReason = "TopologyCreate"
	updatedReason = "TopologyUpdate"
	deletedReason = "TopologyDelete"
)

// computeState computes the desired state from what gather read.
func (r *Reconciler) computeState(_ context.Context, s *scope) (time.Duration, error) {
	if !s.currentRead || s.notReady != "" {
		return 0, nil
	}
	state, err := compute(r.Compute, desired.Input{
		Cluster:        s.cluster.DeepCopy(),
		Class:          s.class,
		ClassTemplates: s.classTemplates,
		Current:        s.current,
		FieldManager:   FieldManager,
	})
	if err != nil {
		// What makes a topology impossible is in the class or the
		// Cluster: only their owner can fix it, and their change wakes
		// the Cluster.
		return 0, usererror.Mark(fmt.Errorf("computing the topology of ClusterClass %s: %w", s.class.Name, err))
	}
	s.state = state
	return 0, nil
}

// compute calls the computation, turning a panic into an error: the
// Cluster then says what failed instead of the reconcile dying quietly.
func compute(f func(desired.Input) (*desired.State, error), in desired.Input) (state *desired.State, err error) {
	defer func() {
		if p := recover(); p != nil {
			state, err = nil, fmt.Errorf("the desired state computation failed: %v", p)
		}
	}()
	return f(in)
}

// applyState makes the objects match the desired state, in the order they
// depend on each other: the infrastructure cluster, the control plane's
// machine template and the control plane, the Cluster's references to them,
// then the workers with their templates and health checks.
func (r *Reconciler) applyState(ctx context.Context, s *scope) (time.Duration, error) {
	st := s.state
	if st == nil {
		return 0, nil
	}
	c := s.cluster
	if what := incompatible(s.current, st); len(what) > 0 {
		// Nothing is applied: half a move to other kinds would leave the
		// Cluster between two sets of objects.
		return 0, usererror.Mark(fmt.Errorf("the topology cannot move to ClusterClass %s: %s; a Cluster keeps the kinds of its infrastructure cluster, control plane and machine templates: go back to the former class, or to one with the same kinds",
			s.class.Name, strings.Join(what, "; ")))
	}
	if st.InfrastructureCluster != nil {
		obj := st.InfrastructureCluster.DeepCopy()
		markOwned(obj, c, "")
		setOwner(obj, clusterController(c))
		res, err := r.applyTracked(ctx, s, obj, sameObject(s.current.InfrastructureCluster, obj))
		if err != nil {
			return 0, err
		}
		c.Spec.InfrastructureRef = contract.ReferenceTo(res)
	}
	if st.ControlPlane != nil {
		cp := st.ControlPlane.DeepCopy()
		if st.ControlPlaneMachineInfrastructure != nil {
			ref, err := r.reconcileTemplate(ctx, s, s.current.ControlPlaneMachineInfrastructure, st.ControlPlaneMachineInfrastructure, "", c.Name+"-")
			if err != nil {
				return 0, err
			}
			if err := contract.SetControlPlaneMachineTemplateRef(cp, ref); err != nil {
				return 0, err
			}
		}
		markOwned(cp, c, "")
		setOwner(cp, clusterController(c))
		res, err := r.applyTracked(ctx, s, cp, sameObject(s.current.ControlPlane, cp))
		if err != nil {
			return 0, err
		}
		c.Spec.ControlPlaneRef = contract.ReferenceTo(res)
	}
	if st.Cluster != nil {
		// The Cluster's own topology metadata (its labels, the upgrade
		// step annotation) goes out with the reconcile's one patch of it.
		c.Labels, c.Annotations = st.Cluster.Labels, st.Cluster.Annotations
	}
	if st.ControlPlane != nil {
		if err := r.reconcileHealthCheck(ctx, s, s.current.ControlPlaneHealthCheck, st.ControlPlaneHealthCheck, ""); err != nil {
			return 0, err
		}
	}

	var errs []error
	for _, name := range slices.Sorted(maps.Keys(st.MachineDeployments)) {
		if err := r.reconcileMachineDeployment(ctx, s, name, s.current.MachineDeployments[name], st.MachineDeployments[name]); err != nil {
			errs = append(errs, fmt.Errorf("MachineDeployment topology %s: %w", name, err))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.current.MachineDeployments)) {
		if _, wanted := st.MachineDeployments[name]; !wanted {
			if err := r.deleteMachineDeployment(ctx, s, s.current.MachineDeployments[name]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(st.MachinePools)) {
		if err := r.reconcileMachinePool(ctx, s, name, s.current.MachinePools[name], st.MachinePools[name]); err != nil {
			errs = append(errs, fmt.Errorf("MachinePool topology %s: %w", name, err))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.current.MachinePools)) {
		if _, wanted := st.MachinePools[name]; !wanted {
			if err := r.deleteMachinePool(ctx, s, s.current.MachinePools[name]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return 0, errors.Join(errs...)
}

func (r *Reconciler) reconcileMachineDeployment(ctx context.Context, s *scope, name string, current, want *desired.MachineDeployment) error {
	c := s.cluster
	if want == nil || want.Object == nil {
		return nil
	}
	md := want.Object.DeepCopy()
	md.Namespace = c.Namespace
	var cur *clusterv1.MachineDeployment
	var curBootstrap, curInfra *unstructured.Unstructured
	var curCheck *clusterv1.MachineHealthCheck
	if current != nil {
		cur, curBootstrap, curInfra, curCheck = current.Object, current.Bootstrap, current.Infrastructure, current.HealthCheck
	}
	if cur != nil && !cur.DeletionTimestamp.IsZero() {
		// Going; a new one of the same name waits until it is gone.
		return nil
	}
	prefix := c.Name + "-" + name + "-"
	if want.Infrastructure != nil {
		ref, err := r.reconcileTemplate(ctx, s, curInfra, want.Infrastructure, name, prefix)
		if err != nil {
			return err
		}
		md.Spec.Template.Spec.InfrastructureRef = ref
	}
	if want.Bootstrap != nil {
		ref, err := r.reconcileTemplate(ctx, s, curBootstrap, want.Bootstrap, name, prefix)
		if err != nil {
			return err
		}
		md.Spec.Template.Spec.Bootstrap.ConfigRef = ref
	}
	markOwned(md, c, name)
	md.Spec.ClusterName = c.Name
	setOwner(md, clusterOwner(c))
	var curObj client.Object
	if cur != nil && cur.Name == md.Name {
		curObj = cur
	}
	if _, err := r.applyTracked(ctx, s, md, curObj); err != nil {
		return err
	}
	return r.reconcileHealthCheck(ctx, s, curCheck, want.HealthCheck, name)
}

// reconcileHealthCheck applies the health check of a control plane or a
// MachineDeployment, or deletes the one the topology no longer wants.
func (r *Reconciler) reconcileHealthCheck(ctx context.Context, s *scope, current, want *clusterv1.MachineHealthCheck, deployment string) error {
	if want == nil {
		if current != nil && current.DeletionTimestamp.IsZero() {
			return r.delete(ctx, s, current)
		}
		return nil
	}
	mhc := want.DeepCopy()
	mhc.Namespace = s.cluster.Namespace
	mhc.Spec.ClusterName = s.cluster.Name
	markOwned(mhc, s.cluster, deployment)
	// Owned by the Cluster (as upstream's are): one the topology drops or
	// a MachineDeployment it removes is deleted by the topology, the rest go
	// with the Cluster.
	setOwner(mhc, clusterOwner(s.cluster))
	var curObj client.Object
	if current != nil && current.Name == mhc.Name {
		curObj = current
	}
	_, err := r.applyTracked(ctx, s, mhc, curObj)
	return err
}

// deleteMachineDeployment deletes a MachineDeployment the topology no
// longer lists, with its health check; its templates go once no
// MachineSet references them (removeTemplatesNotInUse).
func (r *Reconciler) deleteMachineDeployment(ctx context.Context, s *scope, md *desired.MachineDeployment) error {
	if md.HealthCheck != nil && md.HealthCheck.DeletionTimestamp.IsZero() {
		if err := r.delete(ctx, s, md.HealthCheck); err != nil {
			return err
		}
	}
	if md.Object.DeletionTimestamp.IsZero() {
		return r.delete(ctx, s, md.Object)
	}
	return nil
}

// reconcileMachinePool applies a MachinePool with its bootstrap config and
// infrastructure machine pool. Those are objects of the pool itself, not
// templates: they are changed in place.
func (r *Reconciler) reconcileMachinePool(ctx context.Context, s *scope, name string, current, want *desired.MachinePool) error {
	c := s.cluster
	if want == nil || want.Object == nil {
		return nil
	}
	mp := want.Object.DeepCopy()
	mp.Namespace = c.Namespace
	var cur *clusterv1.MachinePool
	var curBootstrap, curInfra *unstructured.Unstructured
	if current != nil {
		cur, curBootstrap, curInfra = current.Object, current.Bootstrap, current.Infrastructure
	}
	if cur != nil && !cur.DeletionTimestamp.IsZero() {
		return nil
	}
	for _, part := range []struct {
		want, current *unstructured.Unstructured
		ref           *clusterv1.ContractVersionedObjectReference
	}{
		{want.Bootstrap, curBootstrap, &mp.Spec.Template.Spec.Bootstrap.ConfigRef},
		{want.Infrastructure, curInfra, &mp.Spec.Template.Spec.InfrastructureRef},
	} {
		if part.want == nil {
			continue
		}
		obj := part.want.DeepCopy()
		markPoolOwned(obj, c, name)
		setOwner(obj, clusterOwner(c))
		res, err := r.applyTracked(ctx, s, obj, sameObject(part.current, obj))
		if err != nil {
			return err
		}
		*part.ref = contract.ReferenceTo(res)
	}
	markPoolOwned(mp, c, name)
	mp.Spec.ClusterName = c.Name
	setOwner(mp, clusterOwner(c))
	var curObj client.Object
	if cur != nil && cur.Name == mp.Name {
		curObj = cur
	}
	_, err := r.applyTracked(ctx, s, mp, curObj)
	return err
}

// deleteMachinePool deletes a MachinePool the topology no longer lists.
// Its bootstrap config and infrastructure machine pool are not deleted
// here: the MachinePool's own deletion takes them down in order, after its
// Machines and the drain of its Nodes.
func (r *Reconciler) deleteMachinePool(ctx context.Context, s *scope, mp *desired.MachinePool) error {
	if mp.Object.DeletionTimestamp.IsZero() {
		return r.delete(ctx, s, mp.Object)
	}
	return nil
}

// reconcileTemplate makes the template want describes exist for the
// topology and returns the reference its user is to hold. Templates are not
// changed in place where it matters: the computation gives a template whose
// spec must change a new name (rotation), and the old one goes once nothing
// references it (removeTemplatesNotInUse); under its current name only its
// labels and annotations change. A desired template without a name gets the
// current one when the spec still matches, a new one otherwise.
func (r *Reconciler) reconcileTemplate(ctx context.Context, s *scope, current, want *unstructured.Unstructured, deployment, prefix string) (clusterv1.ContractVersionedObjectReference, error) {
	c := s.cluster
	obj := want.DeepCopy()
	markOwned(obj, c, deployment)
	setOwner(obj, clusterOwner(c))
	reusable := current != nil && current.GroupVersionKind().GroupKind() == obj.GroupVersionKind().GroupKind() && current.GetDeletionTimestamp().IsZero()
	if obj.GetName() == "" {
		if reusable && !specChanged(current, obj) {
			obj.SetName(current.GetName())
		} else {
			obj.SetName(prefix + utilrand.String(5))
		}
	}
	if reusable && obj.GetName() != current.GetName() {
		r.event(c, "Normal", createdReason, "Rotate", "%s %s replaces %s, whose spec the topology changed", obj.GetKind(), obj.GetName(), current.GetName())
	}
	res, err := r.applyTracked(ctx, s, obj, sameObject(current, obj))
	if err != nil {
		return clusterv1.ContractVersionedObjectReference{}, err
	}
	return contract.ReferenceTo(res), nil
}

// specChanged tells whether the template's spec differs from the wanted
// one: a value the topology sets differs, or the topology owned a field it
// no longer sets.
func specChanged(current, want *unstructured.Unstructured) bool {
	return ssa.Change(want.Object, current.Object, contract.FieldsAppliedBy(current, FieldManager), "spec") != ""
}

// applyTracked applies obj and remembers what it wrote, for the cache wait
// and the template sweep.
func (r *Reconciler) applyTracked(ctx context.Context, s *scope, obj, current client.Object) (*unstructured.Unstructured, error) {
	res, err := r.apply(ctx, applyRequest{want: obj, current: current})
	if err != nil {
		return nil, err
	}
	if res.written {
		s.written = append(s.written, res.obj)
		if current == nil {
			s.noteChange(createdReason, res.obj.GetKind(), res.obj.GetName())
		} else {
			s.noteChange(updatedReason, res.obj.GetKind(), res.obj.GetName())
		}
	}
	s.applied = append(s.applied, res.obj)
	return res.obj, nil
}

// delete deletes an object the topology made.
func (r *Reconciler) delete(ctx context.Context, s *scope, obj client.Object) error {
	if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted topology object", "kind", obj.GetObjectKind().GroupVersionKind().Kind, "name", obj.GetName())
	s.noteChange(deletedReason, obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	return nil
}

// sameObject is current when it is the object want names (same kind and
// name), else nil: want then makes a new object.
func sameObject(current, want *unstructured.Unstructured) client.Object {
	if current == nil || current.GroupVersionKind().GroupKind() != want.GroupVersionKind().GroupKind() || current.GetName() != want.GetName() {
		return nil
	}
	return current
}

// markOwned gives obj the labels of a topology-made object of Cluster c
// (and of its MachineDeployment topology deployment, when set) and puts it
// in c's namespace.
func markOwned(obj client.Object, c *clusterv1.Cluster, deployment string) {
	obj.SetNamespace(c.Namespace)
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[clusterv1.ClusterNameLabel] = c.Name
	labels[clusterv1.ClusterTopologyOwnedLabel] = ""
	if deployment != "" {
		labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] = deployment
	}
	obj.SetLabels(labels)
}

func markPoolOwned(obj client.Object, c *clusterv1.Cluster, pool string) {
	markOwned(obj, c, "")
	labels := obj.GetLabels()
	labels[clusterv1.ClusterTopologyMachinePoolNameLabel] = pool
	obj.SetLabels(labels)
}

// clusterController is the reference the Cluster controller sets on the
// infrastructure cluster and the control plane; set by the topology
// already, it leaves that controller nothing to write.
func clusterController(c *clusterv1.Cluster) metav1.OwnerReference {
	ref := clusterOwner(c)
	ref.Controller, ref.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
	return ref
}

// clusterOwner is the plain owner reference to the Cluster that the
// MachineDeployment, MachineSet and MachineHealthCheck controllers set.
func clusterOwner(c *clusterv1.Cluster) metav1.OwnerReference { return contract.ClusterOwner(c) }

// setOwner puts ref among obj's owner references, replacing one with the
// same UID.
func setOwner(obj client.Object, ref metav1.OwnerReference) {
	refs := obj.GetOwnerReferences()
	for i := range refs {
		if refs[i].UID == ref.UID {
			refs[i] = ref
			obj.SetOwnerReferences(refs)
			return
		}
	}
	obj.SetOwnerReferences(append(refs, ref))
}
