// Package describe turns a Cluster and the objects that belong to it into
// the status tree of `capstan describe cluster`: the Cluster, for a managed
// Cluster its topology (the ClusterClass, the version and the
// TopologyReconciled condition), its infrastructure, its control plane and
// that plane's Machines, then the
// workers (each MachineDeployment, optionally its MachineSets, and their
// Machines) and the Machines nothing else owns. Each row says how many
// replicas are available, ready and up to date, and the one condition that
// summarises the object, with its reason, age and message.
//
// The package is pure: Build works on objects already read and Render on a
// given clock, so the output is the same for the same input and golden
// files can pin it down. Fetching the objects is the command's job.
//
// The tree favours a glance over detail, as `clusterctl describe cluster`
// does: Machines in the same state are collapsed into one row (Grouping), a
// Machine's infrastructure machine and bootstrap config are shown only when
// their state differs from the Machine's (Echo shows them always), and
// conditions besides the summary are listed only for the objects asked for
// (ShowConditions).
package describe
