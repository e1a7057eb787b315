package inmemory

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/providers/pool"
)

// InMemoryMachinePoolController is the pool controller's name in logs and
// metrics.
const InMemoryMachinePoolController = "inmemorymachinepool"

// poolReconciler keeps an InMemoryMachinePool's instances, one
// InMemoryMachine each (internal/providers/pool does the keeping); the
// Machine and InMemoryMachine controllers boot them as any other.
type poolReconciler struct {
	client client.Client
}

// poolScope is what one reconcile of an InMemoryMachinePool knows.
type poolScope struct {
	pool *inmemoryv1.InMemoryMachinePool
	*pool.Scope
}

func (r *poolReconciler) scope(ctx context.Context, p *inmemoryv1.InMemoryMachinePool) (*poolScope, error) {
	s, err := pool.ReadScope(ctx, r.client, p, &inmemoryv1.InMemoryMachineList{}, func(list *inmemoryv1.InMemoryMachineList) []pool.Instance {
		out := make([]pool.Instance, 0, len(list.Items))
		for i := range list.Items {
			imm := &list.Items[i]
			out = append(out, pool.Instance{Object: imm, Provisioned: ptr.Deref(imm.Status.Initialization.Provisioned, false), ProviderID: imm.Spec.ProviderID})
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	return &poolScope{pool: p, Scope: s}, nil
}

func (r *poolReconciler) run(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	p := s.pool
	if !p.DeletionTimestamp.IsZero() {
		left, err := pool.DeleteAll(ctx, r.client, s.Instances)
		if err == nil && left == 0 {
			controllerutil.RemoveFinalizer(p, inmemoryv1.InMemoryMachinePoolFinalizer)
		}
		return ctrl.Result{}, err
	}
	if s.Cluster == nil || paused(s.Cluster, p) {
		return ctrl.Result{}, nil
	}
	controllerutil.AddFinalizer(p, inmemoryv1.InMemoryMachinePoolFinalizer)
	p.Status.InfrastructureMachineKind = "InMemoryMachine"
	if s.MachinePool.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		// Instances cannot boot without bootstrap data; the MachinePool's
		// update when it has some brings us back.
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
			Type: inmemoryv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "WaitingForBootstrapData", ObservedGeneration: p.Generation,
			Message: "waiting for MachinePool " + s.MachinePool.Name + " to name its bootstrap data secret",
		})
		return ctrl.Result{}, nil
	}
	p.Status.Initialization.Provisioned = ptr.To(true)
	st, err := pool.Sync(ctx, r.client, pool.Pool{
		Owner: p, OwnerAPIVersion: inmemoryv1.GroupVersion.String(), OwnerKind: "InMemoryMachinePool",
		MachinePool: s.MachinePool, Instances: s.Instances, Strategy: plan.PoolStrategy{MaxSurge: 1},
		New: func() client.Object {
			return &inmemoryv1.InMemoryMachine{Spec: inmemoryv1.InMemoryMachineSpec{Delays: p.Spec.Delays.DeepCopy()}}
		},
	})
	p.Spec.ProviderIDList = st.ProviderIDList
	p.Status.Replicas, p.Status.ReadyReplicas = ptr.To(st.Replicas), ptr.To(st.Ready)
	cond := metav1.Condition{Type: inmemoryv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: inmemoryv1.ReadyReason, ObservedGeneration: p.Generation,
		Message: fmt.Sprintf("%d of %d instances booted", st.Ready, st.Replicas)}
	if st.Ready < st.Replicas {
		cond.Status, cond.Reason = metav1.ConditionFalse, "Booting"
	}
	meta.SetStatusCondition(&p.Status.Conditions, cond)
	return ctrl.Result{}, err
}
