package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// InMemoryMachineFinalizer holds an InMemoryMachine until its simulated
// Node, Pods and etcd member are gone.
const InMemoryMachineFinalizer = "inmemorymachine.infrastructure.cluster.x-k8s.io"

// InMemoryMachineSpec is the desired state of an InMemoryMachine.
type InMemoryMachineSpec struct {
	// providerID is inmemory://<namespace>/<name>, set by the provider; the
	// machine's Node carries the same value.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.providerID is immutable once set"
	ProviderID string `json:"providerID,omitempty"`

	// delays are this machine's simulated start-up delays; unset fields come
	// from the InMemoryCluster, then from the provider's defaults.
	// +optional
	Delays *SimulatedDelays `json:"delays,omitempty"`
}

// InMemoryMachineInitializationStatus records the one-way steps of
// providing a machine.
// +kubebuilder:validation:MinProperties=1
type InMemoryMachineInitializationStatus struct {
	// provisioned is true once the simulated machine booted.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// InMemoryMachineStatus is the observed state of an InMemoryMachine.
// +kubebuilder:validation:MinProperties=1
type InMemoryMachineStatus struct {
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tells whether the machine was provisioned.
	// +optional
	Initialization InMemoryMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// addresses of the simulated machine.
	// +optional
	Addresses clusterv1.MachineAddresses `json:"addresses,omitempty"`
}

// InMemoryMachine is the infrastructure of one Machine, simulated in the
// provider's process: it boots after a delay, then registers its Node (and,
// on a control-plane machine, its static Pods and etcd member) in the
// simulated workload cluster.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=inmemorymachines,shortName=imm,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-inmemory"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`,description="Cluster the InMemoryMachine belongs to"
// +kubebuilder:printcolumn:name="Machine",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="Machine")].name`,description="Machine that owns the InMemoryMachine"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Whether the simulated machine booted"
// +kubebuilder:printcolumn:name="Provider ID",type="string",JSONPath=".spec.providerID",description="Provider ID of the machine",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the InMemoryMachine was created"
type InMemoryMachine struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the InMemoryMachine.
	// +optional
	Spec InMemoryMachineSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the InMemoryMachine.
	// +optional
	Status InMemoryMachineStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the InMemoryMachine's conditions.
func (m *InMemoryMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the InMemoryMachine's conditions.
func (m *InMemoryMachine) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// InMemoryMachineList is a list of InMemoryMachines.
// +kubebuilder:object:root=true
type InMemoryMachineList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the InMemoryMachines.
	Items []InMemoryMachine `json:"items"`
}

// InMemoryMachineTemplateSpec is the desired state of an
// InMemoryMachineTemplate.
type InMemoryMachineTemplateSpec struct {
	// template is copied into every InMemoryMachine made from this template.
	// +required
	Template InMemoryMachineTemplateResource `json:"template,omitempty,omitzero"`
}

// InMemoryMachineTemplateResource is the part of an InMemoryMachine a
// template fixes.
type InMemoryMachineTemplateResource struct {
	// metadata holds labels and annotations for the InMemoryMachines made from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the InMemoryMachines made from the template.
	// +optional
	Spec InMemoryMachineSpec `json:"spec,omitempty,omitzero"`
}

// InMemoryMachineTemplate is a template for InMemoryMachines:
// MachineDeployments, MachineSets and KubeadmControlPlanes make one
// InMemoryMachine from it per Machine.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=inmemorymachinetemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-inmemory"}
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the InMemoryMachineTemplate was created"
type InMemoryMachineTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec InMemoryMachineTemplateSpec `json:"spec,omitempty,omitzero"`
}

// InMemoryMachineTemplateList is a list of InMemoryMachineTemplates.
// +kubebuilder:object:root=true
type InMemoryMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the InMemoryMachineTemplates.
	Items []InMemoryMachineTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&InMemoryMachine{}, &InMemoryMachineList{}, &InMemoryMachineTemplate{}, &InMemoryMachineTemplateList{})
}
