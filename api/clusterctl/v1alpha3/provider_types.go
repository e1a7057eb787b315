package v1alpha3

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderKind is the kind name of Provider.
const ProviderKind = "Provider"

// ProviderType is the role a provider plays in Cluster API.
type ProviderType string

// The provider types clusterctl knows.
const (
	// CoreProviderType is Cluster API's core: Cluster, Machine, MachineSet, ...
	CoreProviderType ProviderType = "CoreProvider"
	// BootstrapProviderType turns a Machine into bootstrap data (kubeadm's config).
	BootstrapProviderType ProviderType = "BootstrapProvider"
	// ControlPlaneProviderType runs a cluster's control plane (KubeadmControlPlane).
	ControlPlaneProviderType ProviderType = "ControlPlaneProvider"
	// InfrastructureProviderType creates the machines and networks.
	InfrastructureProviderType ProviderType = "InfrastructureProvider"
	// IPAMProviderType hands out addresses.
	IPAMProviderType ProviderType = "IPAMProvider"
	// RuntimeExtensionProviderType serves runtime extension hooks.
	RuntimeExtensionProviderType ProviderType = "RuntimeExtensionProvider"
	// AddonProviderType installs add-ons into workload clusters.
	AddonProviderType ProviderType = "AddonProvider"
)

// ManifestLabel is the value clusterctl gives the cluster.x-k8s.io/provider
// label on a provider's components, which is also the name of its Provider
// object: the core keeps its bare name, every other type gets its prefix
// ("bootstrap-kubeadm", "infrastructure-aws").
func ManifestLabel(name string, t ProviderType) string {
	prefix := map[ProviderType]string{
		BootstrapProviderType:        "bootstrap-",
		ControlPlaneProviderType:     "control-plane-",
		InfrastructureProviderType:   "infrastructure-",
		IPAMProviderType:             "ipam-",
		RuntimeExtensionProviderType: "runtime-extension-",
		AddonProviderType:            "addon-",
	}[t]
	return prefix + name
}

// The schema is as loose as clusterctl's own: clusterctl writes Provider
// objects into the same CRD, and a type or version a newer clusterctl
// writes must not be refused by Capstan's copy of the definition.

// Provider is one entry of clusterctl's inventory: a provider installed in
// the management cluster, in the namespace it runs in.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=providers,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io/core=inventory"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the provider was recorded"
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".type"
// +kubebuilder:printcolumn:name="Provider",type="string",JSONPath=".providerName"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".version"
type Provider struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata. The name is the
	// provider's ManifestLabel.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// providerName is the provider's name without its type, for example
	// "kubeadm" or "aws"; "cluster-api" for the core.
	// +optional
	ProviderName string `json:"providerName,omitempty"`

	// type is the provider's role: CoreProvider, BootstrapProvider,
	// ControlPlaneProvider, InfrastructureProvider, IPAMProvider,
	// RuntimeExtensionProvider or AddonProvider.
	// +optional
	Type string `json:"type,omitempty"`

	// version is the installed version of the provider, a semantic version
	// with a leading "v" (clusterctl parses it so).
	// +optional
	Version string `json:"version,omitempty"`

	// watchedNamespace is the one namespace the provider's controllers
	// watch; empty (the only value the current contract allows) means all.
	// Deprecated: kept because clusterctl still reads and writes it.
	// +optional
	WatchedNamespace string `json:"watchedNamespace,omitempty"`
}

// ManifestLabel is the provider's cluster.x-k8s.io/provider label value and
// the name of its Provider object.
func (p *Provider) ManifestLabel() string {
	return ManifestLabel(p.ProviderName, ProviderType(p.Type))
}

// ProviderList is a list of Providers.
// +kubebuilder:object:root=true
type ProviderList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the Providers.
	Items []Provider `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Provider{}, &ProviderList{})
}
