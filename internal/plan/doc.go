// Package plan holds the decisions Capstan's controllers make that matter
// most, as pure functions over plain data: how a MachineDeployment rolls out
// (PlanRollout), which Machines a MachineSet deletes when it scales down
// (MachinesToDelete), in what order a Cluster's descendants are deleted
// (NextClusterDeletionStep), which Machines a MachineHealthCheck finds
// unhealthy and whether it may have them remediated (DecideHealth), which
// objects of a Machine its owner must create after a crash between creating
// the Machine and them (MachineObjects.ObjectsToCreate), which resources of
// a ClusterResourceSet go to which Clusters (PlanAddons), how a machine
// pool's instances are scaled and replaced (NextPoolStep) and matched with
// Machines (PoolMachines), and how a group's Machines count by Kubernetes
// version for its status (CountVersions).
//
// Nothing here does I/O, talks to an API server, or reads the clock; time,
// when it matters, is an input. A reconciler gathers the state, asks for a
// plan, and applies it. Keeping the decisions apart lets them be tested
// exhaustively, by tables and by simulations that check their invariants,
// and makes each one deterministic: the same state always gives the same
// plan, so a reconciler that runs twice, or is killed half way, does no harm.
package plan
