// Package machinehealthcheck reconciles MachineHealthChecks: it finds the
// Machines a health check watches (those of its Cluster that its selector
// picks and that a MachineSet or the control plane controls), reads their
// Nodes in the workload cluster, and lets plan.DecideHealth judge them.
// Unhealthy Machines get HealthCheckSucceeded=False and, unless the
// remediation trigger short-circuits, OwnerRemediated=False for their owner
// to act on (or an external remediation request from the health check's
// template). Those Machine conditions are written by server-side apply of
// exactly those condition types, under this controller's own field manager,
// so they never touch what other controllers own. The controller asks to be
// woken exactly when the next pending timeout fires; it never polls.
package machinehealthcheck
