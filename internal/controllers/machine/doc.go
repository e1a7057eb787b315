// Package machine reconciles Machine objects through the bootstrap →
// infrastructure → node phases of the Cluster API contract: it owns the
// Machine's bootstrap config and infrastructure machine, copies what they
// report (bootstrap data secret, providerID, addresses, failure domain),
// finds the Node by providerID in the workload cluster, keeps the Node's
// Capstan-managed labels, annotations and taints in sync, and summarises
// everything in v1beta2 conditions and a phase.
//
// Deleting a Machine is a sequence with a visible state at each step:
// pre-drain hooks, cordon and drain, volume detach, pre-terminate hooks,
// deletion of the infrastructure and bootstrap objects, deletion of the
// Node, and only then the finalizer.
package machine
