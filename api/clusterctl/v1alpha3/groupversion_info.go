// Package v1alpha3 holds clusterctl's provider inventory
// (clusterctl.cluster.x-k8s.io/v1alpha3, kind Provider) as Capstan writes it.
// Upstream clusterctl learns what a management cluster runs only from these
// objects: `clusterctl upgrade plan` reads their versions, `clusterctl move`
// checks that the target holds the source's providers, and `clusterctl init`
// skips what is already there. So the kind, its fields and its labels match
// clusterctl's exactly; the code is Capstan's.
//
// +kubebuilder:object:generate=true
// +groupName=clusterctl.cluster.x-k8s.io
package v1alpha3

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
