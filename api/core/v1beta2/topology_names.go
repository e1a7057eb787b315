package v1beta2

// Labels and annotations of managed topologies. Upstream tools (clusterctl,
// the autoscaler, the Cluster API book's examples) read and set them, so the
// values are the contract's.
const (
	// ClusterTopologyOwnedLabel marks an object a Cluster's topology made.
	ClusterTopologyOwnedLabel = "topology.cluster.x-k8s.io/owned"

	// ClusterTopologyMachineDeploymentNameLabel names the
	// workers.machineDeployments entry a topology-made object belongs to.
	ClusterTopologyMachineDeploymentNameLabel = "topology.cluster.x-k8s.io/deployment-name"

	// ClusterTopologyMachinePoolNameLabel names the workers.machinePools
	// entry a topology-made object belongs to.
	ClusterTopologyMachinePoolNameLabel = "topology.cluster.x-k8s.io/pool-name"

	// ClusterTopologyHoldUpgradeSequenceAnnotation on a topology's
	// MachineDeployment or MachinePool holds its upgrade, and that of every
	// one after it in the upgrade order.
	ClusterTopologyHoldUpgradeSequenceAnnotation = "topology.cluster.x-k8s.io/hold-upgrade-sequence"

	// ClusterTopologyDeferUpgradeAnnotation on a topology's MachineDeployment
	// or MachinePool defers its upgrade; the others go on.
	ClusterTopologyDeferUpgradeAnnotation = "topology.cluster.x-k8s.io/defer-upgrade"

	// ClusterTopologyUpgradeConcurrencyAnnotation on a Cluster bounds how
	// many MachineDeployments (and, separately, MachinePools) upgrade at once
	// (default 1).
	ClusterTopologyUpgradeConcurrencyAnnotation = "topology.cluster.x-k8s.io/upgrade-concurrency"

	// ClusterTopologyUnsafeUpdateClassNameAnnotation on a Cluster lets a
	// topology be added to a Cluster created without one (the admission
	// webhook refuses that otherwise). Its value is not read.
	ClusterTopologyUnsafeUpdateClassNameAnnotation = "unsafe.topology.cluster.x-k8s.io/disable-update-class-name-check"

	// ClusterTopologyUnsafeUpdateVersionAnnotation on a Cluster turns off the
	// admission webhook's checks of a change of spec.topology.version (no
	// downgrade, one minor at a time, no change while an upgrade is under
	// way). Its value is not read.
	ClusterTopologyUnsafeUpdateVersionAnnotation = "unsafe.topology.cluster.x-k8s.io/disable-update-version-check"

	// TopologyDryRunAnnotation marks the requests of a topology's server-side
	// apply dry runs, so that defaulting webhooks can tell them apart.
	TopologyDryRunAnnotation = "topology.cluster.x-k8s.io/dry-run"
)

// Reasons of the Cluster's TopologyReconciled condition.
const (
	ClusterTopologyReconcileSucceededReason                          = "ReconcileSucceeded"
	ClusterTopologyReconciledFailedReason                            = "ReconcileFailed"
	ClusterTopologyReconciledClusterCreatingReason                   = "ClusterCreating"
	ClusterTopologyReconciledControlPlaneUpgradePendingReason        = "ControlPlaneUpgradePending"
	ClusterTopologyReconciledMachineDeploymentsCreatePendingReason   = "MachineDeploymentsCreatePending"
	ClusterTopologyReconciledMachineDeploymentsUpgradePendingReason  = "MachineDeploymentsUpgradePending"
	ClusterTopologyReconciledMachineDeploymentsUpgradeDeferredReason = "MachineDeploymentsUpgradeDeferred"
	ClusterTopologyReconciledMachinePoolsUpgradePendingReason        = "MachinePoolsUpgradePending"
	ClusterTopologyReconciledMachinePoolsCreatePendingReason         = "MachinePoolsCreatePending"
	ClusterTopologyReconciledMachinePoolsUpgradeDeferredReason       = "MachinePoolsUpgradeDeferred"
	ClusterTopologyReconciledHookBlockingReason                      = "LifecycleHookBlocking"
	ClusterTopologyReconciledClusterUpgradingReason                  = "ClusterUpgrading"
	ClusterTopologyReconciledClusterClassNotReconciledReason         = "ClusterClassNotReconciled"
)
