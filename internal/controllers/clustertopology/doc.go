// Package clustertopology reconciles the managed topology of Clusters with
// spec.topology: it reads the ClusterClass, the templates the class
// references and what exists of the topology, has package
// internal/topology/desired compute the objects the topology wants, and
// makes them so with server-side applies under one field manager
// (FieldManager).
//
// What it writes, and when:
//   - an object only when its cached copy lacks a value the topology sets,
//     or holds a field the topology once set and no longer does (compare.go):
//     a topology that changed nothing costs no request;
//   - in dependency order: the infrastructure cluster, the control plane's
//     machine template and the control plane, the Cluster's references to
//     them, then each MachineDeployment with its templates and health check;
//   - templates are not edited in place: one whose spec must change is
//     replaced by a new one under a new name, and removed once neither the
//     control plane, a MachineDeployment nor any MachineSet references it;
//   - MachineDeployments and MachinePools the topology no longer lists are
//     deleted with their health checks (and the pool's objects);
//   - of the Cluster's status, only TopologyReconciled and the upgrade
//     plans, which the Cluster controller leaves alone.
//
// The Cluster controller keeps its part: it claims the infrastructure
// cluster and control plane, reports on them, and deletes a Cluster's
// descendants in order; this controller removes, on deletion, what only a
// topology has (health checks, templates).
package clustertopology
