package machineset

import (
	"context"
	"time"

	"capstan.dev/capstan/internal/machinecreate"
)

// repairClones creates the bootstrap and infrastructure objects of the
// set's Machines that were never created: the set creates a Machine first
// and its objects right after, so a manager stopped in between, or a create
// that failed, leaves a Machine whose references name nothing.
// plan.MachineObjects says which objects qualify: only what this set itself
// would clone now, for a Machine it created (not one it adopted, whose
// objects are the user's to create) that is neither being deleted nor
// provisioned. Nothing is repaired while the Cluster is being deleted.
func (r *Reconciler) repairClones(ctx context.Context, s *scope) (time.Duration, error) {
	if !s.machinesRead || !s.cluster.DeletionTimestamp.IsZero() {
		return 0, nil
	}
	owned := make([]machinecreate.Owned, len(s.machines))
	for i, m := range s.machines {
		owned[i] = machinecreate.Owned{Machine: m, Adopting: s.adopt[m.Name]}
	}
	repaired, err := r.creator().Repair(ctx, owned, r.makers(s), machinecreate.InCache{Resolver: r.Resolver, Cache: r.clones})
	for _, f := range repaired.Failed {
		s.repairErr = f.Err
		r.event(s.ms, f.Machine, "Warning", "FailedCreate", "Create", "Failed to create the missing objects of Machine %s: %v", f.Machine.Name, f.Err)
	}
	return 0, err
}
