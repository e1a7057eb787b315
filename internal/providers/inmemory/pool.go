package inmemory

import (
	"context"
	"errors"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/plan"
)

// InMemoryMachinePoolController is the pool controller's name in logs and
// metrics.
const InMemoryMachinePoolController = "inmemorymachinepool"

// poolVersionAnnotation records on an instance the Kubernetes version its
// pool asked for when the instance was made: an instance of another version
// is replaced.
const poolVersionAnnotation = "infrastructure.capstan.dev/pool-version"

// poolReconciler keeps an InMemoryMachinePool's instances: one
// InMemoryMachine per instance, labelled with the MachinePool's name, for
// which the core creates Machines; the Machine and InMemoryMachine
// controllers then boot them as any other.
type poolReconciler struct {
	client client.Client
}

// poolScope is what one reconcile of an InMemoryMachinePool knows.
type poolScope struct {
	pool *inmemoryv1.InMemoryMachinePool
	// mp is the owning MachinePool; nil once it is gone.
	mp      *clusterv1.MachinePool
	cluster *clusterv1.Cluster
	// instances are the pool's InMemoryMachines, with the Machines the core
	// made for them by name.
	instances []inmemoryv1.InMemoryMachine
	machines  map[string]*clusterv1.Machine
}

func (r *poolReconciler) scope(ctx context.Context, pool *inmemoryv1.InMemoryMachinePool) (*poolScope, error) {
	name := ownerName(pool, clusterv1.MachinePoolKind)
	if name == "" {
		return nil, kit.NotYet(0) // the MachinePool controller sets the owner, which brings us back
	}
	s := &poolScope{pool: pool}
	mp := &clusterv1.MachinePool{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: name}, mp); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		mp = nil
	}
	s.mp = mp
	if mp != nil {
		cluster, err := kit.GetCluster(ctx, r.client, pool.Namespace, mp.Spec.ClusterName)
		if err != nil {
			return nil, err
		}
		s.cluster = cluster
	}
	return s, nil
}

// readInstances lists the pool's InMemoryMachines and their Machines.
func (r *poolReconciler) readInstances(ctx context.Context, s *poolScope) error {
	if s.mp == nil {
		return nil
	}
	list := &inmemoryv1.InMemoryMachineList{}
	sel := client.MatchingLabels{clusterv1.MachinePoolNameLabel: contract.LabelValue(s.mp.Name), clusterv1.ClusterNameLabel: s.mp.Spec.ClusterName}
	if err := r.client.List(ctx, list, client.InNamespace(s.pool.Namespace), sel); err != nil {
		return err
	}
	s.instances = list.Items
	machines := &clusterv1.MachineList{}
	if err := r.client.List(ctx, machines, client.InNamespace(s.pool.Namespace), sel); err != nil {
		return err
	}
	s.machines = map[string]*clusterv1.Machine{}
	for i := range machines.Items {
		s.machines[machines.Items[i].Name] = &machines.Items[i]
	}
	return nil
}

func (r *poolReconciler) run(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	pool := s.pool
	if err := r.readInstances(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.delete(ctx, s)
	}
	if s.mp == nil || s.cluster == nil || paused(s.cluster, pool) {
		return ctrl.Result{}, nil
	}
	controllerutil.AddFinalizer(pool, inmemoryv1.InMemoryMachinePoolFinalizer)
	pool.Status.InfrastructureMachineKind = "InMemoryMachine"
	if s.mp.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		// Instances cannot boot without bootstrap data; the MachinePool's
		// update when it has some brings us back.
		meta.SetStatusCondition(&pool.Status.Conditions, metav1.Condition{
			Type: inmemoryv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "WaitingForBootstrapData", ObservedGeneration: pool.Generation,
			Message: "waiting for MachinePool " + s.mp.Name + " to name its bootstrap data secret",
		})
		return ctrl.Result{}, nil
	}
	pool.Status.Initialization.Provisioned = ptr.To(true)

	want := int(ptr.Deref(s.mp.Spec.Replicas, 0))
	if !s.mp.DeletionTimestamp.IsZero() {
		want = 0
	}
	step := plan.NextPoolStep(poolInstances(s), want, plan.PoolStrategy{MaxSurge: 1})
	var errs []error
	for i := 0; i < step.Create; i++ {
		imm, err := r.createInstance(ctx, s)
		if err != nil {
			errs = append(errs, err)
			break
		}
		s.instances = append(s.instances, *imm)
	}
	for _, name := range step.Delete {
		if err := r.deleteInstance(ctx, s, name); err != nil {
			errs = append(errs, err)
		}
	}
	report(s)
	return ctrl.Result{}, errors.Join(errs...)
}

// poolInstances is what plan.NextPoolStep needs of the instances.
func poolInstances(s *poolScope) []plan.PoolInstance {
	out := make([]plan.PoolInstance, 0, len(s.instances))
	for i := range s.instances {
		imm := &s.instances[i]
		in := plan.PoolInstance{
			Name:     imm.Name,
			UpToDate: imm.Annotations[poolVersionAnnotation] == s.mp.Spec.Template.Spec.Version,
			Ready:    ptr.Deref(imm.Status.Initialization.Provisioned, false),
			Deleting: !imm.DeletionTimestamp.IsZero(),
		}
		if m := s.machines[imm.Name]; m != nil {
			_, in.DeleteAnnotation = m.Annotations[clusterv1.DeleteMachineAnnotation]
			in.Ready = in.Ready && conditions.IsTrue(m, clusterv1.ReadyCondition)
			in.Deleting = in.Deleting || !m.DeletionTimestamp.IsZero()
			if c := conditions.Get(m, clusterv1.HealthCheckSucceededCondition); c != nil && c.Status == metav1.ConditionFalse {
				in.Unhealthy = true
			}
		}
		out = append(out, in)
	}
	return out
}

// createInstance makes one InMemoryMachine for the pool. The API server
// picks the name's suffix; a create whose answer is lost makes one too
// many, which the next step sheds.
func (r *poolReconciler) createInstance(ctx context.Context, s *poolScope) (*inmemoryv1.InMemoryMachine, error) {
	pool, mp := s.pool, s.mp
	imm := &inmemoryv1.InMemoryMachine{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: mp.Name + "-",
			Namespace:    pool.Namespace,
			Labels: map[string]string{
				clusterv1.MachinePoolNameLabel: contract.LabelValue(mp.Name),
				clusterv1.ClusterNameLabel:     mp.Spec.ClusterName,
			},
			Annotations: map[string]string{poolVersionAnnotation: mp.Spec.Template.Spec.Version},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: inmemoryv1.GroupVersion.String(), Kind: "InMemoryMachinePool", Name: pool.Name, UID: pool.UID,
			}},
		},
		Spec: inmemoryv1.InMemoryMachineSpec{Delays: pool.Spec.Delays.DeepCopy()},
	}
	if err := r.client.Create(ctx, imm, client.FieldOwner(fieldManager)); err != nil {
		return nil, fmt.Errorf("creating an InMemoryMachine for pool %s: %w", pool.Name, err)
	}
	return imm, nil
}

// deleteInstance removes one instance: through its Machine when it has
// one, so that its Node is drained first and the Machine controller deletes
// the InMemoryMachine; directly otherwise.
func (r *poolReconciler) deleteInstance(ctx context.Context, s *poolScope, name string) error {
	var obj client.Object
	if m := s.machines[name]; m != nil {
		obj = m
	} else {
		for i := range s.instances {
			if s.instances[i].Name == name {
				obj = &s.instances[i]
			}
		}
	}
	if obj == nil {
		return nil
	}
	if err := r.client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting instance %s of pool %s: %w", name, s.pool.Name, err)
	}
	obj.SetDeletionTimestamp(ptr.To(metav1.Now()))
	return nil
}

// delete removes the pool's instances left (normally the core deleted
// their Machines, and so them, before the pool) and lets the pool go once
// none is.
func (r *poolReconciler) delete(ctx context.Context, s *poolScope) error {
	left := 0
	for i := range s.instances {
		imm := &s.instances[i]
		left++
		if !imm.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.client.Delete(ctx, imm); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if left == 0 {
		controllerutil.RemoveFinalizer(s.pool, inmemoryv1.InMemoryMachinePoolFinalizer)
	}
	return nil
}

// report records the instances in the pool's spec and status: every
// instance in status.replicas, the booted ones' provider IDs in
// spec.providerIDList (sorted, so that it changes only when they do).
func report(s *poolScope) {
	pool := s.pool
	var ids []string
	var replicas, ready int32
	for i := range s.instances {
		imm := &s.instances[i]
		if !imm.DeletionTimestamp.IsZero() {
			continue
		}
		replicas++
		if ptr.Deref(imm.Status.Initialization.Provisioned, false) && imm.Spec.ProviderID != "" {
			ready++
			ids = append(ids, imm.Spec.ProviderID)
		}
	}
	sort.Strings(ids)
	pool.Spec.ProviderIDList = ids
	pool.Status.Replicas = ptr.To(replicas)
	pool.Status.ReadyReplicas = ptr.To(ready)
	cond := metav1.Condition{Type: inmemoryv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: inmemoryv1.ReadyReason, ObservedGeneration: pool.Generation,
		Message: fmt.Sprintf("%d of %d instances booted", ready, replicas)}
	if ready < replicas {
		cond.Status, cond.Reason = metav1.ConditionFalse, "Booting"
	}
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
}

// poolMemberToPool wakes the InMemoryMachinePool of the MachinePool an
// InMemoryMachine or Machine is labelled with.
func (r *poolReconciler) poolMemberToPool(ctx context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[clusterv1.MachinePoolNameLabel]
	if name == "" {
		return nil
	}
	mp := &clusterv1.MachinePool{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, mp); err != nil {
		return nil
	}
	return machinePoolToInMemoryMachinePool(ctx, mp)
}

func machinePoolToInMemoryMachinePool(_ context.Context, obj client.Object) []reconcile.Request {
	mp, ok := obj.(*clusterv1.MachinePool)
	if !ok || !isInMemoryRef(mp.Spec.Template.Spec.InfrastructureRef, "InMemoryMachinePool") {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: mp.Namespace, Name: mp.Spec.Template.Spec.InfrastructureRef.Name}}}
}
