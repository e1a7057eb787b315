package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachineKind is the kind name of Machine.
const MachineKind = "Machine"

// MachineSpec is what the user, or the owner of a Machine, wants it to be.
type MachineSpec struct {
	// clusterName is the name of the Cluster the Machine belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterName string `json:"clusterName,omitempty"`

	// bootstrap says where the Machine's bootstrap data (for example
	// cloud-init) comes from.
	// +required
	Bootstrap Bootstrap `json:"bootstrap,omitempty,omitzero"`

	// infrastructureRef points at the provider object that is the actual
	// machine, for example a DockerMachine.
	// +required
	InfrastructureRef ContractVersionedObjectReference `json:"infrastructureRef,omitempty,omitzero"`

	// version is the Kubernetes version the Machine runs, for example v1.33.1.
	// Bootstrap providers use it to install matching components.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-+][-0-9a-zA-Z_.+]*)?$`
	Version string `json:"version,omitempty"`

	// providerID is the provider's identifier of the machine. It equals the
	// spec.providerID of the Node that runs on it, which is how Machines and
	// Nodes are matched (the cluster autoscaler relies on it). Set by the
	// infrastructure provider.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// failureDomain is where the Machine is placed; it must be the name of a
	// failure domain in the Cluster's status.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// minReadySeconds is how long the Machine must be Ready before it is
	// Available; 0 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`

	// readinessGates lists extra conditions that must be good before the
	// Machine is Ready. Control plane providers use it for their component
	// health conditions; other controllers may add their own.
	// +optional
	// +listType=map
	// +listMapKey=conditionType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	ReadinessGates []MachineReadinessGate `json:"readinessGates,omitempty"`

	// deletion holds timeouts used when the Machine is deleted.
	// +optional
	Deletion MachineDeletionSpec `json:"deletion,omitempty,omitzero"`

	// taints are the Node taints Capstan manages for this Machine. Taints
	// added to the Node by anything else are left alone.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Taints []MachineTaint `json:"taints,omitempty"`
}

// MachineDeletionSpec holds timeouts used when a Machine is deleted.
// +kubebuilder:validation:MinProperties=1
type MachineDeletionSpec struct {
	// nodeDrainTimeoutSeconds caps the time spent draining the Node; 0 (the
	// default) waits for ever. This is not kubectl drain's --timeout.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDrainTimeoutSeconds *int32 `json:"nodeDrainTimeoutSeconds,omitempty"`

	// nodeVolumeDetachTimeoutSeconds caps the time spent waiting for the
	// Node's volumes to detach; 0 (the default) waits for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeVolumeDetachTimeoutSeconds *int32 `json:"nodeVolumeDetachTimeoutSeconds,omitempty"`

	// nodeDeletionTimeoutSeconds caps the time spent deleting the Node once
	// the Machine is being deleted; 10 seconds by default, 0 retries for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDeletionTimeoutSeconds *int32 `json:"nodeDeletionTimeoutSeconds,omitempty"`
}

// Bootstrap says where a Machine's bootstrap data comes from: a bootstrap
// provider object, or a Secret the user made.
type Bootstrap struct {
	// configRef points at the bootstrap provider object that renders the
	// data, for example a KubeadmConfig. Leave it out to use dataSecretName
	// directly.
	// +optional
	ConfigRef ContractVersionedObjectReference `json:"configRef,omitempty,omitzero"`

	// dataSecretName is the Secret (key "value") that holds the bootstrap
	// data. The bootstrap provider fills it in; the Machine waits in Pending
	// until it is set.
	// +optional
	// +kubebuilder:validation:MinLength=0
	// +kubebuilder:validation:MaxLength=253
	DataSecretName *string `json:"dataSecretName,omitempty"`
}

// MachineStatus is what controllers last saw of a Machine.
// +kubebuilder:validation:MinProperties=1
type MachineStatus struct {
	// conditions describe the Machine's state. Types in use: Available,
	// Ready, UpToDate, BootstrapConfigReady, InfrastructureReady, NodeReady,
	// NodeHealthy, Updating, Deleting, Paused; HealthCheckSucceeded and
	// OwnerRemediated when a MachineHealthCheck watches it; and the component
	// health conditions control plane providers add.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization records the one-way steps of bringing the Machine up.
	// +optional
	Initialization MachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// nodeRef names the Node that runs on this Machine, once it exists.
	// +optional
	NodeRef MachineNodeReference `json:"nodeRef,omitempty,omitzero"`

	// nodeInfo is the system information the Node reports (kubelet version,
	// OS image, machine ID, ...).
	// +optional
	NodeInfo *corev1.NodeSystemInfo `json:"nodeInfo,omitempty"`

	// lastUpdated is when the phase last changed.
	// +optional
	LastUpdated metav1.Time `json:"lastUpdated,omitempty,omitzero"`

	// addresses are the Machine's addresses, copied from the infrastructure
	// machine object.
	// +optional
	Addresses MachineAddresses `json:"addresses,omitempty"`

	// failureDomain is the failure domain the Machine was actually placed
	// in, which may differ from spec.failureDomain when the infrastructure
	// provider chooses it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// phase is a one-word summary of the Machine's life cycle.
	// +optional
	// +kubebuilder:validation:Enum=Pending;Provisioning;Provisioned;Running;Updating;Deleting;Deleted;Failed;Unknown
	Phase string `json:"phase,omitempty"`

	// certificatesExpiryDate is when the Machine's certificates expire; set
	// for control plane Machines only.
	// +optional
	CertificatesExpiryDate metav1.Time `json:"certificatesExpiryDate,omitempty,omitzero"`

	// observedGeneration is the metadata.generation this status reflects.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// deletion records the progress of deleting the Machine; present only
	// once draining or waiting for volumes has started.
	// +optional
	Deletion *MachineDeletionStatus `json:"deletion,omitempty"`

	// deprecated holds status fields of older API versions; Capstan does
	// not write them.
	// +optional
	Deprecated *DeprecatedFailureStatus `json:"deprecated,omitempty"`
}

// MachineNodeReference names the Node that runs on a Machine.
type MachineNodeReference struct {
	// name of the Node.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`
}

// IsDefined tells whether a Node is named.
func (r MachineNodeReference) IsDefined() bool { return r.Name != "" }

// MachineInitializationStatus records the one-way steps of bringing a Machine
// up. Each flag is part of the provider contract and never goes back to false.
// +kubebuilder:validation:MinProperties=1
type MachineInitializationStatus struct {
	// infrastructureProvisioned is true once the infrastructure provider
	// reported the machine provisioned.
	// +optional
	InfrastructureProvisioned *bool `json:"infrastructureProvisioned,omitempty"`

	// bootstrapDataSecretCreated is true once the bootstrap provider reported
	// the bootstrap data Secret written.
	// +optional
	BootstrapDataSecretCreated *bool `json:"bootstrapDataSecretCreated,omitempty"`
}

// MachineDeletionStatus records the progress of deleting a Machine.
type MachineDeletionStatus struct {
	// nodeDrainStartTime is when draining the Node began; compared with
	// nodeDrainTimeoutSeconds.
	// +optional
	NodeDrainStartTime metav1.Time `json:"nodeDrainStartTime,omitempty,omitzero"`

	// waitForNodeVolumeDetachStartTime is when waiting for the Node's volumes
	// to detach began; compared with nodeVolumeDetachTimeoutSeconds.
	// +optional
	WaitForNodeVolumeDetachStartTime metav1.Time `json:"waitForNodeVolumeDetachStartTime,omitempty,omitzero"`

	// waitForPreDrainHookStartTime is when waiting for the pre-drain hooks
	// (pre-drain.delete.hook.machine.cluster-api.x-k8s.io annotations) began,
	// so that a hook that takes too long can be reported.
	// +optional
	WaitForPreDrainHookStartTime metav1.Time `json:"waitForPreDrainHookStartTime,omitempty,omitzero"`

	// waitForPreTerminateHookStartTime is when waiting for the pre-terminate
	// hooks (pre-terminate.delete.hook.machine.cluster-api.x-k8s.io
	// annotations) began, so that a hook that takes too long can be reported.
	// +optional
	WaitForPreTerminateHookStartTime metav1.Time `json:"waitForPreTerminateHookStartTime,omitempty,omitzero"`
}

// MachinePhase is a one-word summary of a Machine's life cycle.
type MachinePhase string

// The phases a Machine goes through.
const (
	// MachinePhasePending: the Machine was just created.
	MachinePhasePending MachinePhase = "Pending"
	// MachinePhaseProvisioning: bootstrap data is ready and the infrastructure is being created.
	MachinePhaseProvisioning MachinePhase = "Provisioning"
	// MachinePhaseProvisioned: the infrastructure exists and has a provider ID; no Node yet.
	MachinePhaseProvisioned MachinePhase = "Provisioned"
	// MachinePhaseRunning: the Node is up and linked to the Machine.
	MachinePhaseRunning MachinePhase = "Running"
	// MachinePhaseUpdating: the Machine is being changed in place.
	MachinePhaseUpdating MachinePhase = "Updating"
	// MachinePhaseDeleting: the Machine is being deleted.
	MachinePhaseDeleting MachinePhase = "Deleting"
	// MachinePhaseDeleted: everything the Machine owned is gone.
	MachinePhaseDeleted MachinePhase = "Deleted"
	// MachinePhaseFailed: the Machine needs a human; kept only for objects converted from v1beta1.
	MachinePhaseFailed MachinePhase = "Failed"
	// MachinePhaseUnknown: the phase cannot be told.
	MachinePhaseUnknown MachinePhase = "Unknown"
)

// Machine is one node of a workload cluster: the infrastructure it runs on,
// its bootstrap data, and the Node it becomes.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=machines,shortName=ma,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=cluster-api"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterName",description="Cluster the Machine belongs to"
// +kubebuilder:printcolumn:name="Node Name",type="string",JSONPath=".status.nodeRef.name",description="Node running on the Machine"
// +kubebuilder:printcolumn:name="Provider ID",type="string",JSONPath=".spec.providerID",description="Provider's identifier of the machine",priority=10
// +kubebuilder:printcolumn:name="Failure domain",type="string",JSONPath=".status.failureDomain",description="Failure domain the Machine was placed in"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the Machine passes all readiness checks"
// +kubebuilder:printcolumn:name="Available",type="string",JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="Whether the Machine has been Ready for minReadySeconds"
// +kubebuilder:printcolumn:name="Up-to-date",type="string",JSONPath=`.status.conditions[?(@.type=="UpToDate")].status`,description="Whether the Machine matches the spec of its owner"
// +kubebuilder:printcolumn:name="Internal-IP",type="string",JSONPath=`.status.addresses[?(@.type=="InternalIP")].address`,description="Internal IP address",priority=10
// +kubebuilder:printcolumn:name="External-IP",type="string",JSONPath=`.status.addresses[?(@.type=="ExternalIP")].address`,description="External IP address",priority=10
// +kubebuilder:printcolumn:name="OS-Image",type="string",JSONPath=".status.nodeInfo.osImage",description="OS image the Node reports",priority=10
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase",description="Pending, Provisioning, Provisioned, Running, Updating, Deleting, ..."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the Machine was created"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".spec.version",description="Kubernetes version of the Machine"
type Machine struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the Machine.
	// +required
	// +kubebuilder:validation:XValidation:rule="has(self.bootstrap.configRef) || has(self.bootstrap.dataSecretName)",message="spec.bootstrap needs configRef or dataSecretName: point at a bootstrap config or name a Secret with the bootstrap data",fieldPath=".bootstrap"
	// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName",message="spec.clusterName is immutable: create a new Machine in the other Cluster instead",fieldPath=".clusterName"
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.bootstrap.configRef) || (has(self.bootstrap.configRef) && self.bootstrap.configRef == oldSelf.bootstrap.configRef)",message="spec.bootstrap.configRef is immutable once set: create a new Machine to use another bootstrap config",fieldPath=".bootstrap.configRef"
	// +kubebuilder:validation:XValidation:rule="self.infrastructureRef == oldSelf.infrastructureRef",message="spec.infrastructureRef is immutable: create a new Machine to use other infrastructure",fieldPath=".infrastructureRef"
	Spec MachineSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the Machine.
	// +optional
	Status MachineStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the Machine's conditions.
func (m *Machine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the Machine's conditions.
func (m *Machine) SetConditions(conditions []metav1.Condition) { m.Status.Conditions = conditions }

// MachineList is a list of Machines.
// +kubebuilder:object:root=true
type MachineList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the Machines.
	Items []Machine `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Machine{}, &MachineList{})
}
