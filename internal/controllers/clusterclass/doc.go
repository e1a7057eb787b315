// Package clusterclass reconciles ClusterClasses. It resolves each template
// the class points at through the contract label of the template's CRD,
// makes the class an owner of those templates (so that clusterctl move
// carries them along and deleting the class lets the garbage collector take
// them), reports in RefVersionsUpToDate the references whose apiVersion is
// behind the version the CRD's contract label names, and gathers the class's
// variable definitions into status.variables, with VariablesReady naming a
// definition that is broken. The Cluster admission webhook and the topology
// controller read status.variables, never spec.variables.
//
// Writes are few: one merge patch of a template's owner references when the
// class is not among them yet, and one status patch per reconcile at most,
// only when something changed.
package clusterclass
