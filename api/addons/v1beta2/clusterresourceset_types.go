package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterResourceSetKind is the kind name of ClusterResourceSet.
const ClusterResourceSetKind = "ClusterResourceSet"

// ClusterResourceSetFinalizer holds a ClusterResourceSet back from deletion
// until its entries are gone from every ClusterResourceSetBinding.
const ClusterResourceSetFinalizer = "addons.cluster.x-k8s.io"

// ClusterResourceSetSecretType is the one Secret type a ClusterResourceSet
// reads manifests from. Requiring it keeps a ClusterResourceSet from copying
// an arbitrary Secret (a token, a certificate) into workload clusters.
const ClusterResourceSetSecretType corev1.SecretType = "addons.cluster.x-k8s.io/resource-set" //nolint:gosec // a type name, not a credential

// The kinds a ClusterResourceSet can take manifests from.
const (
	SecretClusterResourceSetResourceKind    ClusterResourceSetResourceKind = "Secret"
	ConfigMapClusterResourceSetResourceKind ClusterResourceSetResourceKind = "ConfigMap"
)

// ClusterResourceSetResourceKind is the kind of a resource named in
// spec.resources.
type ClusterResourceSetResourceKind string

// ClusterResourceSetStrategy says when a resource is applied again.
type ClusterResourceSetStrategy string

const (
	// ClusterResourceSetStrategyApplyOnce creates each resource's objects once
	// per Cluster and never touches them again; the default.
	ClusterResourceSetStrategyApplyOnce ClusterResourceSetStrategy = "ApplyOnce"
	// ClusterResourceSetStrategyReconcile applies a resource's objects again
	// whenever the resource's content (its hash) changes.
	ClusterResourceSetStrategyReconcile ClusterResourceSetStrategy = "Reconcile"
)

// ClusterResourceSetSpec says which Clusters get which manifests, and how.
type ClusterResourceSetSpec struct {
	// clusterSelector picks, by label, the Clusters of the
	// ClusterResourceSet's namespace that get its resources. It must not be
	// empty, and cannot change once set.
	// +required
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="spec.clusterSelector must not be empty: give matchLabels or matchExpressions that pick the Clusters to receive the resources"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.clusterSelector is immutable: create a new ClusterResourceSet to target other Clusters"
	ClusterSelector metav1.LabelSelector `json:"clusterSelector,omitempty,omitzero"`

	// resources are the ConfigMaps and Secrets, in the ClusterResourceSet's
	// namespace, whose data hold the manifests to apply. Each data value may
	// hold one or more YAML or JSON documents, or a JSON list.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Resources []ResourceRef `json:"resources,omitempty"`

	// strategy says when resources are applied again: ApplyOnce (the
	// default) creates them once per Cluster; Reconcile applies them again
	// whenever their content changes. It cannot change once set.
	// +optional
	// +kubebuilder:default=ApplyOnce
	// +kubebuilder:validation:Enum=ApplyOnce;Reconcile
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.strategy is immutable: create a new ClusterResourceSet to use another strategy"
	Strategy string `json:"strategy,omitempty"`
}

// ResourceRef names a ConfigMap or Secret in the ClusterResourceSet's
// namespace.
type ResourceRef struct {
	// name of the ConfigMap or Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// kind is Secret or ConfigMap.
	// +required
	// +kubebuilder:validation:Enum=Secret;ConfigMap
	Kind string `json:"kind,omitempty"`
}

// ClusterResourceSetStatus is what the controller observed.
// +kubebuilder:validation:MinProperties=1
type ClusterResourceSetStatus struct {
	// conditions report the ClusterResourceSet's state: ResourcesApplied
	// (every resource is applied to every selected, initialised Cluster) and
	// Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status describes.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ClusterResourceSet applies the manifests of ConfigMaps and Secrets to the
// workload clusters of the Clusters its selector picks. It suits small,
// static add-ons (a CNI, a cloud provider's manifests); an add-on provider
// is the tool for anything that needs templating or upgrades.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:path=clusterresourcesets,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=cluster-api"}
// +kubebuilder:printcolumn:name="Applied",type="string",JSONPath=`.status.conditions[?(@.type=="ResourcesApplied")].status`,description="Whether every resource is applied to every selected Cluster"
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the ClusterResourceSet was created"
type ClusterResourceSet struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which Clusters get which manifests.
	// +required
	Spec ClusterResourceSetSpec `json:"spec,omitempty,omitzero"`

	// status is what the controller observed.
	// +optional
	Status ClusterResourceSetStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the ClusterResourceSet's conditions.
func (c *ClusterResourceSet) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the ClusterResourceSet's conditions.
func (c *ClusterResourceSet) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// ClusterResourceSetList is a list of ClusterResourceSets.
// +kubebuilder:object:root=true
type ClusterResourceSetList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the ClusterResourceSets.
	Items []ClusterResourceSet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterResourceSet{}, &ClusterResourceSetList{})
}
