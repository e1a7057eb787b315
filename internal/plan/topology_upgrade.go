package plan

// TopologyUpgradeInput is what the topology's upgrade decision reads: the
// version the topology asks for and where each part of the cluster is.
type TopologyUpgradeInput struct {
	// Version is spec.topology.version.
	Version string
	// KubernetesVersions is the class's spec.kubernetesVersions: when it is
	// set, an upgrade across minors goes through each minor it lists.
	KubernetesVersions []string
	ControlPlane       ControlPlaneVersionState
	// MachineDeployments and MachinePools are in the topology's order.
	MachineDeployments []WorkerVersionState
	MachinePools       []WorkerVersionState
	// Concurrency is the Cluster's upgrade-concurrency annotation (1 when unset).
	Concurrency int
}

// ControlPlaneVersionState is the control plane as the decision sees it.
type ControlPlaneVersionState struct {
	// Exists is false until the control plane object is created.
	Exists bool
	// Version is the control plane's spec.version.
	Version string
	// Upgrading is true while its Machines are not all at Version (a
	// rollout or scale in progress).
	Upgrading bool
}

// WorkerVersionState is one MachineDeployment or MachinePool of the topology.
type WorkerVersionState struct {
	// Name is the topology's name for it (workers.machineDeployments[].name).
	Name string
	// Exists is false until the object is created.
	Exists bool
	// Version is its spec.template.spec.version.
	Version string
	// Upgrading is true while its Machines are not all at Version.
	Upgrading bool
	// Hold and Defer are the hold-upgrade-sequence and defer-upgrade annotations.
	Hold, Defer bool
}

// TopologyUpgrade is the decision: the version to write on each part now.
type TopologyUpgrade struct {
	ControlPlaneVersion string
	// MachineDeployments and MachinePools map a topology name to the
	// version to write (for one not created yet: the version to create it at).
	MachineDeployments map[string]string
	MachinePools       map[string]string
	// Reason and Message explain what waits, for the TopologyReconciled
	// condition (empty when nothing does).
	Reason, Message string
}

// PlanTopologyUpgrade decides which versions a topology writes now.
func PlanTopologyUpgrade(in TopologyUpgradeInput) TopologyUpgrade {
	panic("plan.PlanTopologyUpgrade: not written yet")
}
