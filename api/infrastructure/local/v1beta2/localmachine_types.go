package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// LocalMachineFinalizer holds a LocalMachine until its process is stopped and
// its directory removed.
const LocalMachineFinalizer = "localmachine.infrastructure.cluster.x-k8s.io"

// LocalMachineSpec is the desired state of a LocalMachine.
type LocalMachineSpec struct {
	// providerID is local://<namespace>/<name>, set by the provider; the
	// machine's Node carries the same value.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.providerID is immutable once set"
	ProviderID string `json:"providerID,omitempty"`

	// failureDomain is where the machine runs: the owning Machine's
	// spec.failureDomain, filled in by the provider when left empty.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`
}

// LocalMachineInitializationStatus records the one-way steps of providing a
// machine.
// +kubebuilder:validation:MinProperties=1
type LocalMachineInitializationStatus struct {
	// provisioned is true once the machine's process was first started.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// LocalMachinePhase is what the machine's process reports of itself.
type LocalMachinePhase string

// The phases of a machine's process. Booting, Running and Failed come from
// the process itself (status.json); Pending and Exited are the provider's.
const (
	// LocalMachinePhasePending: the process has not been started yet.
	LocalMachinePhasePending LocalMachinePhase = "Pending"
	// LocalMachinePhaseBooting: the process runs its bootstrap data.
	LocalMachinePhaseBooting LocalMachinePhase = "Booting"
	// LocalMachinePhaseRunning: the machine is up.
	LocalMachinePhaseRunning LocalMachinePhase = "Running"
	// LocalMachinePhaseFailed: the process reports it cannot go on.
	LocalMachinePhaseFailed LocalMachinePhase = "Failed"
	// LocalMachinePhaseExited: the process is gone. It is not restarted,
	// as a dead machine stays dead; a MachineHealthCheck replaces it.
	LocalMachinePhaseExited LocalMachinePhase = "Exited"
)

// LocalMachineProcess is the state of the machine's process, so that
// `kubectl get localmachines` explains what the machine is doing.
type LocalMachineProcess struct {
	// pid of the machine's process, 0 when none runs.
	// +optional
	PID int32 `json:"pid,omitempty"`

	// phase: Pending, Booting, Running, Failed or Exited.
	// +optional
	// +kubebuilder:validation:Enum=Pending;Booting;Running;Failed;Exited
	Phase LocalMachinePhase `json:"phase,omitempty"`

	// message is the process's own word on its phase.
	// +optional
	// +kubebuilder:validation:MaxLength=10240
	Message string `json:"message,omitempty"`

	// since is when the process entered its phase.
	// +optional
	Since metav1.Time `json:"since,omitempty,omitzero"`

	// nodeName is the name of the machine's Node.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName,omitempty"`

	// bootstrapComplete is true once every bootstrap step ran.
	// +optional
	BootstrapComplete bool `json:"bootstrapComplete,omitempty"`

	// bootstrapSkipped lists the bootstrap steps a local machine cannot
	// perform and skipped (for example package installs).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	BootstrapSkipped []string `json:"bootstrapSkipped,omitempty"`

	// bootstrapFailed says which bootstrap step failed, and why.
	// +optional
	// +kubebuilder:validation:MaxLength=10240
	BootstrapFailed string `json:"bootstrapFailed,omitempty"`

	// dir is the machine's directory on the management host; its node.log
	// is the machine's console.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Dir string `json:"dir,omitempty"`
}

// LocalMachineStatus is the observed state of a LocalMachine.
// +kubebuilder:validation:MinProperties=1
type LocalMachineStatus struct {
	// conditions: Ready, ProcessRunning, BootstrapSucceeded, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tells whether the machine was provisioned.
	// +optional
	Initialization LocalMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// addresses of the machine: its loopback IP and hostname.
	// +optional
	Addresses clusterv1.MachineAddresses `json:"addresses,omitempty"`

	// failureDomain the machine runs in.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// process is the state of the machine's process.
	// +optional
	Process LocalMachineProcess `json:"process,omitempty,omitzero"`
}

// LocalMachine is the infrastructure of one Machine: a `capstan node`
// process on the management host that boots from the Machine's bootstrap
// data.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=localmachines,shortName=lm,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-local"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`,description="Cluster the LocalMachine belongs to"
// +kubebuilder:printcolumn:name="Machine",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="Machine")].name`,description="Machine that owns the LocalMachine"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.process.phase",description="Pending, Booting, Running, Failed or Exited"
// +kubebuilder:printcolumn:name="PID",type="integer",JSONPath=".status.process.pid",description="The machine's process"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the machine's process runs"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.process.message",description="What the machine says of its phase",priority=10
// +kubebuilder:printcolumn:name="Provider ID",type="string",JSONPath=".spec.providerID",description="Provider ID of the machine",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the LocalMachine was created"
type LocalMachine struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the LocalMachine.
	// +optional
	Spec LocalMachineSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the LocalMachine.
	// +optional
	Status LocalMachineStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the LocalMachine's conditions.
func (m *LocalMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the LocalMachine's conditions.
func (m *LocalMachine) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// LocalMachineList is a list of LocalMachines.
// +kubebuilder:object:root=true
type LocalMachineList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the LocalMachines.
	Items []LocalMachine `json:"items"`
}

// LocalMachineTemplateSpec is the desired state of a LocalMachineTemplate.
type LocalMachineTemplateSpec struct {
	// template is copied into every LocalMachine made from this template.
	// +required
	Template LocalMachineTemplateResource `json:"template,omitempty,omitzero"`
}

// LocalMachineTemplateResource is the part of a LocalMachine a template fixes.
type LocalMachineTemplateResource struct {
	// metadata holds labels and annotations for the LocalMachines made from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the LocalMachines made from the template.
	// +optional
	Spec LocalMachineSpec `json:"spec,omitempty,omitzero"`
}

// LocalMachineTemplate is a template for LocalMachines: MachineDeployments,
// MachineSets and KubeadmControlPlanes make one LocalMachine from it per
// Machine.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=localmachinetemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-local"}
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the LocalMachineTemplate was created"
type LocalMachineTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec LocalMachineTemplateSpec `json:"spec,omitempty,omitzero"`
}

// LocalMachineTemplateList is a list of LocalMachineTemplates.
// +kubebuilder:object:root=true
type LocalMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the LocalMachineTemplates.
	Items []LocalMachineTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LocalMachine{}, &LocalMachineList{}, &LocalMachineTemplate{}, &LocalMachineTemplateList{})
}
