package desired

import (
	"strconv"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
)

// upgradeInput is what the version decision needs, read from the Cluster,
// its class and the current objects.
func upgradeInput(in Input) plan.TopologyUpgradeInput {
	topology := in.Cluster.Spec.Topology
	out := plan.TopologyUpgradeInput{
		Version:            topology.Version,
		KubernetesVersions: in.Class.Spec.KubernetesVersions,
		Concurrency:        upgradeConcurrency(in.Cluster),
	}
	out.ControlPlane = controlPlaneVersionState(in.Current.ControlPlane)

	for _, md := range topology.Workers.MachineDeployments {
		state := workerVersionState(md.Name, md.Metadata)
		if c := in.Current.MachineDeployments[md.Name]; c != nil && c.Object != nil {
			setCurrent(&state, c.Object.Name, c.Object.Spec.Template.Spec.Version, c.Object.Status.Versions)
		}
		out.MachineDeployments = append(out.MachineDeployments, state)
	}
	for _, mp := range topology.Workers.MachinePools {
		state := workerVersionState(mp.Name, mp.Metadata)
		if c := in.Current.MachinePools[mp.Name]; c != nil && c.Object != nil {
			setCurrent(&state, c.Object.Name, c.Object.Spec.Template.Spec.Version, c.Object.Status.Versions)
		}
		out.MachinePools = append(out.MachinePools, state)
	}
	return out
}

// workerVersionState is a worker as the version decision sees it before it
// exists. The upgrade annotations are read from the topology (they are never
// copied to the objects).
func workerVersionState(name string, meta clusterv1.ObjectMeta) plan.WorkerVersionState {
	return plan.WorkerVersionState{
		Name:  name,
		Hold:  hasAnnotation(meta, clusterv1.ClusterTopologyHoldUpgradeSequenceAnnotation),
		Defer: hasAnnotation(meta, clusterv1.ClusterTopologyDeferUpgradeAnnotation),
	}
}

// setCurrent records an existing worker: its name, version, and whether its
// Machines (counted by version in its status) are not all there yet.
func setCurrent(w *plan.WorkerVersionState, objectName, version string, machines []clusterv1.StatusVersion) {
	w.Exists, w.ObjectName, w.Version = true, objectName, version
	w.Upgrading = notAllAt(machines, version)
}

// upgradeConcurrency is the Cluster's upgrade-concurrency annotation; 1 when
// it is unset or not a positive number.
func upgradeConcurrency(cluster *clusterv1.Cluster) int {
	if n, err := strconv.Atoi(cluster.Annotations[clusterv1.ClusterTopologyUpgradeConcurrencyAnnotation]); err == nil && n > 0 {
		return n
	}
	return 1
}

func hasAnnotation(meta clusterv1.ObjectMeta, key string) bool {
	_, ok := meta.Annotations[key]
	return ok
}

// notAllAt tells whether some Machines (counted by version in a status) are
// not at version yet.
func notAllAt(versions []clusterv1.StatusVersion, version string) bool {
	for _, v := range versions {
		if v.Version != version {
			return true
		}
	}
	return false
}

// controlPlaneVersion is the version the decision gives the control plane;
// without one it keeps the version it has, or, when new, gets the
// topology's.
func controlPlaneVersion(in Input, decided string) string {
	if decided != "" {
		return decided
	}
	if current := controlPlaneVersionState(in.Current.ControlPlane).Version; current != "" {
		return current
	}
	return in.Cluster.Spec.Topology.Version
}

// workerVersion is the version the decision gives a worker; an existing one
// it does not mention keeps the version it has.
func workerVersion(in Input, decided map[string]string, name, current string) string {
	if v, ok := decided[name]; ok && v != "" {
		return v
	}
	if current != "" {
		return current
	}
	return in.Cluster.Spec.Topology.Version
}

func currentDeploymentVersion(in Input, name string) string {
	if md := in.Current.MachineDeployments[name]; md != nil && md.Object != nil {
		return md.Object.Spec.Template.Spec.Version
	}
	return ""
}

func currentPoolVersion(in Input, name string) string {
	if mp := in.Current.MachinePools[name]; mp != nil && mp.Object != nil {
		return mp.Object.Spec.Template.Spec.Version
	}
	return ""
}
