package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// QEMUMachineFinalizer holds a QEMUMachine until its VM is stopped, its
// disk and directory removed and its load balancer backend withdrawn.
const QEMUMachineFinalizer = "qemumachine.infrastructure.cluster.x-k8s.io"

// Defaults of a QEMUMachine's size.
const (
	DefaultCPUs      = 2
	DefaultMemoryMiB = 2048
)

// QEMUMachineSpec is the desired state of a QEMUMachine.
type QEMUMachineSpec struct {
	// providerID is qemu://<namespace>/<name>, set by the provider; the
	// machine's Node carries the same value (the kubelet gets it from the
	// VM's cloud-init meta-data).
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

	// cpus is the number of virtual CPUs of the VM. A running VM cannot
	// change it: roll out a new QEMUMachineTemplate instead.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.cpus is immutable: a running VM cannot change its CPUs; roll out a new QEMUMachineTemplate instead"
	CPUs int32 `json:"cpus,omitempty"`

	// memoryMiB is the VM's memory in MiB; a Kubernetes node needs at least
	// 1024. A running VM cannot change it: roll out a new
	// QEMUMachineTemplate instead.
	// +optional
	// +kubebuilder:default=2048
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=262144
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.memoryMiB is immutable: a running VM cannot change its memory; roll out a new QEMUMachineTemplate instead"
	MemoryMiB int32 `json:"memoryMiB,omitempty"`
}

// QEMUMachineInitializationStatus records the one-way steps of providing a
// machine.
// +kubebuilder:validation:MinProperties=1
type QEMUMachineInitializationStatus struct {
	// provisioned is true once the machine's VM was first started.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// QEMUMachinePorts are the host ports forwarded into the VM, chosen once
// and kept here so that a restarted manager, and the VM itself, keep them.
type QEMUMachinePorts struct {
	// ssh is the host port on 127.0.0.1 forwarded to the guest's port 22.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	SSH int32 `json:"ssh,omitempty"`

	// apiServer is the host port on 127.0.0.1 forwarded to the guest's
	// kube-apiserver (port 6443); control-plane machines only. The
	// cluster's load balancer forwards to it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	APIServer int32 `json:"apiServer,omitempty"`
}

// QEMUMachineVM is the state of the machine's virtual machine, so that
// `kubectl get qemumachines` explains what the machine is doing.
type QEMUMachineVM struct {
	// pid of the machine's QEMU process, 0 when none runs.
	// +optional
	PID int32 `json:"pid,omitempty"`

	// state is QEMU's run state ("running", "paused", …), or "exited".
	// +optional
	// +kubebuilder:validation:MaxLength=64
	State string `json:"state,omitempty"`

	// dir is the machine's directory on the management host: its disk
	// overlay, cloud-init seed and serial console log.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Dir string `json:"dir,omitempty"`

	// image names the guest image the VM booted.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Image string `json:"image,omitempty"`
}

// QEMUMachineStatus is the observed state of a QEMUMachine.
// +kubebuilder:validation:MinProperties=1
type QEMUMachineStatus struct {
	// conditions: Ready, VMProvisioned, BootstrapSucceeded, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tells whether the machine was provisioned.
	// +optional
	Initialization QEMUMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// addresses of the machine: its hostname, its address on the cluster's
	// network (networkAddress) as InternalIP, and 127.0.0.1 as the address
	// the host reaches it at through the forwarded ports (status.ports).
	// The guest's own 10.0.2.15 is not listed: every VM has it.
	// +optional
	Addresses clusterv1.MachineAddresses `json:"addresses,omitempty"`

	// networkAddress is the VM's IPv4 address on the network its cluster's
	// VMs share, chosen once, before the VM starts, and kept for its life.
	// +optional
	// +kubebuilder:validation:MinLength=7
	// +kubebuilder:validation:MaxLength=15
	NetworkAddress string `json:"networkAddress,omitempty"`

	// failureDomain the machine runs in.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// ports are the host ports forwarded into the VM.
	// +optional
	Ports QEMUMachinePorts `json:"ports,omitempty,omitzero"`

	// vm is the state of the machine's virtual machine.
	// +optional
	VM QEMUMachineVM `json:"vm,omitempty,omitzero"`
}

// QEMUMachine is the infrastructure of one Machine: a QEMU virtual machine
// on the management host that boots the node image of the Machine's
// Kubernetes version with the Machine's bootstrap data as its cloud-init
// user-data.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=qemumachines,shortName=qm,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-qemu"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`,description="Cluster the QEMUMachine belongs to"
// +kubebuilder:printcolumn:name="Machine",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="Machine")].name`,description="Machine that owns the QEMUMachine"
// +kubebuilder:printcolumn:name="CPUs",type="integer",JSONPath=".spec.cpus",description="Virtual CPUs"
// +kubebuilder:printcolumn:name="Memory",type="integer",JSONPath=".spec.memoryMiB",description="Memory in MiB"
// +kubebuilder:printcolumn:name="VM",type="string",JSONPath=`.status.conditions[?(@.type=="VMProvisioned")].reason`,description="What the VM is doing"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the machine's VM runs"
// +kubebuilder:printcolumn:name="SSH",type="integer",JSONPath=".status.ports.ssh",description="Host port forwarded to the guest's ssh",priority=10
// +kubebuilder:printcolumn:name="PID",type="integer",JSONPath=".status.vm.pid",description="The VM's QEMU process",priority=10
// +kubebuilder:printcolumn:name="Provider ID",type="string",JSONPath=".spec.providerID",description="Provider ID of the machine",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the QEMUMachine was created"
type QEMUMachine struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the QEMUMachine.
	// +optional
	Spec QEMUMachineSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the QEMUMachine.
	// +optional
	Status QEMUMachineStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the QEMUMachine's conditions.
func (m *QEMUMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the QEMUMachine's conditions.
func (m *QEMUMachine) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// QEMUMachineList is a list of QEMUMachines.
// +kubebuilder:object:root=true
type QEMUMachineList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the QEMUMachines.
	Items []QEMUMachine `json:"items"`
}

// QEMUMachineTemplateSpec is the desired state of a QEMUMachineTemplate.
type QEMUMachineTemplateSpec struct {
	// template is copied into every QEMUMachine made from this template.
	// +required
	Template QEMUMachineTemplateResource `json:"template,omitempty,omitzero"`
}

// QEMUMachineTemplateResource is the part of a QEMUMachine a template fixes.
type QEMUMachineTemplateResource struct {
	// metadata holds labels and annotations for the QEMUMachines made from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the QEMUMachines made from the template; a
	// template names no providerID (each machine gets its own).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.providerID)",message="spec.template.spec.providerID must be empty: the provider gives each QEMUMachine its own"
	Spec QEMUMachineSpec `json:"spec,omitempty,omitzero"`
}

// QEMUMachineTemplate is a template for QEMUMachines: MachineDeployments,
// MachineSets and KubeadmControlPlanes make one QEMUMachine from it per
// Machine. Like every infrastructure template it is not edited in place:
// a change is a new template and a rollout.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=qemumachinetemplates,shortName=qmt,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-qemu"}
// +kubebuilder:printcolumn:name="CPUs",type="integer",JSONPath=".spec.template.spec.cpus",description="Virtual CPUs of each machine"
// +kubebuilder:printcolumn:name="Memory",type="integer",JSONPath=".spec.template.spec.memoryMiB",description="Memory of each machine in MiB"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the QEMUMachineTemplate was created"
type QEMUMachineTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec QEMUMachineTemplateSpec `json:"spec,omitempty,omitzero"`
}

// QEMUMachineTemplateList is a list of QEMUMachineTemplates.
// +kubebuilder:object:root=true
type QEMUMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the QEMUMachineTemplates.
	Items []QEMUMachineTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&QEMUMachine{}, &QEMUMachineList{}, &QEMUMachineTemplate{}, &QEMUMachineTemplateList{})
}
