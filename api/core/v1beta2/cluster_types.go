package v1beta2

import (
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ClusterKind is the kind name of Cluster.
const ClusterKind = "Cluster"

// ClusterSpec is what the user wants a Cluster to be.
// +kubebuilder:validation:MinProperties=1
type ClusterSpec struct {
	// paused stops all controllers from acting on the Cluster and on every
	// object that belongs to it.
	// +optional
	Paused *bool `json:"paused,omitempty"`

	// clusterNetwork is the network layout of the workload cluster.
	// +optional
	ClusterNetwork ClusterNetwork `json:"clusterNetwork,omitempty,omitzero"`

	// controlPlaneEndpoint is where the workload cluster's API server answers.
	// Usually filled in by the infrastructure or control plane provider.
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// controlPlaneRef points at the provider object that runs the control
	// plane, for example a KubeadmControlPlane.
	// +optional
	ControlPlaneRef ContractVersionedObjectReference `json:"controlPlaneRef,omitempty,omitzero"`

	// infrastructureRef points at the provider object that holds the
	// cluster-wide infrastructure, for example a DockerCluster.
	// +optional
	InfrastructureRef ContractVersionedObjectReference `json:"infrastructureRef,omitempty,omitzero"`

	// topology makes the Cluster managed from a ClusterClass: the control
	// plane and worker objects are generated from the class and kept in sync.
	// +optional
	Topology Topology `json:"topology,omitempty,omitzero"`

	// availabilityGates lists extra conditions that must be good before the
	// Cluster's Available condition is True. When unset on a Cluster with a
	// topology, the gates of its ClusterClass apply.
	// +optional
	// +listType=map
	// +listMapKey=conditionType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	AvailabilityGates []ClusterAvailabilityGate `json:"availabilityGates,omitempty"`
}

// ClusterAvailabilityGate names a Cluster condition that must be good before
// the Cluster counts as Available.
type ClusterAvailabilityGate struct {
	// conditionType is the type of a condition in the Cluster's
	// status.conditions. A missing condition counts as Unknown.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`
	ConditionType string `json:"conditionType,omitempty"`

	// polarity tells whether the condition is good when True (Positive, the
	// default) or when False (Negative).
	// +optional
	Polarity ConditionPolarity `json:"polarity,omitempty"`
}

// Topology describes a Cluster managed from a ClusterClass.
type Topology struct {
	// classRef names the ClusterClass the Cluster is built from.
	// +required
	ClassRef ClusterClassRef `json:"classRef,omitempty,omitzero"`

	// version is the Kubernetes version of the whole cluster, for example v1.33.1.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-+][-0-9a-zA-Z_.+]*)?$`
	Version string `json:"version,omitempty"`

	// controlPlane holds the control plane settings that override the class.
	// +optional
	ControlPlane ControlPlaneTopology `json:"controlPlane,omitempty,omitzero"`

	// workers lists the worker node groups of the cluster.
	// +optional
	Workers WorkersTopology `json:"workers,omitempty,omitzero"`

	// variables are values for the variables the ClusterClass declares; its
	// patches use them to customise the generated objects.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Variables []ClusterVariable `json:"variables,omitempty"`
}

// IsDefined tells whether any part of the topology is set.
func (t *Topology) IsDefined() bool {
	if t == nil {
		return false
	}
	return t.ClassRef.Name != "" || t.ClassRef.Namespace != "" || t.Version != "" ||
		len(t.Variables) != 0 || len(t.Workers.MachineDeployments) != 0 || len(t.Workers.MachinePools) != 0
}

// ClusterClassRef names a ClusterClass.
type ClusterClassRef struct {
	// name of the ClusterClass.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`

	// namespace of the ClusterClass; the Cluster's own namespace when unset.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
}

// ControlPlaneTopology holds the per-Cluster settings of a managed control plane.
// +kubebuilder:validation:MinProperties=1
type ControlPlaneTopology struct {
	// metadata is merged into the class's metadata and put on the control
	// plane object and, for machine-based control planes, its Machines.
	// +optional
	Metadata ObjectMeta `json:"metadata,omitempty,omitzero"`

	// replicas is the number of control plane machines. When unset the
	// control plane object is created without a replica count.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// healthCheck turns the control plane MachineHealthCheck on or off and
	// may override the class's checks and remediation.
	// +optional
	HealthCheck ControlPlaneTopologyHealthCheck `json:"healthCheck,omitempty,omitzero"`

	// deletion holds timeouts used when control plane Machines are deleted.
	// +optional
	Deletion ControlPlaneTopologyMachineDeletionSpec `json:"deletion,omitempty,omitzero"`

	// rollout says when control plane Machines are replaced.
	// +optional
	Rollout ControlPlaneTopologyRolloutSpec `json:"rollout,omitempty,omitzero"`

	// taints are the Node taints of the control plane Machines; the class's taints apply
	// when unset.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Taints []MachineTaint `json:"taints,omitempty"`

	// readinessGates lists extra conditions that must be good before a
	// control plane Machine is Ready; the class's gates apply when unset.
	// +optional
	// +listType=map
	// +listMapKey=conditionType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	ReadinessGates []MachineReadinessGate `json:"readinessGates,omitempty"`

	// variables overrides Cluster-level variables for the control plane.
	// +optional
	Variables ControlPlaneVariables `json:"variables,omitempty,omitzero"`
}

// ControlPlaneTopologyRolloutSpec says when a managed control plane's
// Machines are replaced.
// +kubebuilder:validation:MinProperties=1
type ControlPlaneTopologyRolloutSpec struct {
	// after asks for every control plane Machine created before this time to
	// be replaced, once the time has passed.
	// +optional
	After metav1.Time `json:"after,omitempty,omitzero"`
}

// ControlPlaneTopologyHealthCheck configures the MachineHealthCheck of a
// managed control plane.
// +kubebuilder:validation:MinProperties=1
type ControlPlaneTopologyHealthCheck struct {
	// enabled forces a MachineHealthCheck on (true) or off (false). When unset
	// one is made only if this Cluster or its class defines checks.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// checks decide when a Machine is unhealthy. Setting checks or
	// remediation here replaces both as defined by the class.
	// +optional
	Checks ControlPlaneTopologyHealthCheckChecks `json:"checks,omitempty,omitzero"`

	// remediation decides whether and how unhealthy Machines are repaired.
	// +optional
	Remediation ControlPlaneTopologyHealthCheckRemediation `json:"remediation,omitempty,omitzero"`
}

// IsDefined tells whether checks or remediation are set.
func (h *ControlPlaneTopologyHealthCheck) IsDefined() bool {
	return h.Checks.NodeStartupTimeoutSeconds != nil || len(h.Checks.UnhealthyNodeConditions) != 0 ||
		len(h.Checks.UnhealthyMachineConditions) != 0 || h.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo != nil ||
		h.Remediation.TriggerIf.UnhealthyInRange != "" || h.Remediation.TemplateRef.IsDefined()
}

// ControlPlaneTopologyHealthCheckChecks decide when a control plane Machine is unhealthy.
// +kubebuilder:validation:MinProperties=1
type ControlPlaneTopologyHealthCheckChecks struct {
	// nodeStartupTimeoutSeconds is how long a Machine may run without a Node
	// before it counts as unhealthy. 10 minutes when unset; 0 turns the check off.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeStartupTimeoutSeconds *int32 `json:"nodeStartupTimeoutSeconds,omitempty"`

	// unhealthyNodeConditions mark the Machine unhealthy when any one of them holds.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	UnhealthyNodeConditions []UnhealthyNodeCondition `json:"unhealthyNodeConditions,omitempty"`

	// unhealthyMachineConditions mark the Machine unhealthy when any one of them holds.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	UnhealthyMachineConditions []UnhealthyMachineCondition `json:"unhealthyMachineConditions,omitempty"`
}

// ControlPlaneTopologyHealthCheckRemediation decides whether and how unhealthy
// control plane Machines are repaired.
// +kubebuilder:validation:MinProperties=1
type ControlPlaneTopologyHealthCheckRemediation struct {
	// triggerIf limits when remediation starts; it always starts when unset.
	// +optional
	TriggerIf ControlPlaneTopologyHealthCheckRemediationTriggerIf `json:"triggerIf,omitempty,omitzero"`

	// templateRef hands remediation to an external controller by naming a
	// remediation template; the owner of the Machine remediates when unset.
	// +optional
	TemplateRef MachineHealthCheckRemediationTemplateReference `json:"templateRef,omitempty,omitzero"`
}

// ControlPlaneTopologyHealthCheckRemediationTriggerIf limits when remediation starts.
// +kubebuilder:validation:MinProperties=1
type ControlPlaneTopologyHealthCheckRemediationTriggerIf struct {
	// unhealthyLessThanOrEqualTo allows remediation only while at most this
	// many (or this percentage of) Machines are unhealthy.
	// +optional
	UnhealthyLessThanOrEqualTo *intstr.IntOrString `json:"unhealthyLessThanOrEqualTo,omitempty"`

	// unhealthyInRange allows remediation only while the number of unhealthy
	// Machines is within "[min-max]", for example "[1-3]". Wins over
	// unhealthyLessThanOrEqualTo.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^\[[0-9]+-[0-9]+\]$`
	UnhealthyInRange string `json:"unhealthyInRange,omitempty"`
}

// ControlPlaneTopologyMachineDeletionSpec holds timeouts used when control
// plane Machines are deleted.
// +kubebuilder:validation:MinProperties=1
type ControlPlaneTopologyMachineDeletionSpec struct {
	// nodeDrainTimeoutSeconds caps the time spent draining a Node; 0 (the
	// default) waits for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDrainTimeoutSeconds *int32 `json:"nodeDrainTimeoutSeconds,omitempty"`

	// nodeVolumeDetachTimeoutSeconds caps the time spent waiting for volumes
	// to detach; 0 (the default) waits for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeVolumeDetachTimeoutSeconds *int32 `json:"nodeVolumeDetachTimeoutSeconds,omitempty"`

	// nodeDeletionTimeoutSeconds caps the time spent deleting the Node once
	// the Machine is being deleted; 10 seconds by default, 0 retries for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDeletionTimeoutSeconds *int32 `json:"nodeDeletionTimeoutSeconds,omitempty"`
}

// WorkersTopology lists the worker node groups of a managed Cluster.
// +kubebuilder:validation:MinProperties=1
type WorkersTopology struct {
	// machineDeployments are worker groups run as MachineDeployments.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2000
	MachineDeployments []MachineDeploymentTopology `json:"machineDeployments,omitempty"`

	// machinePools are worker groups run as MachinePools.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2000
	MachinePools []MachinePoolTopology `json:"machinePools,omitempty"`
}

// MachineDeploymentTopology is one worker group of a managed Cluster, run as
// a MachineDeployment that the Cluster controller owns.
type MachineDeploymentTopology struct {
	// metadata is merged into the class's metadata and put on the
	// MachineDeployment and its Machines.
	// +optional
	Metadata ObjectMeta `json:"metadata,omitempty,omitzero"`

	// class names the MachineDeployment class of the ClusterClass to use.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Class string `json:"class,omitempty"`

	// name identifies this group within the Cluster; it is part of the
	// generated MachineDeployment's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`

	// failureDomain is where the group's Machines are placed; it must be the
	// name of a failure domain in the Cluster's status.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// replicas is the number of Machines. When unset the MachineDeployment is
	// made without a count (so 1, or whatever the autoscaler sets).
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// healthCheck turns the group's MachineHealthCheck on or off and may
	// override the class's checks and remediation.
	// +optional
	HealthCheck MachineDeploymentTopologyHealthCheck `json:"healthCheck,omitempty,omitzero"`

	// deletion holds the deletion order and timeouts of the group's Machines.
	// +optional
	Deletion MachineDeploymentTopologyMachineDeletionSpec `json:"deletion,omitempty,omitzero"`

	// minReadySeconds is how long a new Machine must be Ready before it is
	// Available; 0 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`

	// taints are the Node taints of the group's Machines; the class's taints apply
	// when unset.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Taints []MachineTaint `json:"taints,omitempty"`

	// readinessGates lists extra conditions that must be good before a
	// Machine is Ready; the class's gates apply when unset.
	// +optional
	// +listType=map
	// +listMapKey=conditionType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	ReadinessGates []MachineReadinessGate `json:"readinessGates,omitempty"`

	// rollout says how Machines are replaced when the group changes.
	// +optional
	Rollout MachineDeploymentTopologyRolloutSpec `json:"rollout,omitempty,omitzero"`

	// variables overrides Cluster-level variables for this group.
	// +optional
	Variables MachineDeploymentVariables `json:"variables,omitempty,omitzero"`
}

// MachineDeploymentTopologyHealthCheck configures the MachineHealthCheck of
// one worker group.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentTopologyHealthCheck struct {
	// enabled forces a MachineHealthCheck on (true) or off (false). When unset
	// one is made only if this Cluster or its class defines checks.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// checks decide when a Machine is unhealthy. Setting checks or
	// remediation here replaces both as defined by the class.
	// +optional
	Checks MachineDeploymentTopologyHealthCheckChecks `json:"checks,omitempty,omitzero"`

	// remediation decides whether and how unhealthy Machines are repaired.
	// +optional
	Remediation MachineDeploymentTopologyHealthCheckRemediation `json:"remediation,omitempty,omitzero"`
}

// IsDefined tells whether checks or remediation are set.
func (h *MachineDeploymentTopologyHealthCheck) IsDefined() bool {
	return h.Checks.NodeStartupTimeoutSeconds != nil || len(h.Checks.UnhealthyNodeConditions) != 0 ||
		len(h.Checks.UnhealthyMachineConditions) != 0 || h.Remediation.MaxInFlight != nil ||
		h.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo != nil || h.Remediation.TriggerIf.UnhealthyInRange != "" ||
		h.Remediation.TemplateRef.IsDefined()
}

// MachineDeploymentTopologyHealthCheckChecks decide when a worker Machine is unhealthy.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentTopologyHealthCheckChecks struct {
	// nodeStartupTimeoutSeconds is how long a Machine may run without a Node
	// before it counts as unhealthy. 10 minutes when unset; 0 turns the check off.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeStartupTimeoutSeconds *int32 `json:"nodeStartupTimeoutSeconds,omitempty"`

	// unhealthyNodeConditions mark the Machine unhealthy when any one of them holds.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	UnhealthyNodeConditions []UnhealthyNodeCondition `json:"unhealthyNodeConditions,omitempty"`

	// unhealthyMachineConditions mark the Machine unhealthy when any one of them holds.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	UnhealthyMachineConditions []UnhealthyMachineCondition `json:"unhealthyMachineConditions,omitempty"`
}

// MachineDeploymentTopologyHealthCheckRemediation decides whether and how
// unhealthy worker Machines are repaired.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentTopologyHealthCheckRemediation struct {
	// maxInFlight caps how many Machines (a number or a percentage of the
	// desired replicas) are remediated at the same time; no cap when unset.
	// +optional
	MaxInFlight *intstr.IntOrString `json:"maxInFlight,omitempty"`

	// triggerIf limits when remediation starts; it always starts when unset.
	// +optional
	TriggerIf MachineDeploymentTopologyHealthCheckRemediationTriggerIf `json:"triggerIf,omitempty,omitzero"`

	// templateRef hands remediation to an external controller by naming a
	// remediation template; the owning MachineSet remediates when unset.
	// +optional
	TemplateRef MachineHealthCheckRemediationTemplateReference `json:"templateRef,omitempty,omitzero"`
}

// MachineDeploymentTopologyHealthCheckRemediationTriggerIf limits when remediation starts.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentTopologyHealthCheckRemediationTriggerIf struct {
	// unhealthyLessThanOrEqualTo allows remediation only while at most this
	// many (or this percentage of) Machines are unhealthy.
	// +optional
	UnhealthyLessThanOrEqualTo *intstr.IntOrString `json:"unhealthyLessThanOrEqualTo,omitempty"`

	// unhealthyInRange allows remediation only while the number of unhealthy
	// Machines is within "[min-max]", for example "[1-3]". Wins over
	// unhealthyLessThanOrEqualTo.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^\[[0-9]+-[0-9]+\]$`
	UnhealthyInRange string `json:"unhealthyInRange,omitempty"`
}

// MachineDeploymentTopologyMachineDeletionSpec holds the deletion order and
// timeouts of a worker group's Machines.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentTopologyMachineDeletionSpec struct {
	// order picks which Machines go first when scaling down: Random (the
	// default), Newest or Oldest.
	// +optional
	Order MachineSetDeletionOrder `json:"order,omitempty"`

	// nodeDrainTimeoutSeconds caps the time spent draining a Node; 0 (the
	// default) waits for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDrainTimeoutSeconds *int32 `json:"nodeDrainTimeoutSeconds,omitempty"`

	// nodeVolumeDetachTimeoutSeconds caps the time spent waiting for volumes
	// to detach; 0 (the default) waits for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeVolumeDetachTimeoutSeconds *int32 `json:"nodeVolumeDetachTimeoutSeconds,omitempty"`

	// nodeDeletionTimeoutSeconds caps the time spent deleting the Node once
	// the Machine is being deleted; 10 seconds by default, 0 retries for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDeletionTimeoutSeconds *int32 `json:"nodeDeletionTimeoutSeconds,omitempty"`
}

// MachineDeploymentTopologyRolloutSpec says how a worker group's Machines are
// replaced.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentTopologyRolloutSpec struct {
	// after asks for every Machine created before this time to be replaced,
	// once the time has passed.
	// +optional
	After metav1.Time `json:"after,omitempty,omitzero"`

	// strategy is the replacement strategy.
	// +optional
	Strategy MachineDeploymentTopologyRolloutStrategy `json:"strategy,omitempty,omitzero"`
}

// MachineDeploymentTopologyRolloutStrategy is the replacement strategy of a
// worker group.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentTopologyRolloutStrategy struct {
	// type is RollingUpdate (the default) or OnDelete.
	// +required
	Type MachineDeploymentRolloutStrategyType `json:"type,omitempty"`

	// rollingUpdate tunes a RollingUpdate.
	// +optional
	RollingUpdate MachineDeploymentTopologyRolloutStrategyRollingUpdate `json:"rollingUpdate,omitempty,omitzero"`
}

// MachineDeploymentTopologyRolloutStrategyRollingUpdate tunes a rolling update
// of a worker group.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentTopologyRolloutStrategyRollingUpdate struct {
	// maxUnavailable is how many Machines (a number, or a percentage rounded
	// down) may be missing during the update; 0 by default.
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// maxSurge is how many Machines (a number, or a percentage rounded up)
	// may exist above the desired count during the update; 1 by default.
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
}

// MachinePoolTopology is one worker pool of a managed Cluster, run as a
// MachinePool that the Cluster controller owns.
type MachinePoolTopology struct {
	// metadata is merged into the class's metadata and put on the MachinePool.
	// +optional
	Metadata ObjectMeta `json:"metadata,omitempty,omitzero"`

	// class names the MachinePool class of the ClusterClass to use.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Class string `json:"class,omitempty"`

	// name identifies this pool within the Cluster; it is part of the
	// generated MachinePool's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`

	// failureDomains are where the pool's machines are placed; each must be
	// the name of a failure domain in the Cluster's status.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	FailureDomains []string `json:"failureDomains,omitempty"`

	// deletion holds timeouts used when the pool's machines are deleted.
	// +optional
	Deletion MachinePoolTopologyMachineDeletionSpec `json:"deletion,omitempty,omitzero"`

	// minReadySeconds is how long a new machine must be Ready before it is
	// Available; 0 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`

	// taints are the Node taints of the pool's machines; the class's taints apply
	// when unset.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Taints []MachineTaint `json:"taints,omitempty"`

	// replicas is the number of machines. When unset the MachinePool is made
	// without a count (so 1, or whatever the autoscaler sets).
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// variables overrides Cluster-level variables for this pool.
	// +optional
	Variables MachinePoolVariables `json:"variables,omitempty,omitzero"`
}

// MachinePoolTopologyMachineDeletionSpec holds timeouts used when a pool's
// machines are deleted.
// +kubebuilder:validation:MinProperties=1
type MachinePoolTopologyMachineDeletionSpec struct {
	// nodeDrainTimeoutSeconds caps the time spent draining a Node; 0 (the
	// default) waits for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDrainTimeoutSeconds *int32 `json:"nodeDrainTimeoutSeconds,omitempty"`

	// nodeVolumeDetachTimeoutSeconds caps the time spent waiting for volumes
	// to detach; 0 (the default) waits for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeVolumeDetachTimeoutSeconds *int32 `json:"nodeVolumeDetachTimeoutSeconds,omitempty"`

	// nodeDeletionTimeoutSeconds caps the time spent deleting the Node once
	// the machine is being deleted; 10 seconds by default, 0 retries for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDeletionTimeoutSeconds *int32 `json:"nodeDeletionTimeoutSeconds,omitempty"`
}

// ClusterVariable is the value of one variable declared by a ClusterClass.
type ClusterVariable struct {
	// name of the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`

	// value is any JSON value; it is checked against the schema the
	// ClusterClass declares for the variable.
	// +required
	Value apiextensionsv1.JSON `json:"value,omitempty,omitzero"`
}

// ControlPlaneVariables overrides Cluster-level variables for the control plane.
// +kubebuilder:validation:MinProperties=1
type ControlPlaneVariables struct {
	// overrides replace the Cluster-level values of the named variables.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Overrides []ClusterVariable `json:"overrides,omitempty"`
}

// MachineDeploymentVariables overrides Cluster-level variables for one worker group.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentVariables struct {
	// overrides replace the Cluster-level values of the named variables.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Overrides []ClusterVariable `json:"overrides,omitempty"`
}

// MachinePoolVariables overrides Cluster-level variables for one worker pool.
// +kubebuilder:validation:MinProperties=1
type MachinePoolVariables struct {
	// overrides replace the Cluster-level values of the named variables.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Overrides []ClusterVariable `json:"overrides,omitempty"`
}

// ClusterNetwork is the network layout of a workload cluster.
// +kubebuilder:validation:MinProperties=1
type ClusterNetwork struct {
	// apiServerPort is the port the API server listens on; 6443 by default.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	APIServerPort int32 `json:"apiServerPort,omitempty"`

	// services are the ranges Service cluster IPs are taken from.
	// +optional
	Services NetworkRanges `json:"services,omitempty,omitzero"`

	// pods are the ranges Pod IPs are taken from.
	// +optional
	Pods NetworkRanges `json:"pods,omitempty,omitzero"`

	// serviceDomain is the DNS domain of Services, for example cluster.local.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ServiceDomain string `json:"serviceDomain,omitempty"`
}

// NetworkRanges is a set of address ranges.
// +kubebuilder:validation:XValidation:rule="self.cidrBlocks.all(c, isCIDR(c))",message="cidrBlocks must hold CIDRs such as 10.96.0.0/12 or fd00::/108"
type NetworkRanges struct {
	// cidrBlocks are the ranges in CIDR notation.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=43
	CIDRBlocks []string `json:"cidrBlocks,omitempty"`
}

// String joins the ranges with commas, the way kubeadm flags take them.
func (n NetworkRanges) String() string {
	return strings.Join(n.CIDRBlocks, ",")
}

// ClusterStatus is what controllers last saw of a Cluster.
// +kubebuilder:validation:MinProperties=1
type ClusterStatus struct {
	// conditions describe the Cluster's state. Types in use: Available,
	// InfrastructureReady, ControlPlaneInitialized, ControlPlaneAvailable,
	// WorkersAvailable, ControlPlaneMachinesReady, WorkerMachinesReady,
	// ControlPlaneMachinesUpToDate, WorkerMachinesUpToDate,
	// RemoteConnectionProbe, RollingOut, ScalingUp, ScalingDown, Remediating,
	// Deleting, Paused, and TopologyReconciled for managed Clusters.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization records the one-way steps of bringing the Cluster up.
	// +optional
	Initialization ClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// controlPlane counts the control plane Machines.
	// +optional
	ControlPlane *ClusterControlPlaneStatus `json:"controlPlane,omitempty"`

	// workers counts the worker Machines.
	// +optional
	Workers *WorkersStatus `json:"workers,omitempty"`

	// failureDomains are the failure domains the infrastructure provider
	// offers, copied from the infrastructure cluster object.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []FailureDomain `json:"failureDomains,omitempty"`

	// phase is a one-word summary of the Cluster's life cycle.
	// +optional
	// +kubebuilder:validation:Enum=Pending;Provisioning;Provisioned;Deleting;Failed;Unknown
	Phase string `json:"phase,omitempty"`

	// observedGeneration is the metadata.generation this status reflects.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// deprecated holds status fields of older API versions; Capstan does
	// not write them.
	// +optional
	Deprecated *DeprecatedFailureStatus `json:"deprecated,omitempty"`
}

// ClusterInitializationStatus records the one-way steps of bringing a Cluster
// up. Each flag is part of the provider contract and never goes back to false.
// +kubebuilder:validation:MinProperties=1
type ClusterInitializationStatus struct {
	// infrastructureProvisioned is true once the infrastructure provider
	// reported the cluster infrastructure ready.
	// +optional
	InfrastructureProvisioned *bool `json:"infrastructureProvisioned,omitempty"`

	// controlPlaneInitialized is true once the control plane first accepted
	// requests, so that workers can join and add-ons can be installed.
	// +optional
	ControlPlaneInitialized *bool `json:"controlPlaneInitialized,omitempty"`
}

// ClusterControlPlaneStatus counts a Cluster's control plane Machines.
type ClusterControlPlaneStatus struct {
	// desiredReplicas is the number of control plane Machines wanted.
	// +optional
	DesiredReplicas *int32 `json:"desiredReplicas,omitempty"`

	// replicas is the number of control plane Machines, including those still
	// being created or deleted.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// upToDateReplicas counts control plane Machines whose UpToDate condition is True.
	// +optional
	UpToDateReplicas *int32 `json:"upToDateReplicas,omitempty"`

	// readyReplicas counts control plane Machines whose Ready condition is True.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// availableReplicas counts control plane Machines whose Available condition is True.
	// +optional
	AvailableReplicas *int32 `json:"availableReplicas,omitempty"`

	// versions counts the control plane Machines by Kubernetes version.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Versions []StatusVersion `json:"versions,omitempty"`

	// upgradePlan lists the versions the control plane object is still to be
	// moved through during a managed Cluster's upgrade, next first; each
	// leaves the list once it is set on the object. Only managed Clusters
	// with an upgrade under way have one.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	UpgradePlan []StatusUpgradePlanVersion `json:"upgradePlan,omitempty"`
}

// WorkersStatus counts a Cluster's worker Machines.
type WorkersStatus struct {
	// desiredReplicas is the number of worker Machines wanted.
	// +optional
	DesiredReplicas *int32 `json:"desiredReplicas,omitempty"`

	// replicas is the number of worker Machines, including those still being
	// created or deleted.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// upToDateReplicas counts worker Machines whose UpToDate condition is True.
	// +optional
	UpToDateReplicas *int32 `json:"upToDateReplicas,omitempty"`

	// readyReplicas counts worker Machines whose Ready condition is True.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// availableReplicas counts worker Machines whose Available condition is True.
	// +optional
	AvailableReplicas *int32 `json:"availableReplicas,omitempty"`

	// versions counts the worker Machines by Kubernetes version.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Versions []StatusVersion `json:"versions,omitempty"`

	// upgradePlan lists the versions the worker objects (MachineDeployments and
	// MachinePools) are still to be moved through during a managed Cluster's upgrade, next first; each
	// leaves the list once it is set on them. Only managed Clusters
	// with an upgrade under way have one.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	UpgradePlan []StatusUpgradePlanVersion `json:"upgradePlan,omitempty"`
}

// FailureDomain is a failure domain a Cluster's Machines can be spread over.
type FailureDomain struct {
	// name of the failure domain, for example a zone.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`

	// controlPlane tells whether control plane Machines may be placed here.
	// +optional
	ControlPlane *bool `json:"controlPlane,omitempty"`

	// attributes are provider-specific details of the failure domain.
	// +optional
	Attributes map[string]string `json:"attributes,omitempty"`
}

// ClusterPhase is a one-word summary of a Cluster's life cycle.
type ClusterPhase string

// The phases a Cluster goes through.
const (
	// ClusterPhasePending: the Cluster was just created.
	ClusterPhasePending ClusterPhase = "Pending"
	// ClusterPhaseProvisioning: the infrastructure is being created.
	ClusterPhaseProvisioning ClusterPhase = "Provisioning"
	// ClusterPhaseProvisioned: the infrastructure exists and the control plane endpoint is known.
	ClusterPhaseProvisioned ClusterPhase = "Provisioned"
	// ClusterPhaseDeleting: the Cluster is being deleted.
	ClusterPhaseDeleting ClusterPhase = "Deleting"
	// ClusterPhaseFailed: the Cluster needs a human; kept only for objects converted from v1beta1.
	ClusterPhaseFailed ClusterPhase = "Failed"
	// ClusterPhaseUnknown: the phase cannot be told.
	ClusterPhaseUnknown ClusterPhase = "Unknown"
)

// Cluster is a Kubernetes workload cluster managed by Capstan: its
// infrastructure, its control plane, and the Machines that belong to it.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=clusters,shortName=cl,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=cluster-api"}
// +kubebuilder:printcolumn:name="ClusterClass",type="string",JSONPath=".spec.topology.classRef.name",description="ClusterClass the Cluster is built from, if any"
// +kubebuilder:printcolumn:name="Available",type="string",JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="Whether the Cluster passes all availability checks"
// +kubebuilder:printcolumn:name="CP Desired",type="integer",JSONPath=".status.controlPlane.desiredReplicas",description="Control plane Machines wanted"
// +kubebuilder:printcolumn:name="CP Current",type="integer",JSONPath=".status.controlPlane.replicas",description="Control plane Machines that exist",priority=10
// +kubebuilder:printcolumn:name="CP Ready",type="integer",JSONPath=".status.controlPlane.readyReplicas",description="Control plane Machines that are Ready",priority=10
// +kubebuilder:printcolumn:name="CP Available",type="integer",JSONPath=".status.controlPlane.availableReplicas",description="Control plane Machines that are Available"
// +kubebuilder:printcolumn:name="CP Up-to-date",type="integer",JSONPath=".status.controlPlane.upToDateReplicas",description="Control plane Machines that are up to date"
// +kubebuilder:printcolumn:name="W Desired",type="integer",JSONPath=".status.workers.desiredReplicas",description="Worker Machines wanted"
// +kubebuilder:printcolumn:name="W Current",type="integer",JSONPath=".status.workers.replicas",description="Worker Machines that exist",priority=10
// +kubebuilder:printcolumn:name="W Ready",type="integer",JSONPath=".status.workers.readyReplicas",description="Worker Machines that are Ready",priority=10
// +kubebuilder:printcolumn:name="W Available",type="integer",JSONPath=".status.workers.availableReplicas",description="Worker Machines that are Available"
// +kubebuilder:printcolumn:name="W Up-to-date",type="integer",JSONPath=".status.workers.upToDateReplicas",description="Worker Machines that are up to date"
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase",description="Pending, Provisioning, Provisioned, Deleting or Failed"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the Cluster was created"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".spec.topology.version",description="Kubernetes version of a managed Cluster"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: the Cluster name is used as a label value"
type Cluster struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the Cluster.
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.infrastructureRef) || has(self.infrastructureRef)",message="spec.infrastructureRef cannot be removed once set",fieldPath=".infrastructureRef"
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.controlPlaneRef) || has(self.controlPlaneRef)",message="spec.controlPlaneRef cannot be removed once set",fieldPath=".controlPlaneRef"
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.topology) || has(self.topology)",message="spec.topology cannot be removed from an existing Cluster",fieldPath=".topology"
	Spec ClusterSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the Cluster.
	// +optional
	Status ClusterStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the Cluster's conditions.
func (c *Cluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the Cluster's conditions.
func (c *Cluster) SetConditions(conditions []metav1.Condition) { c.Status.Conditions = conditions }

// GetClassKey returns the namespace and name of the ClusterClass the Cluster
// is built from, or an empty key when it has no topology.
func (c *Cluster) GetClassKey() types.NamespacedName {
	if c.Spec.Topology.ClassRef.Name == "" {
		return types.NamespacedName{}
	}
	ns := c.Spec.Topology.ClassRef.Namespace
	if ns == "" {
		ns = c.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: c.Spec.Topology.ClassRef.Name}
}

// ClusterList is a list of Clusters.
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the Clusters.
	Items []Cluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Cluster{}, &ClusterList{})
}
