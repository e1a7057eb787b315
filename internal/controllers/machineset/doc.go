// Package machineset reconciles MachineSets: it keeps spec.replicas Machines
// of the set's template, cloning the infrastructure and bootstrap templates
// for each new Machine; adopts matching Machines that nobody controls; deletes
// the most dispensable Machines when there are too many (plan.MachinesToDelete)
// and the Machines a MachineHealthCheck asked it to remediate; propagates
// labels, annotations and the fields that need no new Machine to existing
// Machines in place; tells each Machine whether it is up to date; and reports
// counters and v1beta2 conditions. A finalizer keeps a deleted MachineSet
// until its Machines are gone.
//
// Writes are few: one patch of the MachineSet's metadata and spec and one of
// its status per reconcile at most, merge patches of Machines only when
// something changed, and the Machines' UpToDate condition through a
// server-side apply that touches no other condition.
package machineset
