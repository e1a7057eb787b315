// Package machinedeployment reconciles MachineDeployments: it keeps one
// MachineSet per Machine template, moves replicas from old sets to the
// up-to-date one as plan.PlanRollout decides (RollingUpdate within maxSurge
// and maxUnavailable, OnDelete, rollout.after, paused rollouts), numbers the
// sets by revision and keeps a short history of old ones for rollbacks,
// propagates the fields that need no new Machines in place, and reports
// counters, conditions and a phase.
//
// The controller manages MachineSets only; the MachineSet controller makes
// their Machines. Its reads come from the cache, every write is a merge patch
// of fields it owns, and the status is written at most once per reconcile.
//
// # Rollbacks
//
// There is no rollback field in the v1beta2 API. A rollback is a template
// change: putting an old revision's template back into spec.template makes
// that revision's MachineSet (if it is still kept) the up-to-date one again,
// and the rollout moves replicas to it under the same limits as any other
// rollout; the set is then given the next revision number. RollbackTemplate
// finds the template of a revision for a client such as
// `capstan alpha rollout undo`.
package machinedeployment
