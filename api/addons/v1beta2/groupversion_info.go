// Package v1beta2 holds the addons.cluster.x-k8s.io/v1beta2 API:
// ClusterResourceSet, which names ConfigMaps and Secrets of manifests to
// create in every workload cluster its selector picks, and
// ClusterResourceSetBinding, one per Cluster, which records what was applied
// there. Both have the names, fields and validation of the Cluster API
// v1beta2 contract, so manifests written for Cluster API work unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=addons.cluster.x-k8s.io
package v1beta2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "addons.cluster.x-k8s.io", Version: "v1beta2"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
