package v1alpha3

// Labels clusterctl reads. Their keys and values are part of how clusterctl
// recognises a provider's components, so they never change.
const (
	// ClusterctlLabel, with an empty value, is on every component clusterctl
	// installs. clusterctl move lists the CRDs that carry it to learn which
	// kinds to move, so every CRD whose objects belong to clusters carries it.
	ClusterctlLabel = "clusterctl.cluster.x-k8s.io"

	// ClusterctlCoreLabel marks clusterctl's own objects: its value is
	// ClusterctlCoreInventoryValue on the inventory CRD and the Provider
	// objects. The inventory CRD carries no ClusterctlLabel, so move never
	// moves the inventory.
	ClusterctlCoreLabel = "clusterctl.cluster.x-k8s.io/core"

	// ClusterctlCoreInventoryValue is ClusterctlCoreLabel's value on the
	// inventory.
	ClusterctlCoreInventoryValue = "inventory"

	// ProviderNameLabel names the provider a component belongs to, with the
	// provider's ManifestLabel as value (cluster-api, bootstrap-kubeadm, ...).
	ProviderNameLabel = "cluster.x-k8s.io/provider"
)
