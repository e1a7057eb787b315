package v1beta2

// Condition types that appear in status.conditions of the kinds in this
// group. Controllers outside Capstan read them (kubectl columns, clusterctl
// describe, GitOps health checks), so their spelling is part of the API.
const (
	// AvailableCondition: the object is usable (a Cluster serves, a
	// MachineDeployment has enough available Machines, a Machine has been
	// Ready for minReadySeconds).
	AvailableCondition = "Available"

	// ReadyCondition: a Machine's bootstrap, infrastructure, Node and
	// readiness gates are all good.
	ReadyCondition = "Ready"

	// UpToDateCondition: a Machine matches the spec of its owner.
	UpToDateCondition = "UpToDate"

	// UpdatingCondition: a Machine is being changed in place.
	UpdatingCondition = "Updating"

	// BootstrapConfigReadyCondition mirrors the Ready condition of a
	// Machine's bootstrap config.
	BootstrapConfigReadyCondition = "BootstrapConfigReady"

	// InfrastructureReadyCondition mirrors the Ready condition of the
	// infrastructure object of a Cluster or Machine.
	InfrastructureReadyCondition = "InfrastructureReady"

	// NodeReadyCondition mirrors the Ready condition of a Machine's Node.
	NodeReadyCondition = "NodeReady"

	// NodeHealthyCondition: a Machine's Node is Ready and reports no memory,
	// disk or PID pressure.
	NodeHealthyCondition = "NodeHealthy"

	// HealthCheckSucceededCondition: the MachineHealthChecks that watch a
	// Machine find it healthy.
	HealthCheckSucceededCondition = "HealthCheckSucceeded"

	// OwnerRemediatedCondition: a MachineHealthCheck asked the Machine's
	// owner to remediate it; the owner updates or removes the condition.
	OwnerRemediatedCondition = "OwnerRemediated"

	// ExternallyRemediatedCondition: a MachineHealthCheck asked an external
	// remediation controller to act on the Machine.
	ExternallyRemediatedCondition = "ExternallyRemediated"

	// RemediationAllowedCondition: a MachineHealthCheck may still start
	// remediations (its triggerIf limits are not exceeded).
	RemediationAllowedCondition = "RemediationAllowed"

	// MachinesReadyCondition summarises the Ready conditions of the Machines
	// a MachineSet or MachineDeployment controls.
	MachinesReadyCondition = "MachinesReady"

	// MachinesUpToDateCondition summarises the UpToDate conditions of the
	// Machines a MachineSet or MachineDeployment controls.
	MachinesUpToDateCondition = "MachinesUpToDate"

	// RollingOutCondition: some Machines are not up to date yet.
	RollingOutCondition = "RollingOut"

	// ScalingUpCondition: there are fewer Machines than wanted.
	ScalingUpCondition = "ScalingUp"

	// ScalingDownCondition: there are more Machines than wanted.
	ScalingDownCondition = "ScalingDown"

	// RemediatingCondition: some controlled Machines are being remediated.
	RemediatingCondition = "Remediating"

	// DeletingCondition reports the progress of deleting the object.
	DeletingCondition = "Deleting"

	// PausedCondition: reconciliation is paused, by spec.paused or by the
	// cluster.x-k8s.io/paused annotation on the object or its Cluster.
	PausedCondition = "Paused"

	// ClusterControlPlaneInitializedCondition: the control plane has
	// accepted requests at least once. It never goes back to False.
	ClusterControlPlaneInitializedCondition = "ControlPlaneInitialized"

	// ClusterControlPlaneAvailableCondition mirrors the Available condition
	// of the Cluster's control plane object.
	ClusterControlPlaneAvailableCondition = "ControlPlaneAvailable"

	// ClusterWorkersAvailableCondition summarises the Available conditions
	// of the Cluster's MachineDeployments and MachinePools.
	ClusterWorkersAvailableCondition = "WorkersAvailable"

	// ClusterControlPlaneMachinesReadyCondition summarises the Ready
	// conditions of the control plane Machines.
	ClusterControlPlaneMachinesReadyCondition = "ControlPlaneMachinesReady"

	// ClusterWorkerMachinesReadyCondition summarises the Ready conditions of
	// the worker Machines.
	ClusterWorkerMachinesReadyCondition = "WorkerMachinesReady"

	// ClusterControlPlaneMachinesUpToDateCondition summarises the UpToDate
	// conditions of the control plane Machines.
	ClusterControlPlaneMachinesUpToDateCondition = "ControlPlaneMachinesUpToDate"

	// ClusterWorkerMachinesUpToDateCondition summarises the UpToDate
	// conditions of the worker Machines.
	ClusterWorkerMachinesUpToDateCondition = "WorkerMachinesUpToDate"

	// ClusterRemoteConnectionProbeCondition: the workload cluster's API
	// server can be reached.
	ClusterRemoteConnectionProbeCondition = "RemoteConnectionProbe"

	// ClusterTopologyReconciledCondition: the objects generated from the
	// Cluster's ClusterClass match its topology. Managed Clusters only.
	ClusterTopologyReconciledCondition = "TopologyReconciled"
)

// Condition reasons shared by several kinds.
const (
	AvailableReason        = "Available"
	NotAvailableReason     = "NotAvailable"
	AvailableUnknownReason = "AvailableUnknown"

	ReadyReason        = "Ready"
	NotReadyReason     = "NotReady"
	ReadyUnknownReason = "ReadyUnknown"

	UpToDateReason        = "UpToDate"
	NotUpToDateReason     = "NotUpToDate"
	UpToDateUnknownReason = "UpToDateUnknown"

	RollingOutReason    = "RollingOut"
	NotRollingOutReason = "NotRollingOut"

	ScalingUpReason    = "ScalingUp"
	NotScalingUpReason = "NotScalingUp"

	ScalingDownReason    = "ScalingDown"
	NotScalingDownReason = "NotScalingDown"

	RemediatingReason    = "Remediating"
	NotRemediatingReason = "NotRemediating"

	DeletingReason = "Deleting"
	// MachineDeletingWaitingForPreTerminateHookReason: the Machine is drained
	// and waits for its pre-terminate hooks; owners with such a hook act then.
	MachineDeletingWaitingForPreTerminateHookReason = "WaitingForPreTerminateHook"
	NotDeletingReason                               = "NotDeleting"
	DeletionCompletedReason                         = "DeletionCompleted"

	PausedReason    = "Paused"
	NotPausedReason = "NotPaused"

	// NoReplicasReason: there are no Machines to summarise.
	NoReplicasReason = "NoReplicas"

	// WaitingForReplicasSetReason: spec.replicas is not set yet.
	WaitingForReplicasSetReason = "WaitingForReplicasSet"

	// InvalidConditionReportedReason: a provider object reported a condition
	// that cannot be used, for example one without a status.
	InvalidConditionReportedReason = "InvalidConditionReported"

	// ObjectDoesNotExistReason: a referenced object does not exist (yet).
	ObjectDoesNotExistReason = "DoesNotExist"

	// ObjectDeletedReason: a referenced object has been deleted.
	ObjectDeletedReason = "Deleted"

	// InspectionFailedReason: the state of an object in the workload
	// cluster could not be read.
	InspectionFailedReason = "InspectionFailed"

	// ConnectionDownReason: the workload cluster cannot be reached.
	ConnectionDownReason = "ConnectionDown"

	// InternalErrorReason: something unexpected went wrong while computing
	// the condition; the message says what.
	InternalErrorReason = "InternalError"
)
