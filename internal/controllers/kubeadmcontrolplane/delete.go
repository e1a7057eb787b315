package kubeadmcontrolplane

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/index"
)

// reconcileDelete removes the control plane once the cluster's workers are
// gone: a worker drained after its API servers went would hang.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	if s.cluster != nil {
		workers := &clusterv1.MachineList{}
		if err := r.Client.List(ctx, workers, index.InCluster(s.kcp.Namespace, s.cluster.Name)...); err != nil {
			return err
		}
		var names []string
		for _, m := range workers.Items {
			if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; !cp {
				names = append(names, m.Name)
			}
		}
		if len(names) > 0 {
			s.deleting = fmt.Sprintf("waiting for %d worker Machines to be deleted: %s", len(names), strings.Join(names, ", "))
			return nil
		}
	}
	if len(s.machines) == 0 && s.cluster != nil {
		if err := r.readMachines(ctx, s); err != nil {
			return err
		}
	}
	var left []string
	for _, m := range s.machines {
		left = append(left, m.machine.Name)
		if m.machine.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, m.machine, client.Preconditions{UID: ptr.To(m.machine.UID)}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	if len(left) > 0 {
		s.deleting = fmt.Sprintf("waiting for %d control-plane Machines to be deleted: %s", len(left), strings.Join(left, ", "))
		return nil
	}
	controllerutil.RemoveFinalizer(s.kcp, controlplanev1.KubeadmControlPlaneFinalizer)
	return nil
}
