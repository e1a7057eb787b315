package machineset

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
)

// reconcileDelete deletes the set's Machines and lets the set go once they
// are gone; their deletions wake the set through the Machine watch.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	if !controllerutil.ContainsFinalizer(s.ms, clusterv1.MachineSetFinalizer) {
		return nil
	}
	if err := r.listMachines(ctx, s, false); err != nil {
		return err
	}
	if len(s.machines) == 0 {
		controllerutil.RemoveFinalizer(s.ms, clusterv1.MachineSetFinalizer)
		s.deleting = "Deletion completed"
		return nil
	}
	var going []*clusterv1.Machine
	names := make([]string, 0, len(s.machines))
	for _, m := range s.machines {
		names = append(names, m.Name)
		if m.DeletionTimestamp.IsZero() {
			going = append(going, m)
		}
	}
	s.deleting = "Waiting for " + conditions.MachineList(names) + " to be deleted"
	return r.deleteMachines(ctx, s, going, "the MachineSet is being deleted")
}
