package v1beta2

import (
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Labels, annotations and finalizers that are part of the Cluster API
// contract. Tools outside Capstan (kubectl users, clusterctl, the cluster
// autoscaler) read and write them, so their values never change.
const (
	// ClusterNameLabel names the Cluster an object belongs to.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"

	// ProviderNameLabel names the provider that installed a CRD or object.
	ProviderNameLabel = "cluster.x-k8s.io/provider"

	// MachineControlPlaneLabel marks a Machine that is part of the control plane.
	MachineControlPlaneLabel = "cluster.x-k8s.io/control-plane"

	// MachineControlPlaneNameLabel names the control plane object that owns a Machine.
	MachineControlPlaneNameLabel = "cluster.x-k8s.io/control-plane-name"

	// MachineSetNameLabel names the MachineSet that owns a Machine.
	MachineSetNameLabel = "cluster.x-k8s.io/set-name"

	// MachineDeploymentNameLabel names the MachineDeployment a MachineSet or Machine belongs to.
	MachineDeploymentNameLabel = "cluster.x-k8s.io/deployment-name"

	// TemplateClonedFromNameAnnotation and TemplateClonedFromGroupKindAnnotation
	// record, on an object cloned from a template, which template it was.
	TemplateClonedFromNameAnnotation      = "cluster.x-k8s.io/cloned-from-name"
	TemplateClonedFromGroupKindAnnotation = "cluster.x-k8s.io/cloned-from-groupkind"

	// MachineCertificatesExpiryDateAnnotation records, in RFC 3339, when a
	// Machine's control-plane certificates expire.
	MachineCertificatesExpiryDateAnnotation = "machine.cluster.x-k8s.io/certificates-expiry"

	// PausedAnnotation stops every controller from acting on the object that carries it.
	PausedAnnotation = "cluster.x-k8s.io/paused"

	// DeleteMachineAnnotation marks a Machine to be chosen first when its owner scales down.
	DeleteMachineAnnotation = "cluster.x-k8s.io/delete-machine"

	// RemediateMachineAnnotation asks the MachineHealthCheck to treat a Machine as unhealthy.
	RemediateMachineAnnotation = "cluster.x-k8s.io/remediate-machine"

	// PreDrainDeleteHookAnnotationPrefix starts the name of an annotation that holds a
	// Machine's deletion before its node is drained, until the annotation is removed.
	PreDrainDeleteHookAnnotationPrefix = "pre-drain.delete.hook.machine.cluster.x-k8s.io"

	// PreTerminateDeleteHookAnnotationPrefix starts the name of an annotation that holds a
	// Machine's deletion before its infrastructure is deleted, until the annotation is removed.
	PreTerminateDeleteHookAnnotationPrefix = "pre-terminate.delete.hook.machine.cluster.x-k8s.io"

	// ExcludeNodeDrainingAnnotation skips draining the node of the Machine that carries it.
	ExcludeNodeDrainingAnnotation = "machine.cluster.x-k8s.io/exclude-node-draining"

	// ClusterFinalizer keeps a Cluster until everything it owns is gone.
	ClusterFinalizer = "cluster.cluster.x-k8s.io"

	// MachineFinalizer keeps a Machine until its node and infrastructure are gone.
	MachineFinalizer = "machine.cluster.x-k8s.io"

	// ContractVersionLabel is the CRD label, repeated per contract version, that tells which
	// API version of a provider kind implements the v1beta2 contract.
	ContractVersionLabel = "cluster.x-k8s.io/v1beta2"
)

// ContractVersionedObjectReference points at an object whose API version is
// not fixed in the reference: the version is found from the CRD's contract
// label, so a provider can move to a new API version without every reference
// being rewritten.
// +structType=atomic
type ContractVersionedObjectReference struct {
	// kind of the referenced object, for example "LocalCluster".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`
	Kind string `json:"kind,omitempty"`

	// name of the referenced object, in the namespace of the referring object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`

	// apiGroup of the referenced object, for example "infrastructure.cluster.x-k8s.io".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup string `json:"apiGroup,omitempty"`
}

// IsDefined tells whether the reference names anything.
func (r ContractVersionedObjectReference) IsDefined() bool {
	return r.Kind != "" || r.Name != "" || r.APIGroup != ""
}

// GroupKind is the API group and kind the reference points at.
func (r ContractVersionedObjectReference) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.APIGroup, Kind: r.Kind}
}

// ObjectMeta is the part of an object's metadata that a template may set on
// the objects made from it: labels and annotations only.
// +kubebuilder:validation:MinProperties=1
type ObjectMeta struct {
	// labels to put on objects made from the template.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations to put on objects made from the template.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// APIEndpoint is where a Kubernetes API server answers.
// +kubebuilder:validation:MinProperties=1
type APIEndpoint struct {
	// host is a DNS name or an IP address.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host,omitempty"`

	// port is the TCP port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// IsValid tells whether both host and port are set.
func (e APIEndpoint) IsValid() bool { return e.Host != "" && e.Port != 0 }

// IsZero tells whether neither host nor port is set.
func (e APIEndpoint) IsZero() bool { return e.Host == "" && e.Port == 0 }

// String renders the endpoint as host:port.
func (e APIEndpoint) String() string {
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

// ConditionPolarity says whether a condition is good when True or when False.
// +kubebuilder:validation:Enum=Positive;Negative
type ConditionPolarity string

const (
	// PositivePolarityCondition is good when its status is True.
	PositivePolarityCondition ConditionPolarity = "Positive"
	// NegativePolarityCondition is good when its status is False.
	NegativePolarityCondition ConditionPolarity = "Negative"
)

// MachineReadinessGate names an extra condition that must hold before a
// Machine counts as Ready.
type MachineReadinessGate struct {
	// conditionType is the type of a condition in the Machine's status.conditions.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`
	ConditionType string `json:"conditionType,omitempty"`

	// polarity tells whether the condition is good when True (Positive, the default) or False.
	// +optional
	Polarity ConditionPolarity `json:"polarity,omitempty"`
}

// MachineNamingSpec controls how the names of new Machines are built.
// InfraMachines and bootstrap configs made for a Machine take the same name.
// +kubebuilder:validation:MinProperties=1
type MachineNamingSpec struct {
	// template is a Go template that renders the name of each new Machine.
	// It must contain "{{ .random }}" (five random characters) so that names
	// never collide; it may also use "{{ .cluster.name }}" and the name of the
	// owning object. A rendered name longer than 63 characters is cut to 58
	// and given a random suffix. When unset, the owner's name followed by a
	// random suffix is used.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.contains('{{ .random }}')",message="template must contain {{ .random }} so that every Machine gets a unique name"
	Template string `json:"template,omitempty"`
}

// MachineAddressType is the kind of a Machine address.
// +kubebuilder:validation:Enum=Hostname;ExternalIP;InternalIP;ExternalDNS;InternalDNS
type MachineAddressType string

// The address kinds a provider may report.
const (
	MachineHostName    MachineAddressType = "Hostname"
	MachineExternalIP  MachineAddressType = "ExternalIP"
	MachineInternalIP  MachineAddressType = "InternalIP"
	MachineExternalDNS MachineAddressType = "ExternalDNS"
	MachineInternalDNS MachineAddressType = "InternalDNS"
)

// MachineAddress is one address at which a Machine can be reached.
type MachineAddress struct {
	// type of the address: Hostname, ExternalIP, InternalIP, ExternalDNS or InternalDNS.
	// +required
	Type MachineAddressType `json:"type,omitempty"`

	// address is the IP address or DNS name itself.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Address string `json:"address,omitempty"`
}

// MachineAddresses is the address list an infrastructure provider reports
// for a Machine.
// +kubebuilder:validation:MaxItems=256
// +listType=atomic
type MachineAddresses []MachineAddress

// MachineTaintPropagation says when a Machine's taint is put on its Node.
// +kubebuilder:validation:Enum=Always;OnInitialization
type MachineTaintPropagation string

const (
	// MachineTaintPropagationAlways keeps the taint on the Node at all times:
	// it is added back if removed, and removed from the Node when it is
	// removed from the Machine.
	MachineTaintPropagationAlways MachineTaintPropagation = "Always"

	// MachineTaintPropagationOnInitialization puts the taint on the Node once,
	// when the Node is first initialized, and leaves it alone afterwards.
	MachineTaintPropagationOnInitialization MachineTaintPropagation = "OnInitialization"
)

// MachineTaint is a Node taint that Capstan manages on a Machine's Node.
type MachineTaint struct {
	// key of the taint: a qualified name (at most 63 characters) with an
	// optional DNS subdomain prefix and a "/". The pattern bounds the name's
	// length; a CEL rule cannot, because its estimated cost is multiplied by
	// every list a taint sits in (a topology's worker groups) and exceeds
	// the API server's budget.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`
	// +kubebuilder:validation:XValidation:rule="!(self in ['node.cluster.x-k8s.io/uninitialized', 'node.cluster.x-k8s.io/outdated-revision'])",message="key is reserved for the taints Cluster API sets itself: choose another key"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('node.kubernetes.io/') || self == 'node.kubernetes.io/out-of-service'",message="key must not have the prefix node.kubernetes.io/, which belongs to the kubelet and the node lifecycle controller (only node.kubernetes.io/out-of-service is allowed): choose another key"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('node.cloudprovider.kubernetes.io/')",message="key must not have the prefix node.cloudprovider.kubernetes.io/, which belongs to the cloud controller manager: choose another key"
	// +kubebuilder:validation:XValidation:rule="self != 'node-role.kubernetes.io/master'",message="node-role.kubernetes.io/master is deprecated since Kubernetes 1.24: use node-role.kubernetes.io/control-plane"
	Key string `json:"key,omitempty"`

	// value of the taint, a label value of at most 63 characters.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	Value string `json:"value,omitempty"`

	// effect of the taint on Pods: NoSchedule, PreferNoSchedule or NoExecute.
	// +required
	// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
	Effect corev1.TaintEffect `json:"effect,omitempty"`

	// propagation says when the taint is put on the Node: Always (kept in
	// sync) or OnInitialization (added once when the Node joins).
	// +required
	Propagation MachineTaintPropagation `json:"propagation,omitempty"`
}

// KubernetesVersionPattern is the shape every Kubernetes version in this API must
// have: a leading "v", then major.minor.patch, then optional pre-release or
// build parts, for example v1.33.1 or v1.34.0-rc.1+build.5.
const KubernetesVersionPattern = `^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-+][-0-9a-zA-Z_.+]*)?$`

// StatusUpgradePlanVersion is one step of an upgrade plan.
type StatusUpgradePlanVersion struct {
	// version is the Kubernetes version of the step.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`
}
