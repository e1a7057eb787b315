package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterResourceSetBindingKind is the kind name of ClusterResourceSetBinding.
const ClusterResourceSetBindingKind = "ClusterResourceSetBinding"

// ResourceBinding records one resource of a ClusterResourceSet as applied,
// or not, to the binding's Cluster.
type ResourceBinding struct {
	// The resource this record is about.
	ResourceRef `json:",inline"`

	// hash is a digest of the resource's data when it was last applied, in
	// the form sha256:<hex>. Under the Reconcile strategy a different digest
	// means the resource changed and is applied again; ApplyOnce ignores it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Hash string `json:"hash,omitempty"`

	// lastAppliedTime is when the resource was last applied.
	// +optional
	LastAppliedTime metav1.Time `json:"lastAppliedTime,omitempty,omitzero"`

	// applied tells whether the last application succeeded.
	// +required
	Applied *bool `json:"applied,omitempty"`
}

// ResourceSetBinding records what one ClusterResourceSet applied to the
// binding's Cluster.
type ResourceSetBinding struct {
	// clusterResourceSetName names the ClusterResourceSet.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClusterResourceSetName string `json:"clusterResourceSetName,omitempty"`

	// resources are the records of the ClusterResourceSet's resources.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Resources []ResourceBinding `json:"resources,omitempty"`
}

// ClusterResourceSetBindingSpec lists, for one Cluster, what each
// ClusterResourceSet selecting it has applied there.
type ClusterResourceSetBindingSpec struct {
	// bindings hold one entry per ClusterResourceSet.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Bindings []ResourceSetBinding `json:"bindings,omitempty"`

	// clusterName is the Cluster the binding is about. It cannot change.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.clusterName is immutable: a ClusterResourceSetBinding belongs to one Cluster"
	ClusterName string `json:"clusterName,omitempty"`
}

// ClusterResourceSetBinding records, for one Cluster (and named after it),
// which resources of which ClusterResourceSets were applied to its workload
// cluster and with what content. Every ClusterResourceSet with an entry owns
// it; it goes when the Cluster goes.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=clusterresourcesetbindings,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=cluster-api"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterName",description="Cluster the binding is about"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the ClusterResourceSetBinding was created"
type ClusterResourceSetBinding struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec records what was applied to the Cluster.
	// +required
	Spec ClusterResourceSetBindingSpec `json:"spec,omitempty,omitzero"`
}

// Entry returns the binding's entry for the named ClusterResourceSet, or
// nil.
func (b *ClusterResourceSetBinding) Entry(crsName string) *ResourceSetBinding {
	for i := range b.Spec.Bindings {
		if b.Spec.Bindings[i].ClusterResourceSetName == crsName {
			return &b.Spec.Bindings[i]
		}
	}
	return nil
}

// Record returns the entry's record of ref, or nil.
func (r *ResourceSetBinding) Record(ref ResourceRef) *ResourceBinding {
	for i := range r.Resources {
		if r.Resources[i].ResourceRef == ref {
			return &r.Resources[i]
		}
	}
	return nil
}

// ClusterResourceSetBindingList is a list of ClusterResourceSetBindings.
// +kubebuilder:object:root=true
type ClusterResourceSetBindingList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the ClusterResourceSetBindings.
	Items []ClusterResourceSetBinding `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterResourceSetBinding{}, &ClusterResourceSetBindingList{})
}
