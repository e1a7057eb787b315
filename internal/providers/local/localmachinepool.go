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

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/kit"
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
	// mp is the owning MachinePool, nil once it is gone; cluster its
	// Cluster.
	mp        *clusterv1.MachinePool
	cluster   *clusterv1.Cluster
	instances []pool.Instance
}

func (r *poolReconciler) scope(ctx context.Context, lmp *localv1.LocalMachinePool) (*poolScope, error) {
	mp, err := pool.OwningMachinePool(ctx, r.client, lmp)
	if err != nil {
		return nil, err
	}
	if mp == nil && lmp.DeletionTimestamp.IsZero() {
		return nil, kit.NotYet(0) // the MachinePool controller takes control, which brings us back
	}
	s := &poolScope{lmp: lmp, mp: mp}
	if mp != nil {
		if s.cluster, err = kit.GetCluster(ctx, r.client, lmp.Namespace, mp.Spec.ClusterName); err != nil {
			return nil, err
		}
	}
	list := &localv1.LocalMachineList{}
	if err := r.client.List(ctx, list, client.InNamespace(lmp.Namespace), client.HasLabels{clusterv1.MachinePoolNameLabel}); err != nil {
		return nil, err
	}
	for i := range list.Items {
		lm := &list.Items[i]
		if pool.OwnedBy(lm, lmp) {
			s.instances = append(s.instances, pool.Instance{
				Object: lm, Provisioned: ptr.Deref(lm.Status.Initialization.Provisioned, false), ProviderID: lm.Spec.ProviderID,
			})
		}
	}
	return s, nil
}

func (r *poolReconciler) run(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	lmp := s.lmp
	if !lmp.DeletionTimestamp.IsZero() {
		left, err := pool.DeleteAll(ctx, r.client, s.instances)
		if err == nil && left == 0 {
			controllerutil.RemoveFinalizer(lmp, localv1.LocalMachinePoolFinalizer)
		}
		return ctrl.Result{}, err
	}
	if s.cluster == nil || pause.Reconcile(s.cluster, lmp) {
		return ctrl.Result{}, nil
	}
	controllerutil.AddFinalizer(lmp, localv1.LocalMachinePoolFinalizer)
	lmp.Status.InfrastructureMachineKind = "LocalMachine"
	if s.mp.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		setPoolReady(lmp, metav1.ConditionFalse, localv1.WaitingForBootstrapReason,
			"waiting for MachinePool "+s.mp.Name+" to name its bootstrap data secret")
		return ctrl.Result{}, nil
	}
	lmp.Status.Initialization.Provisioned = ptr.To(true)
	strategy := plan.PoolStrategy{
		MaxSurge:       int(ptr.Deref(lmp.Spec.Strategy.MaxSurge, 1)),
		MaxUnavailable: int(ptr.Deref(lmp.Spec.Strategy.MaxUnavailable, 0)),
	}
	st, err := pool.Sync(ctx, r.client, pool.Pool{
		Owner: lmp, OwnerAPIVersion: localv1.GroupVersion.String(), OwnerKind: "LocalMachinePool",
		MachinePool: s.mp, Instances: s.instances, Strategy: strategy,
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
