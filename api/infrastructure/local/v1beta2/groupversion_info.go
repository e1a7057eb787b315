// Package v1beta2 holds the infrastructure.cluster.x-k8s.io/v1beta2 API of
// Capstan's local infrastructure provider: LocalCluster and LocalMachine,
// whose machines are processes on the management host, and their templates.
// The kinds follow Cluster API's v1beta2 InfraCluster and InfraMachine
// contracts.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1beta2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Condition types and reasons the local provider reports.
const (
	// ReadyCondition summarises a LocalCluster (its load balancer listens)
	// or a LocalMachine (its process runs); the core mirrors it into the
	// Cluster's and Machine's InfrastructureReady.
	ReadyCondition = "Ready"

	// LoadBalancerReadyCondition: the cluster's load balancer process runs
	// and listens on the control-plane endpoint.
	LoadBalancerReadyCondition = "LoadBalancerReady"

	// ProcessRunningCondition: the machine's process runs (holds its lock).
	ProcessRunningCondition = "ProcessRunning"

	// BootstrapSucceededCondition: the machine ran its bootstrap data.
	BootstrapSucceededCondition = "BootstrapSucceeded"

	// PausedCondition: reconciliation is paused.
	PausedCondition = "Paused"

	// Reasons.
	ReadyReason                  = "Ready"
	NotReadyReason               = "NotReady"
	WaitingForClusterReason      = "WaitingForCluster"
	WaitingForMachineReason      = "WaitingForMachine"
	WaitingForBootstrapReason    = "WaitingForBootstrapData"
	WaitingForLoadBalancerReason = "WaitingForLoadBalancer"
	ProcessStartingReason        = "Starting"
	ProcessRunningReason         = "Running"
	ProcessExitedReason          = "Exited"
	ProcessFailedReason          = "Failed"
	StartFailedReason            = "StartFailed"
	BootstrappingReason          = "Bootstrapping"
	BootstrapSucceededReason     = "Succeeded"
	BootstrapFailedReason        = "Failed"
	DeletingReason               = "Deleting"
)
