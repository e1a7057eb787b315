package plan

import "time"

// OutdatedByRolloutAfter tells whether a MachineDeployment's rollout.after
// makes a MachineSet created at setCreated out of date at now: once the
// moment has come, every set created before it is replaced. A set created in
// the same second counts as after it (API timestamps have whole seconds, and
// a set made in answer to a restart is often made within the second). The
// MachineDeployment choosing its sets and the MachineSet judging its Machines
// must agree on this, or a restart never settles.
func OutdatedByRolloutAfter(setCreated, after, now time.Time) bool {
	return !after.IsZero() && !now.Before(after) && setCreated.Before(after)
}
