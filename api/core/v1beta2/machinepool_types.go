package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachinePoolKind is the kind name of MachinePool.
const MachinePoolKind = "MachinePool"

// MachinePoolFinalizer keeps a MachinePool until its Nodes and
// infrastructure are gone.
const MachinePoolFinalizer = "machinepool.cluster.x-k8s.io"

// MachinePoolSpec is what the user wants a MachinePool to be. Unlike a
// MachineSet, a MachinePool leaves the machines to one infrastructure object
// that manages a group of instances itself (a cloud's scale set or
// auto-scaling group); the pool only says how many and from what template.
type MachinePoolSpec struct {
	// clusterName is the name of the Cluster the MachinePool belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterName string `json:"clusterName,omitempty"`

	// replicas is the number of machines wanted. When unset it becomes the
	// autoscaler's minimum size if both cluster-api-autoscaler-node-group
	// min and max size annotations are set, otherwise 1 (there is no
	// defaulting webhook: the controller fills it in).
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// template describes the machines of the pool: its infrastructureRef
	// points at the provider's pool object (for example an AWSMachinePool),
	// its bootstrap at the config every instance boots from.
	// +required
	Template MachineTemplateSpec `json:"template,omitempty,omitzero"`

	// providerIDList lists the provider IDs of the pool's instances, as the
	// infrastructure provider reports them. Each equals the spec.providerID
	// of the Node running on that instance, which is how the pool finds its
	// Nodes (and how the cluster autoscaler matches them).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	ProviderIDList []string `json:"providerIDList,omitempty"`

	// failureDomains are the failure domains the pool's instances may be
	// placed in; each must name a failure domain in the Cluster's status.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	FailureDomains []string `json:"failureDomains,omitempty"`
}

// MachinePoolStatus is what controllers last saw of a MachinePool.
// +kubebuilder:validation:MinProperties=1
type MachinePoolStatus struct {
	// conditions describe the MachinePool's state. Types in use: Available,
	// BootstrapConfigReady, InfrastructureReady, MachinesReady,
	// MachinesUpToDate, ScalingUp, ScalingDown, Remediating, Deleting,
	// Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization records the one-way steps of bringing the pool up.
	// +optional
	Initialization MachinePoolInitializationStatus `json:"initialization,omitempty,omitzero"`

	// nodeRefs point at the Nodes running on the pool's instances, once
	// they exist.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	NodeRefs []corev1.ObjectReference `json:"nodeRefs,omitempty"`

	// replicas is the number of instances the pool has.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// readyReplicas counts the pool's machines whose Ready condition is True.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// availableReplicas counts the pool's machines whose Available
	// condition is True.
	// +optional
	AvailableReplicas *int32 `json:"availableReplicas,omitempty"`

	// upToDateReplicas counts the pool's machines whose UpToDate condition
	// is True.
	// +optional
	UpToDateReplicas *int32 `json:"upToDateReplicas,omitempty"`

	// versions counts the pool's machines by the Kubernetes version they
	// run; more than one entry means an upgrade is under way.
	// +optional
	// +listType=map
	// +listMapKey=version
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Versions []StatusVersion `json:"versions,omitempty"`

	// phase is a one-word summary of the MachinePool's life cycle.
	// +optional
	// +kubebuilder:validation:Enum=Pending;Provisioning;Provisioned;Running;ScalingUp;ScalingDown;Scaling;Deleting;Failed;Unknown
	Phase string `json:"phase,omitempty"`

	// observedGeneration is the metadata.generation this status reflects.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// deprecated holds status fields of older API versions; Capstan does
	// not write them.
	// +optional
	Deprecated *MachinePoolDeprecatedStatus `json:"deprecated,omitempty"`
}

// MachinePoolInitializationStatus records the one-way steps of bringing a
// MachinePool up. Each flag is part of the provider contract and never goes
// back to false.
// +kubebuilder:validation:MinProperties=1
type MachinePoolInitializationStatus struct {
	// infrastructureProvisioned is true once the infrastructure provider
	// reported the pool's infrastructure provisioned.
	// +optional
	InfrastructureProvisioned *bool `json:"infrastructureProvisioned,omitempty"`

	// bootstrapDataSecretCreated is true once the bootstrap provider
	// reported the pool's bootstrap data Secret written.
	// +optional
	BootstrapDataSecretCreated *bool `json:"bootstrapDataSecretCreated,omitempty"`
}

// StatusVersion counts the machines that run one Kubernetes version.
type StatusVersion struct {
	// version is the Kubernetes version, for example v1.33.1.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`

	// replicas is the number of machines running this version.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Replicas int32 `json:"replicas,omitempty"`
}

// MachinePoolPhase is a one-word summary of a MachinePool's life cycle.
type MachinePoolPhase string

// The phases a MachinePool goes through.
const (
	// MachinePoolPhasePending: the MachinePool was just created.
	MachinePoolPhasePending MachinePoolPhase = "Pending"
	// MachinePoolPhaseProvisioning: the pool's infrastructure is being created or changed.
	MachinePoolPhaseProvisioning MachinePoolPhase = "Provisioning"
	// MachinePoolPhaseProvisioned: the infrastructure exists; its instances are not all Nodes yet.
	MachinePoolPhaseProvisioned MachinePoolPhase = "Provisioned"
	// MachinePoolPhaseRunning: every instance is a Ready Node.
	MachinePoolPhaseRunning MachinePoolPhase = "Running"
	// MachinePoolPhaseScalingUp: the infrastructure is adding instances.
	MachinePoolPhaseScalingUp MachinePoolPhase = "ScalingUp"
	// MachinePoolPhaseScalingDown: the infrastructure is removing instances.
	MachinePoolPhaseScalingDown MachinePoolPhase = "ScalingDown"
	// MachinePoolPhaseScaling: the size is changing for a reason outside
	// Capstan, such as an external autoscaler.
	MachinePoolPhaseScaling MachinePoolPhase = "Scaling"
	// MachinePoolPhaseDeleting: the MachinePool is being deleted.
	MachinePoolPhaseDeleting MachinePoolPhase = "Deleting"
	// MachinePoolPhaseFailed: the pool needs a human; kept only for objects converted from v1beta1.
	MachinePoolPhaseFailed MachinePoolPhase = "Failed"
	// MachinePoolPhaseUnknown: the phase cannot be told.
	MachinePoolPhaseUnknown MachinePoolPhase = "Unknown"
)

// MachinePool is a group of machines that one infrastructure object (a
// cloud's scale set, say) creates and scales as a whole.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas
// +kubebuilder:resource:path=machinepools,shortName=mp,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=cluster-api"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterName",description="Cluster the MachinePool belongs to"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".spec.replicas",description="Machines wanted"
// +kubebuilder:printcolumn:name="Current",type="integer",JSONPath=".status.replicas",description="Machines that exist"
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas",description="Machines that are Ready"
// +kubebuilder:printcolumn:name="Available",type="integer",JSONPath=".status.availableReplicas",description="Machines that are Available"
// +kubebuilder:printcolumn:name="Up-to-date",type="integer",JSONPath=".status.upToDateReplicas",description="Machines that are up to date"
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase",description="Pending, Provisioning, Provisioned, Running, ScalingUp, ScalingDown, Deleting, ..."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the MachinePool was created"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".spec.template.spec.version",description="Kubernetes version of the machines"
type MachinePool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the MachinePool.
	// +required
	// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName",message="spec.clusterName is immutable: create a new MachinePool in the other Cluster instead",fieldPath=".clusterName"
	// +kubebuilder:validation:XValidation:rule="self.template.spec.clusterName == self.clusterName",message="spec.template.spec.clusterName must equal spec.clusterName",fieldPath=".template.spec.clusterName"
	// +kubebuilder:validation:XValidation:rule="has(self.template.spec.bootstrap.configRef) || has(self.template.spec.bootstrap.dataSecretName)",message="spec.template.spec.bootstrap needs configRef or dataSecretName: point at a bootstrap config or name a Secret with the bootstrap data",fieldPath=".template.spec.bootstrap"
	// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.taints)",message="spec.template.spec.taints is not supported on a MachinePool: remove it, and taint the pool's Nodes through its bootstrap config instead",fieldPath=".template.spec.taints"
	Spec MachinePoolSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the MachinePool.
	// +optional
	Status MachinePoolStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the MachinePool's conditions.
func (m *MachinePool) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the MachinePool's conditions.
func (m *MachinePool) SetConditions(conditions []metav1.Condition) { m.Status.Conditions = conditions }

// MachinePoolList is a list of MachinePools.
// +kubebuilder:object:root=true
type MachinePoolList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the MachinePools.
	Items []MachinePool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MachinePool{}, &MachinePoolList{})
}
