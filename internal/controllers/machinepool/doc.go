// Package machinepool reconciles MachinePools: groups of machines that one
// provider object, the infrastructure machine pool (a cloud's scale set, or
// Capstan's InMemoryMachinePool and LocalMachinePool), creates and scales
// itself.
//
// The core's share, as the v1beta2 contract splits it: it makes the pool the
// controller of the bootstrap config and the infrastructure pool its
// template names (the user creates both), copies the bootstrap data
// secret's name into spec.template.spec.bootstrap.dataSecretName for the
// provider to boot instances with, and reads back through internal/contract
// what the provider reports: provisioned, spec.providerIDList,
// status.replicas. It finds the Nodes of those provider IDs in the workload
// cluster (status.nodeRefs) and reports replicas, conditions and the phase.
//
// A provider that reports status.infrastructureMachineKind makes one
// infrastructure machine per instance, labelled cluster.x-k8s.io/pool-name;
// for each the pool creates a Machine of the same name, so that health
// checks, drain and describe treat pool members as any Machine. The
// provider decides which instances go: it deletes their Machines, and the
// Machine controller drains the Node and deletes the infrastructure machine.
// A Machine whose infrastructure machine vanished is deleted here; one a
// MachineHealthCheck marked for remediation too, for the provider to
// replace.
//
// Deleting a MachinePool deletes its Machines first (their Nodes are
// drained by the Machine controller) or, without Machines, drains its Nodes
// itself; then the infrastructure pool and bootstrap config, and last the
// Nodes left in the workload cluster.
package machinepool
