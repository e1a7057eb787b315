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
		// The upgrade annotations are read from the topology (they are
		// never copied to the objects).
		state := plan.WorkerVersionState{Name: md.Name, Hold: hasAnnotation(md.Metadata, clusterv1.ClusterTopologyHoldUpgradeSequenceAnnotation), Defer: hasAnnotation(md.Metadata, clusterv1.ClusterTopologyDeferUpgradeAnnotation)}
		if current := in.Current.MachineDeployments[md.Name]; current != nil && current.Object != nil {
			state.Exists = true
			state.ObjectName = current.Object.Name
			state.Version = current.Object.Spec.Template.Spec.Version
			state.Upgrading = notAllAt(current.Object.Status.Versions, state.Version)
		}
		out.MachineDeployments = append(out.MachineDeployments, state)
	}
	for _, mp := range topology.Workers.MachinePools {
		state := plan.WorkerVersionState{Name: mp.Name, Hold: hasAnnotation(mp.Metadata, clusterv1.ClusterTopologyHoldUpgradeSequenceAnnotation), Defer: hasAnnotation(mp.Metadata, clusterv1.ClusterTopologyDeferUpgradeAnnotation)}
		if current := in.Current.MachinePools[mp.Name]; current != nil && current.Object != nil {
			state.Exists = true
			state.ObjectName = current.Object.Name
			state.Version = current.Object.Spec.Template.Spec.Version
			state.Upgrading = notAllAt(current.Object.Status.Versions, state.Version)
		}
		out.MachinePools = append(out.MachinePools, state)
	}
	return out
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
