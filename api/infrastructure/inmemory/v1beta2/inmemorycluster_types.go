package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// InMemoryClusterFinalizer holds an InMemoryCluster until its simulated API
// server is closed and its objects are forgotten.
const InMemoryClusterFinalizer = "inmemorycluster.infrastructure.cluster.x-k8s.io"

// InMemoryClusterSpec is the desired state of an InMemoryCluster.
type InMemoryClusterSpec struct {
	// controlPlaneEndpoint is where the simulated cluster's API is served.
	// Leave it empty and the provider picks 127.0.0.1 and a free port; once
	// set it does not change.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.port) || self == oldSelf",message="spec.controlPlaneEndpoint is immutable once set: create a new InMemoryCluster to use another endpoint"
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// delays are the simulated start-up delays of this cluster's machines;
	// an InMemoryMachine's own spec.delays win field by field.
	// +optional
	Delays *SimulatedDelays `json:"delays,omitempty"`
}

// InMemoryClusterInitializationStatus records the one-way steps of providing
// a cluster's infrastructure.
// +kubebuilder:validation:MinProperties=1
type InMemoryClusterInitializationStatus struct {
	// provisioned is true once the simulated API server first listened on
	// the control-plane endpoint.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// InMemoryClusterStatus is the observed state of an InMemoryCluster.
// +kubebuilder:validation:MinProperties=1
type InMemoryClusterStatus struct {
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tells whether the infrastructure was provisioned.
	// +optional
	Initialization InMemoryClusterInitializationStatus `json:"initialization,omitempty,omitzero"`
}

// InMemoryCluster is the infrastructure of one Cluster whose machines are
// simulated: a light API server in the provider's process stands in for
// the workload cluster's control-plane endpoint.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=inmemoryclusters,shortName=imc,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-inmemory"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`,description="Cluster the InMemoryCluster belongs to"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Host of the simulated API server"
// +kubebuilder:printcolumn:name="Port",type="integer",JSONPath=".spec.controlPlaneEndpoint.port",description="Port of the simulated API server"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Whether the simulated API server listens"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the InMemoryCluster was created"
type InMemoryCluster struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the InMemoryCluster.
	// +optional
	Spec InMemoryClusterSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the InMemoryCluster.
	// +optional
	Status InMemoryClusterStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the InMemoryCluster's conditions.
func (c *InMemoryCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the InMemoryCluster's conditions.
func (c *InMemoryCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// InMemoryClusterList is a list of InMemoryClusters.
// +kubebuilder:object:root=true
type InMemoryClusterList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the InMemoryClusters.
	Items []InMemoryCluster `json:"items"`
}

// InMemoryClusterTemplateSpec is the desired state of an
// InMemoryClusterTemplate.
type InMemoryClusterTemplateSpec struct {
	// template is copied into every InMemoryCluster made from this template.
	// +required
	Template InMemoryClusterTemplateResource `json:"template,omitempty,omitzero"`
}

// InMemoryClusterTemplateResource is the part of an InMemoryCluster a
// template fixes.
type InMemoryClusterTemplateResource struct {
	// metadata holds labels and annotations for the InMemoryClusters made from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the InMemoryClusters made from the template.
	// +optional
	Spec InMemoryClusterSpec `json:"spec,omitempty,omitzero"`
}

// InMemoryClusterTemplate is a template for InMemoryClusters (ClusterClass).
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=inmemoryclustertemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-inmemory"}
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the InMemoryClusterTemplate was created"
type InMemoryClusterTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec InMemoryClusterTemplateSpec `json:"spec,omitempty,omitzero"`
}

// InMemoryClusterTemplateList is a list of InMemoryClusterTemplates.
// +kubebuilder:object:root=true
type InMemoryClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the InMemoryClusterTemplates.
	Items []InMemoryClusterTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&InMemoryCluster{}, &InMemoryClusterList{}, &InMemoryClusterTemplate{}, &InMemoryClusterTemplateList{})
}
