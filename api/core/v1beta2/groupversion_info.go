// Package v1beta2 holds the cluster.x-k8s.io/v1beta2 API: Cluster, Machine,
// MachineSet, MachineDeployment, MachinePool and MachineHealthCheck, shaped
// exactly as the Cluster API v1beta2 contract documents them so that every
// tool written for Cluster API reads and writes Capstan's objects unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=cluster.x-k8s.io
package v1beta2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "cluster.x-k8s.io", Version: "v1beta2"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
