// Package v1beta2 holds the infrastructure.cluster.x-k8s.io/v1beta2 API of
// Capstan's QEMU infrastructure provider: QEMUCluster, QEMUMachine and
// QEMUMachineTemplate, whose machines are QEMU virtual machines on the
// management host. The kinds follow Cluster API's v1beta2 InfraCluster and
// InfraMachine contracts as a third-party provider would.
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

// ProviderIDPrefix starts every QEMUMachine's provider ID:
// qemu://<namespace>/<name>.
const ProviderIDPrefix = "qemu://"

// Condition types the QEMU provider reports.
const (
	// ReadyCondition summarises a QEMUCluster (its load balancer listens)
	// or a QEMUMachine (its VM runs); the core mirrors it into the
	// Cluster's and Machine's InfrastructureReady.
	ReadyCondition = "Ready"

	// LoadBalancerReadyCondition: the cluster's load balancer process runs
	// and listens on the control-plane endpoint.
	LoadBalancerReadyCondition = "LoadBalancerReady"

	// VMProvisionedCondition: the machine's virtual machine was started
	// and its QEMU process still runs.
	VMProvisionedCondition = "VMProvisioned"

	// PausedCondition: reconciliation is paused.
	PausedCondition = "Paused"
	// BootstrapSucceededCondition on a QEMUMachine: the guest ran its
	// bootstrap data to the end (cloud-init finished and the bootstrap
	// wrote /run/cluster-api/bootstrap-success.complete). Unknown until
	// the guest reports, False with the reason when it failed.
	BootstrapSucceededCondition = "BootstrapSucceeded"
)

// Condition reasons.
const (
	ReadyReason                  = "Ready"
	WaitingForClusterReason      = "WaitingForCluster"
	WaitingForMachineReason      = "WaitingForMachine"
	WaitingForBootstrapReason    = "WaitingForBootstrapData"
	WaitingForLoadBalancerReason = "WaitingForLoadBalancer"
	InvalidEndpointReason        = "InvalidEndpoint"
	// BuildingImageReason: the guest image is being built (once per
	// recipe; minutes the first time).
	BuildingImageReason = "BuildingImage"
	// ImageFailedReason: building the guest image failed.
	ImageFailedReason = "ImageFailed"
	// NoPortsReason: no free host port could be chosen.
	NoPortsReason     = "NoFreePorts"
	StartingReason    = "Starting"
	RunningReason     = "Running"
	StartFailedReason = "StartFailed"
	// VMExitedReason: the VM's QEMU process is gone. It is not restarted;
	// a MachineHealthCheck (or deleting the Machine) replaces it.
	VMExitedReason = "VMExited"
	DeletingReason = "Deleting"
	// WaitingForBootstrapReportReason: the guest has not reported how its
	// bootstrap ended yet.
	WaitingForBootstrapReportReason = "WaitingForBootstrapReport"
	// BootstrapSucceededReason and BootstrapFailedReason: the guest's
	// report.
	BootstrapSucceededReason = "BootstrapSucceeded"
	BootstrapFailedReason    = "BootstrapFailed"
	// WaitingForControlPlaneReason: a worker's VM waits while a
	// control-plane VM of its cluster is still running its bootstrap (two
	// emulated VMs booting at once starve each other of the host's CPU).
	WaitingForControlPlaneReason = "WaitingForControlPlane"
	// InvalidNetworkReason: the Cluster's Pod or Service ranges cannot be
	// used with the VMs' networks.
	InvalidNetworkReason = "InvalidNetwork"
)
