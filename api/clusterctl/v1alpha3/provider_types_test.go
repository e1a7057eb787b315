package v1alpha3

import "testing"

// The object names clusterctl gives the providers Capstan runs.
func TestManifestLabel(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  ProviderType
		want string
	}{
		{"cluster-api", CoreProviderType, "cluster-api"},
		{"kubeadm", BootstrapProviderType, "bootstrap-kubeadm"},
		{"kubeadm", ControlPlaneProviderType, "control-plane-kubeadm"},
		{"local", InfrastructureProviderType, "infrastructure-local"},
		{"in-cluster", IPAMProviderType, "ipam-in-cluster"},
		{"test", RuntimeExtensionProviderType, "runtime-extension-test"},
		{"helm", AddonProviderType, "addon-helm"},
		{"odd", ProviderType("Unknown"), "odd"},
	} {
		p := Provider{ProviderName: tc.name, Type: string(tc.typ)}
		if got := p.ManifestLabel(); got != tc.want {
			t.Errorf("ManifestLabel(%q, %q) = %q, want %q", tc.name, tc.typ, got, tc.want)
		}
	}
}
