package machinedeployment

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// reconcileDelete deletes the MachineDeployment's MachineSets (whose own
// deletion takes their Machines) and lets the MachineDeployment go once none
// is left. Watches on the sets and their Machines bring the next pass.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	md := s.md
	if !controllerutil.ContainsFinalizer(md, clusterv1.MachineDeploymentFinalizer) {
		s.deleting = "waiting for the garbage collector"
		return nil
	}
	if err := r.readMachineSets(ctx, s, false); err != nil {
		return err
	}
	for _, ms := range s.sets {
		if !ms.DeletionTimestamp.IsZero() {
			continue
		}
		switch err := r.Client.Delete(ctx, ms, client.Preconditions{UID: &ms.UID}); {
		case err == nil:
			r.event(md, "Normal", "SuccessfulDelete", "Delete", fmt.Sprintf("Deleted MachineSet %s: the MachineDeployment is being deleted", ms.Name))
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			return fmt.Errorf("deleting MachineSet %s: %w", ms.Name, err)
		}
	}

	machines := int32(len(s.allMachines))
	for _, ms := range s.sets {
		machines = max(machines, ptr.Deref(ms.Status.Replicas, 0))
	}
	switch {
	case machines > 0:
		s.deleting = fmt.Sprintf("Deleting %d %s", machines, plural(int(machines), "Machine"))
	case len(s.sets) > 0:
		s.deleting = fmt.Sprintf("Deleting %d %s", len(s.sets), plural(len(s.sets), "MachineSet"))
	default:
		s.deleting = "Deletion completed"
		controllerutil.RemoveFinalizer(md, clusterv1.MachineDeploymentFinalizer)
	}
	return nil
}
