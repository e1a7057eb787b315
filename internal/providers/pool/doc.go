// Package pool is the part of an infrastructure machine pool's controller
// that Capstan's providers share: keeping a MachinePool's instances, one
// infrastructure machine each (InMemoryMachines for the in-memory pool,
// LocalMachines for the local one), as many as the MachinePool wants and
// made from its current revision (version and bootstrap data).
//
// A provider lists its instances and says how to make a new one; Sync asks
// plan.NextPoolStep what to do and does it: it creates instances labelled
// with the pool's name (the core then creates a Machine for each, and the
// provider's machine controller boots it) and removes instances by deleting
// their Machines, so that the Machine controller drains their Nodes first
// and then deletes the infrastructure machine. What it returns goes into
// the provider pool's spec.providerIDList and status.
package pool
