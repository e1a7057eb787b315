package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// LocalMachinePoolFinalizer holds a LocalMachinePool until its instances
// are gone.
const LocalMachinePoolFinalizer = "localmachinepool.infrastructure.cluster.x-k8s.io"

// LocalMachinePoolSpec is the desired state of a LocalMachinePool.
type LocalMachinePoolSpec struct {
	// providerIDList lists the provider IDs of the pool's booted instances;
	// the provider sets it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	ProviderIDList []string `json:"providerIDList,omitempty"`

	// strategy bounds how the pool replaces its instances when the
	// MachinePool's version or bootstrap data changes.
	// +optional
	Strategy LocalMachinePoolStrategy `json:"strategy,omitempty,omitzero"`
}

// LocalMachinePoolStrategy bounds a rolling replacement of a pool's
// instances.
// +kubebuilder:validation:XValidation:rule="(has(self.maxSurge) ? self.maxSurge : 1) + (has(self.maxUnavailable) ? self.maxUnavailable : 0) > 0",message="spec.strategy.maxSurge and spec.strategy.maxUnavailable cannot both be 0, or a rollout could never replace an instance: set maxSurge to 1"
type LocalMachinePoolStrategy struct {
	// maxSurge is how many instances over the wanted number a rollout may
	// make; 1 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxSurge *int32 `json:"maxSurge,omitempty"`

	// maxUnavailable is how many of the wanted instances may be not ready
	// during a rollout; 0 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
}

// LocalMachinePoolInitializationStatus records the one-way steps of
// providing a pool.
// +kubebuilder:validation:MinProperties=1
type LocalMachinePoolInitializationStatus struct {
	// provisioned is true once the pool started making instances.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// LocalMachinePoolStatus is the observed state of a LocalMachinePool.
// +kubebuilder:validation:MinProperties=1
type LocalMachinePoolStatus struct {
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tells whether the pool was provisioned.
	// +optional
	Initialization LocalMachinePoolInitializationStatus `json:"initialization,omitempty,omitzero"`

	// replicas is the number of instances the pool has, booted or not.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of instances that booted.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// infrastructureMachineKind is LocalMachine: the pool makes one per
	// instance, and the core a Machine for each.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	InfrastructureMachineKind string `json:"infrastructureMachineKind,omitempty"`
}

// LocalMachinePool is the infrastructure of a MachinePool on this host: it
// keeps as many LocalMachines as the MachinePool wants, each a `capstan
// node run` process as any LocalMachine, and replaces them when the
// MachinePool's version or bootstrap data changes.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=localmachinepools,shortName=lmp,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-local"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`,description="Cluster the LocalMachinePool belongs to"
// +kubebuilder:printcolumn:name="MachinePool",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="MachinePool")].name`,description="MachinePool that owns the LocalMachinePool"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="Instances the pool has"
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas",description="Instances that booted"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the LocalMachinePool was created"
type LocalMachinePool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the LocalMachinePool.
	// +optional
	Spec LocalMachinePoolSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the LocalMachinePool.
	// +optional
	Status LocalMachinePoolStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the LocalMachinePool's conditions.
func (m *LocalMachinePool) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the LocalMachinePool's conditions.
func (m *LocalMachinePool) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// LocalMachinePoolList is a list of LocalMachinePools.
// +kubebuilder:object:root=true
type LocalMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the LocalMachinePools.
	Items []LocalMachinePool `json:"items"`
}

// LocalMachinePoolTemplateSpec is the desired state of a
// LocalMachinePoolTemplate.
type LocalMachinePoolTemplateSpec struct {
	// template is copied into every LocalMachinePool made from this
	// template.
	// +required
	Template LocalMachinePoolTemplateResource `json:"template,omitempty,omitzero"`
}

// LocalMachinePoolTemplateResource is the part of a LocalMachinePool a
// template fixes.
type LocalMachinePoolTemplateResource struct {
	// metadata holds labels and annotations for the LocalMachinePools made
	// from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the LocalMachinePools made from the template.
	// +optional
	Spec LocalMachinePoolSpec `json:"spec,omitempty,omitzero"`
}

// LocalMachinePoolTemplate is a template for LocalMachinePools, for
// ClusterClasses whose worker pools are MachinePools.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=localmachinepooltemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-local"}
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the LocalMachinePoolTemplate was created"
type LocalMachinePoolTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec LocalMachinePoolTemplateSpec `json:"spec,omitempty,omitzero"`
}

// LocalMachinePoolTemplateList is a list of LocalMachinePoolTemplates.
// +kubebuilder:object:root=true
type LocalMachinePoolTemplateList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the LocalMachinePoolTemplates.
	Items []LocalMachinePoolTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LocalMachinePool{}, &LocalMachinePoolList{}, &LocalMachinePoolTemplate{}, &LocalMachinePoolTemplateList{})
}
