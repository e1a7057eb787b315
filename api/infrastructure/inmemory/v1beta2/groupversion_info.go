// Package v1beta2 holds the infrastructure.cluster.x-k8s.io/v1beta2 API of
// Capstan's in-memory infrastructure provider: InMemoryCluster and
// InMemoryMachine, whose machines are simulated inside the provider's
// process (thousands per host, for measuring the controllers), and their
// templates. The kinds follow Cluster API's v1beta2 InfraCluster and
// InfraMachine contracts.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Condition types and reasons the in-memory provider reports.
const (
	// ReadyCondition summarises an InMemoryCluster (its simulated API
	// server listens) or an InMemoryMachine (the simulated machine runs);
	// the core mirrors it into the Cluster's and Machine's
	// InfrastructureReady.
	ReadyCondition = "Ready"

	// Reasons.
	ReadyReason               = "Ready"
	WaitingForClusterReason   = "WaitingForCluster"
	WaitingForBootstrapReason = "WaitingForBootstrapData"
	ProvisioningReason        = "Provisioning"
	DeletingReason            = "Deleting"
)

// SimulatedDelays are how long each stage of a simulated machine's start
// takes. Unset fields take the provider's defaults (machine 10s, the others
// 2s, jitter 20%); "0s" makes a stage instant, for throughput runs.
type SimulatedDelays struct {
	// machine is the time from bootstrap data being ready to the machine
	// being provisioned (the "VM" booting).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="spec.delays.machine must be a non-negative duration such as 10s"
	Machine *metav1.Duration `json:"machine,omitempty"`

	// node is the time from provisioned to the machine's Node registering
	// Ready in the workload cluster.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="spec.delays.node must be a non-negative duration such as 2s"
	Node *metav1.Duration `json:"node,omitempty"`

	// apiServer is the time a control-plane machine's API server Pod takes
	// to become Ready after its Node.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="spec.delays.apiServer must be a non-negative duration such as 2s"
	APIServer *metav1.Duration `json:"apiServer,omitempty"`

	// etcd is the time a control-plane machine's etcd member takes to join
	// and its Pod to become Ready after its Node.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="spec.delays.etcd must be a non-negative duration such as 2s"
	Etcd *metav1.Duration `json:"etcd,omitempty"`

	// jitterPercent varies every delay uniformly by up to this share of it,
	// either way.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	JitterPercent *int32 `json:"jitterPercent,omitempty"`
}
