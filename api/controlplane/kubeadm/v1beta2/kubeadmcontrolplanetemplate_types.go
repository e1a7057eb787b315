package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// KubeadmControlPlaneTemplateSpec is the desired state of a
// KubeadmControlPlaneTemplate.
type KubeadmControlPlaneTemplateSpec struct {
	// template is what every KubeadmControlPlane made from this template
	// starts from.
	// +required
	Template KubeadmControlPlaneTemplateResource `json:"template,omitempty,omitzero"`
}

// KubeadmControlPlaneTemplateResource is the part of a KubeadmControlPlane a
// template provides. Its spec cannot change once created: make a new
// template instead.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="has(self.spec) == has(oldSelf.spec) && (!has(self.spec) || self.spec == oldSelf.spec)",message="spec.template.spec cannot be changed; create a new KubeadmControlPlaneTemplate and point the ClusterClass at it",fieldPath=".spec",reason=FieldValueForbidden
type KubeadmControlPlaneTemplateResource struct {
	// metadata holds labels and annotations for the KubeadmControlPlanes made
	// from this template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the KubeadmControlPlane spec to start from.
	// +optional
	Spec KubeadmControlPlaneTemplateResourceSpec `json:"spec,omitempty,omitzero"`
}

// KubeadmControlPlaneTemplateResourceSpec is a KubeadmControlPlane spec
// without replicas, version and the infrastructure reference: a Cluster's
// topology sets those on each KubeadmControlPlane it makes.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!self.?kubeadmConfigSpec.?clusterConfiguration.?certificateValidityPeriodDays.hasValue() || !self.?kubeadmConfigSpec.?clusterConfiguration.?caCertificateValidityPeriodDays.hasValue() || self.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays <= self.kubeadmConfigSpec.clusterConfiguration.caCertificateValidityPeriodDays",message="kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays must not exceed caCertificateValidityPeriodDays; lower it or raise caCertificateValidityPeriodDays",fieldPath=".kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays"
// +kubebuilder:validation:XValidation:rule="!self.?rollout.?before.?certificatesExpiryDays.hasValue() || !self.?kubeadmConfigSpec.?clusterConfiguration.?certificateValidityPeriodDays.hasValue() || self.rollout.before.certificatesExpiryDays < self.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays",message="rollout.before.certificatesExpiryDays must be less than kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays, or every new machine would be replaced at once; lower it",fieldPath=".rollout.before.certificatesExpiryDays"
// +kubebuilder:validation:XValidation:rule="self.?kubeadmConfigSpec.?initConfiguration.?timeouts.?controlPlaneComponentHealthCheckSeconds == self.?kubeadmConfigSpec.?joinConfiguration.?timeouts.?controlPlaneComponentHealthCheckSeconds",message="kubeadmConfigSpec.initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds and kubeadmConfigSpec.joinConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds must be equal (or both unset); set them to the same value",fieldPath=".kubeadmConfigSpec.joinConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds"
type KubeadmControlPlaneTemplateResourceSpec struct {
	// machineTemplate describes the control plane Machines.
	// +optional
	MachineTemplate KubeadmControlPlaneTemplateMachineTemplate `json:"machineTemplate,omitempty,omitzero"`

	// kubeadmConfigSpec is the kubeadm configuration used to initialize the
	// first control plane Machine and to join the others.
	// +optional
	KubeadmConfigSpec bootstrapv1.KubeadmConfigSpec `json:"kubeadmConfigSpec,omitempty,omitzero"`

	// rollout controls when and how control plane Machines are replaced.
	// +optional
	Rollout KubeadmControlPlaneRolloutSpec `json:"rollout,omitempty,omitzero"`

	// remediation controls how unhealthy control plane Machines are replaced.
	// +optional
	Remediation KubeadmControlPlaneRemediationSpec `json:"remediation,omitempty,omitzero"`

	// machineNaming sets how the names of new Machines are made.
	// +optional
	MachineNaming MachineNamingSpec `json:"machineNaming,omitempty,omitzero"`
}

// KubeadmControlPlaneTemplateMachineTemplate describes the control plane
// Machines of a template; the infrastructure reference is left to the
// Cluster's topology.
// +kubebuilder:validation:MinProperties=1
type KubeadmControlPlaneTemplateMachineTemplate struct {
	// metadata holds labels and annotations copied to every control plane
	// Machine.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec describes the control plane Machines.
	// +optional
	Spec KubeadmControlPlaneTemplateMachineTemplateSpec `json:"spec,omitempty,omitzero"`
}

// KubeadmControlPlaneTemplateMachineTemplateSpec is the part of a Machine's
// spec a KubeadmControlPlaneTemplate may set.
// +kubebuilder:validation:MinProperties=1
type KubeadmControlPlaneTemplateMachineTemplateSpec struct {
	// deletion holds the timeouts used when a control plane Machine is
	// deleted.
	// +optional
	Deletion KubeadmControlPlaneTemplateMachineTemplateDeletionSpec `json:"deletion,omitempty,omitzero"`

	// taints are the Node taints the control plane Machines get, copied to
	// each Machine's spec.taints.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Taints []clusterv1.MachineTaint `json:"taints,omitempty"`
}

// KubeadmControlPlaneTemplateMachineTemplateDeletionSpec holds the timeouts
// used when a control plane Machine is deleted.
// +kubebuilder:validation:MinProperties=1
type KubeadmControlPlaneTemplateMachineTemplateDeletionSpec struct {
	// nodeDrainTimeoutSeconds bounds the time spent draining the Machine's
	// node. Unset or 0 waits as long as draining takes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDrainTimeoutSeconds *int32 `json:"nodeDrainTimeoutSeconds,omitempty"`

	// nodeVolumeDetachTimeoutSeconds bounds the time spent waiting for the
	// node's volumes to detach. Unset or 0 waits as long as it takes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeVolumeDetachTimeoutSeconds *int32 `json:"nodeVolumeDetachTimeoutSeconds,omitempty"`

	// nodeDeletionTimeoutSeconds bounds the time spent trying to delete the
	// Machine's Node object. 0 retries forever; unset uses the Machine's own
	// default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDeletionTimeoutSeconds *int32 `json:"nodeDeletionTimeoutSeconds,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubeadmcontrolplanetemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=control-plane-kubeadm"}
// +kubebuilder:printcolumn:name="ClusterClass",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="ClusterClass")].name`,description="ClusterClass that owns the template"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the template was created"

// KubeadmControlPlaneTemplate is a reusable KubeadmControlPlane description,
// used by ClusterClasses to make the control planes of their Clusters.
type KubeadmControlPlaneTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +optional
	Spec KubeadmControlPlaneTemplateSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// KubeadmControlPlaneTemplateList is a list of KubeadmControlPlaneTemplates.
type KubeadmControlPlaneTemplateList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the KubeadmControlPlaneTemplates.
	Items []KubeadmControlPlaneTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KubeadmControlPlaneTemplate{}, &KubeadmControlPlaneTemplateList{})
}
