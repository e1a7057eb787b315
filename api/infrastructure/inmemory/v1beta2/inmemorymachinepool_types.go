package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// InMemoryMachinePoolFinalizer holds an InMemoryMachinePool until its
// instances are gone.
const InMemoryMachinePoolFinalizer = "inmemorymachinepool.infrastructure.cluster.x-k8s.io"

// InMemoryMachinePoolSpec is the desired state of an InMemoryMachinePool.
type InMemoryMachinePoolSpec struct {
	// providerIDList lists the provider IDs of the pool's booted instances;
	// the provider sets it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	ProviderIDList []string `json:"providerIDList,omitempty"`

	// delays are the simulated start-up delays of the pool's instances;
	// unset fields come from the InMemoryCluster, then from the provider's
	// defaults.
	// +optional
	Delays *SimulatedDelays `json:"delays,omitempty"`
}

// InMemoryMachinePoolInitializationStatus records the one-way steps of
// providing a pool.
// +kubebuilder:validation:MinProperties=1
type InMemoryMachinePoolInitializationStatus struct {
	// provisioned is true once the pool started making instances.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// InMemoryMachinePoolStatus is the observed state of an
// InMemoryMachinePool.
// +kubebuilder:validation:MinProperties=1
type InMemoryMachinePoolStatus struct {
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tells whether the pool was provisioned.
	// +optional
	Initialization InMemoryMachinePoolInitializationStatus `json:"initialization,omitempty,omitzero"`

	// replicas is the number of instances the pool has, booted or not.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of instances that booted.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// infrastructureMachineKind is InMemoryMachine: the pool makes one per
	// instance, and the core a Machine for each.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	InfrastructureMachineKind string `json:"infrastructureMachineKind,omitempty"`
}

// InMemoryMachinePool is the infrastructure of a MachinePool, simulated in
// the provider's process: it keeps as many InMemoryMachines as the
// MachinePool wants, each booting as any InMemoryMachine does.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=inmemorymachinepools,shortName=immp,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-inmemory"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`,description="Cluster the InMemoryMachinePool belongs to"
// +kubebuilder:printcolumn:name="MachinePool",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="MachinePool")].name`,description="MachinePool that owns the InMemoryMachinePool"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="Instances the pool has"
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas",description="Instances that booted"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the InMemoryMachinePool was created"
type InMemoryMachinePool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the InMemoryMachinePool.
	// +optional
	Spec InMemoryMachinePoolSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the InMemoryMachinePool.
	// +optional
	Status InMemoryMachinePoolStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the InMemoryMachinePool's conditions.
func (m *InMemoryMachinePool) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the InMemoryMachinePool's conditions.
func (m *InMemoryMachinePool) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// InMemoryMachinePoolList is a list of InMemoryMachinePools.
// +kubebuilder:object:root=true
type InMemoryMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the InMemoryMachinePools.
	Items []InMemoryMachinePool `json:"items"`
}

// InMemoryMachinePoolTemplateSpec is the desired state of an
// InMemoryMachinePoolTemplate.
type InMemoryMachinePoolTemplateSpec struct {
	// template is copied into every InMemoryMachinePool made from this
	// template.
	// +required
	Template InMemoryMachinePoolTemplateResource `json:"template,omitempty,omitzero"`
}

// InMemoryMachinePoolTemplateResource is the part of an InMemoryMachinePool
// a template fixes.
type InMemoryMachinePoolTemplateResource struct {
	// metadata holds labels and annotations for the InMemoryMachinePools
	// made from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the InMemoryMachinePools made from the template.
	// +optional
	Spec InMemoryMachinePoolSpec `json:"spec,omitempty,omitzero"`
}

// InMemoryMachinePoolTemplate is a template for InMemoryMachinePools, for
// ClusterClasses whose worker pools are MachinePools.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=inmemorymachinepooltemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-inmemory"}
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the InMemoryMachinePoolTemplate was created"
type InMemoryMachinePoolTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec InMemoryMachinePoolTemplateSpec `json:"spec,omitempty,omitzero"`
}

// InMemoryMachinePoolTemplateList is a list of InMemoryMachinePoolTemplates.
// +kubebuilder:object:root=true
type InMemoryMachinePoolTemplateList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the InMemoryMachinePoolTemplates.
	Items []InMemoryMachinePoolTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&InMemoryMachinePool{}, &InMemoryMachinePoolList{}, &InMemoryMachinePoolTemplate{}, &InMemoryMachinePoolTemplateList{})
}
