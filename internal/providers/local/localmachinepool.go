package local

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/providers/pool"
)

// LocalMachinePoolController is the pool controller's name in logs and
// metrics.
const LocalMachinePoolController = "localmachinepool"

// poolReconciler keeps a LocalMachinePool's instances, one LocalMachine
// each (internal/providers/pool does the keeping); the Machine and
// LocalMachine controllers start them as any other local machine, and
// deleting their Machines stops them.
type poolReconciler struct {
	client client.Client
}

// poolScope is what one reconcile of a LocalMachinePool knows.
type poolScope struct {
	lmp *localv1.LocalMachinePool
	*pool.Scope
}

func (r *poolReconciler) scope(ctx context.Context, lmp *localv1.LocalMachinePool) (*poolScope, error) {
	s, err := pool.ReadScope(ctx, r.client, lmp, &localv1.LocalMachineList{}, func(list *localv1.LocalMachineList) []pool.Instance {
		out := make([]pool.Instance, 0, len(list.Items))
		for i := range list.Items {
			lm := &list.Items[i]
			out = append(out, pool.Instance{Object: lm, Provisioned: ptr.Deref(lm.Status.Initialization.Provisioned, false), ProviderID: lm.Spec.ProviderID})
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	return &poolScope{lmp: lmp, Scope: s}, nil
}

func (r *poolReconciler) run(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	lmp := s.lmp
	if !lmp.DeletionTimestamp.IsZero() {
		left, err := pool.DeleteAll(ctx, r.client, s.Instances)
		if err == nil && left == 0 {
			controllerutil.RemoveFinalizer(lmp, localv1.LocalMachinePoolFinalizer)
		}
		return ctrl.Result{}, err
	}
	if s.Cluster == nil || pause.Reconcile(s.Cluster, lmp) {
		return ctrl.Result{}, nil
	}
	controllerutil.AddFinalizer(lmp, localv1.LocalMachinePoolFinalizer)
	lmp.Status.InfrastructureMachineKind = "LocalMachine"
	if s.MachinePool.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		setPoolReady(lmp, metav1.ConditionFalse, localv1.WaitingForBootstrapReason,
			"waiting for MachinePool "+s.MachinePool.Name+" to name its bootstrap data secret")
		return ctrl.Result{}, nil
	}
	lmp.Status.Initialization.Provisioned = ptr.To(true)
	strategy := plan.PoolStrategy{
		MaxSurge:       int(ptr.Deref(lmp.Spec.Strategy.MaxSurge, 1)),
		MaxUnavailable: int(ptr.Deref(lmp.Spec.Strategy.MaxUnavailable, 0)),
	}
	st, err := pool.Sync(ctx, r.client, pool.Pool{
		Owner: lmp, OwnerAPIVersion: localv1.GroupVersion.String(), OwnerKind: "LocalMachinePool",
		MachinePool: s.MachinePool, Instances: s.Instances, Strategy: strategy,
		New: func() client.Object { return &localv1.LocalMachine{} },
	})
	lmp.Spec.ProviderIDList = st.ProviderIDList
	lmp.Status.Replicas, lmp.Status.ReadyReplicas = ptr.To(st.Replicas), ptr.To(st.Ready)
	if st.Ready < st.Replicas {
		setPoolReady(lmp, metav1.ConditionFalse, localv1.NotReadyReason, fmt.Sprintf("%d of %d instances started", st.Ready, st.Replicas))
	} else {
		setPoolReady(lmp, metav1.ConditionTrue, localv1.ReadyReason, "")
	}
	return ctrl.Result{}, err
}

func setPoolReady(lmp *localv1.LocalMachinePool, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&lmp.Status.Conditions, metav1.Condition{
		Type: localv1.ReadyCondition, Status: status, Reason: reason, Message: message, ObservedGeneration: lmp.Generation,
	})
}
