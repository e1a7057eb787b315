// Package cluster reconciles Cluster objects: it owns the infrastructure
// cluster and the control plane the Cluster references, mirrors what they
// report into the Cluster's status (provisioning, the control plane
// endpoint, failure domains, replica counters), summarises everything in
// v1beta2 conditions and a phase, and deletes the cluster in order —
// workers, then the control plane, then the infrastructure — before its
// finalizer goes.
package cluster
