package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// KubeadmConfigTemplateSpec is the desired state of a KubeadmConfigTemplate.
type KubeadmConfigTemplateSpec struct {
	// template is copied into every KubeadmConfig made from this template.
	// +required
	Template KubeadmConfigTemplateResource `json:"template,omitempty,omitzero"`
}

// KubeadmConfigTemplateResource is the part of a KubeadmConfig a template fixes.
// +kubebuilder:validation:MinProperties=1
type KubeadmConfigTemplateResource struct {
	// metadata holds labels and annotations for the KubeadmConfigs made from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the KubeadmConfigs made from the template.
	// +optional
	Spec KubeadmConfigSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubeadmconfigtemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=bootstrap-kubeadm"}
// +kubebuilder:printcolumn:name="ClusterClass",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="ClusterClass")].name`,description="ClusterClass that owns this template"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="Cluster")].name`,description="Cluster that owns this template"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the KubeadmConfigTemplate was created"

// KubeadmConfigTemplate is a template for KubeadmConfigs: MachineDeployments,
// MachineSets and MachinePools make one KubeadmConfig from it per Machine.
type KubeadmConfigTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +optional
	Spec KubeadmConfigTemplateSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// KubeadmConfigTemplateList is a list of KubeadmConfigTemplates.
type KubeadmConfigTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the KubeadmConfigTemplates.
	Items []KubeadmConfigTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KubeadmConfigTemplate{}, &KubeadmConfigTemplateList{})
}
