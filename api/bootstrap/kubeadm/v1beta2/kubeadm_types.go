package v1beta2

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file holds the kubeadm configuration that a KubeadmConfig carries:
// the settings of "kubeadm init" (ClusterConfiguration, InitConfiguration)
// and of "kubeadm join" (JoinConfiguration), in the v1beta2 shape of the
// Cluster API contract. Capstan renders them into kubeadm's own config file.

// EncryptionAlgorithmType names the key algorithm used for certificates and keys.
// +kubebuilder:validation:Enum=ECDSA-P256;ECDSA-P384;RSA-2048;RSA-3072;RSA-4096
type EncryptionAlgorithmType string

// The key algorithms kubeadm and Capstan can generate.
const (
	EncryptionAlgorithmECDSAP256 EncryptionAlgorithmType = "ECDSA-P256"
	EncryptionAlgorithmECDSAP384 EncryptionAlgorithmType = "ECDSA-P384"
	EncryptionAlgorithmRSA2048   EncryptionAlgorithmType = "RSA-2048"
	EncryptionAlgorithmRSA3072   EncryptionAlgorithmType = "RSA-3072"
	EncryptionAlgorithmRSA4096   EncryptionAlgorithmType = "RSA-4096"
)

// isZero tells whether v holds its type's zero value.
func isZero(v any) bool { return reflect.ValueOf(v).IsZero() }

// InitConfiguration holds the settings that only "kubeadm init" uses: they
// apply to the first control plane machine and are not stored in the cluster.
// +kubebuilder:validation:MinProperties=1
type InitConfiguration struct {
	// bootstrapTokens are created by "kubeadm init" so that other nodes can join.
	// They are not uploaded to the cluster's kubeadm config map.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	BootstrapTokens []BootstrapToken `json:"bootstrapTokens,omitempty"`

	// nodeRegistration says how the first control plane node registers itself.
	// Keep it consistent with joinConfiguration.nodeRegistration for control plane machines.
	// +optional
	NodeRegistration NodeRegistrationOptions `json:"nodeRegistration,omitempty,omitzero"`

	// localAPIEndpoint is the address and port this machine's own API server
	// advertises and binds to. It differs from clusterConfiguration.controlPlaneEndpoint,
	// which is the shared endpoint of the whole control plane. kubeadm detects
	// the address of the default interface when it is not set.
	// +optional
	LocalAPIEndpoint APIEndpoint `json:"localAPIEndpoint,omitempty,omitzero"`

	// skipPhases lists "kubeadm init" phases to skip (see "kubeadm init --help").
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	SkipPhases []string `json:"skipPhases,omitempty"`

	// patches points kubeadm at patches for the static pods it writes during "kubeadm init".
	// +optional
	Patches Patches `json:"patches,omitempty,omitzero"`

	// timeouts overrides how long "kubeadm init" waits at each step.
	// +optional
	Timeouts Timeouts `json:"timeouts,omitempty,omitzero"`
}

// IsDefined tells whether any field of the InitConfiguration is set.
func (c *InitConfiguration) IsDefined() bool { return !isZero(*c) }

// ClusterConfiguration holds the settings shared by the whole cluster, used by
// "kubeadm init" and stored by kubeadm in the cluster.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="(has(self.caCertificateValidityPeriodDays) ? self.caCertificateValidityPeriodDays : 0) == (has(oldSelf.caCertificateValidityPeriodDays) ? oldSelf.caCertificateValidityPeriodDays : 0)",message="caCertificateValidityPeriodDays cannot be added, changed or removed once set: the cluster CA has already been issued with it",fieldPath=".caCertificateValidityPeriodDays"
type ClusterConfiguration struct {
	// etcd configures the cluster's etcd: local (stacked on the control plane
	// machines, the default) or external.
	// +optional
	Etcd Etcd `json:"etcd,omitempty,omitzero"`

	// controlPlaneEndpoint is a stable address for the control plane: an IP
	// address or DNS name, optionally followed by ":port". With several control
	// plane machines it is usually a load balancer in front of them. When it is
	// not set, Capstan fills it from the Cluster's spec.controlPlaneEndpoint.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ControlPlaneEndpoint string `json:"controlPlaneEndpoint,omitempty"`

	// apiServer holds extra settings for kube-apiserver.
	// +optional
	APIServer APIServer `json:"apiServer,omitempty,omitzero"`

	// controllerManager holds extra settings for kube-controller-manager.
	// +optional
	ControllerManager ControllerManager `json:"controllerManager,omitempty,omitzero"`

	// scheduler holds extra settings for kube-scheduler.
	// +optional
	Scheduler Scheduler `json:"scheduler,omitempty,omitzero"`

	// dns configures the cluster DNS add-on that kubeadm installs.
	// +optional
	DNS DNS `json:"dns,omitempty,omitzero"`

	// certificatesDir is the directory where certificates are written and
	// looked for. kubeadm uses /etc/kubernetes/pki when it is not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	CertificatesDir string `json:"certificatesDir,omitempty"`

	// imageRepository is the registry that control plane images are pulled
	// from. kubeadm uses registry.k8s.io when it is not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ImageRepository string `json:"imageRepository,omitempty"`

	// featureGates turns kubeadm feature gates on or off, by name.
	// +optional
	FeatureGates map[string]bool `json:"featureGates,omitempty"`

	// certificateValidityPeriodDays is how many days the certificates kubeadm
	// issues (not the CAs) stay valid. kubeadm uses 365 when it is not set.
	// Needs Kubernetes v1.31 or later.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1095
	CertificateValidityPeriodDays int32 `json:"certificateValidityPeriodDays,omitempty"`

	// caCertificateValidityPeriodDays is how many days the CA certificates
	// Capstan generates stay valid; 3650 when it is not set. It cannot be
	// changed once set.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=36500
	CACertificateValidityPeriodDays int32 `json:"caCertificateValidityPeriodDays,omitempty"`

	// encryptionAlgorithm is the key algorithm for the keys and certificates
	// generated for the cluster; RSA-2048 when it is not set. A change applies
	// to certificates issued afterwards only: existing CAs and service account
	// keys are kept. ECDSA-P384 needs Kubernetes v1.34 or later; the field
	// itself needs v1.31 or later.
	// +optional
	EncryptionAlgorithm EncryptionAlgorithmType `json:"encryptionAlgorithm,omitempty"`
}

// IsDefined tells whether any field of the ClusterConfiguration is set.
func (c *ClusterConfiguration) IsDefined() bool { return !isZero(*c) }

// APIServer holds the settings of the kube-apiserver static pods.
// +kubebuilder:validation:MinProperties=1
type APIServer struct {
	// extraArgs are command-line flags for kube-apiserver, named without the
	// leading dashes. They override the flags kubeadm sets. Each name may appear once.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +listMapKey=value
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, x.name == y.name))",message="extraArgs name must be unique: give each flag once, joining repeated values the way the flag expects"
	ExtraArgs []Arg `json:"extraArgs,omitempty"`

	// extraVolumes are host paths mounted into the kube-apiserver pod.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	ExtraVolumes []HostPathMount `json:"extraVolumes,omitempty"`

	// extraEnvs are environment variables for kube-apiserver; they win over
	// the ones kubeadm sets, proxy variables included. Needs Kubernetes v1.31 or later.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	ExtraEnvs *[]EnvVar `json:"extraEnvs,omitempty"`

	// certSANs are extra subject alternative names (DNS names or IPs) for the
	// API server's serving certificate.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	CertSANs []string `json:"certSANs,omitempty"`
}

// ControllerManager holds the settings of the kube-controller-manager static pods.
// +kubebuilder:validation:MinProperties=1
type ControllerManager struct {
	// extraArgs are command-line flags for kube-controller-manager, named
	// without the leading dashes. They override the flags kubeadm sets. Each
	// name may appear once.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +listMapKey=value
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, x.name == y.name))",message="extraArgs name must be unique: give each flag once, joining repeated values the way the flag expects"
	ExtraArgs []Arg `json:"extraArgs,omitempty"`

	// extraVolumes are host paths mounted into the kube-controller-manager pod.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	ExtraVolumes []HostPathMount `json:"extraVolumes,omitempty"`

	// extraEnvs are environment variables for kube-controller-manager; they win
	// over the ones kubeadm sets. Needs Kubernetes v1.31 or later.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	ExtraEnvs *[]EnvVar `json:"extraEnvs,omitempty"`
}

// Scheduler holds the settings of the kube-scheduler static pods.
// +kubebuilder:validation:MinProperties=1
type Scheduler struct {
	// extraArgs are command-line flags for kube-scheduler, named without the
	// leading dashes. They override the flags kubeadm sets. Each name may appear once.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +listMapKey=value
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, x.name == y.name))",message="extraArgs name must be unique: give each flag once, joining repeated values the way the flag expects"
	ExtraArgs []Arg `json:"extraArgs,omitempty"`

	// extraVolumes are host paths mounted into the kube-scheduler pod.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	ExtraVolumes []HostPathMount `json:"extraVolumes,omitempty"`

	// extraEnvs are environment variables for kube-scheduler; they win over the
	// ones kubeadm sets. Needs Kubernetes v1.31 or later.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	ExtraEnvs *[]EnvVar `json:"extraEnvs,omitempty"`
}

// DNS configures the cluster DNS add-on (CoreDNS).
// +kubebuilder:validation:MinProperties=1
type DNS struct {
	// imageRepository is the registry the DNS image is pulled from; the
	// cluster-wide imageRepository when it is not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ImageRepository string `json:"imageRepository,omitempty"`

	// imageTag pins the DNS image tag. While it is set, upgrades leave the DNS
	// version alone.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ImageTag string `json:"imageTag,omitempty"`
}

// APIEndpoint is where one machine's API server listens.
// +kubebuilder:validation:MinProperties=1
type APIEndpoint struct {
	// advertiseAddress is the IP address the API server advertises to the cluster.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="advertiseAddress must be an IPv4 or IPv6 address, not a host name"
	AdvertiseAddress string `json:"advertiseAddress,omitempty"`

	// bindPort is the secure port the API server listens on; 6443 when it is not set.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	BindPort int32 `json:"bindPort,omitempty"`
}

// IsDefined tells whether the address or the port is set.
func (e *APIEndpoint) IsDefined() bool { return e.AdvertiseAddress != "" || e.BindPort != 0 }

// NodeRegistrationOptions says how a machine registers itself as a Node,
// whether through "kubeadm init" or "kubeadm join".
// +kubebuilder:validation:MinProperties=1
type NodeRegistrationOptions struct {
	// name is the name of the Node object, also the common name of the
	// kubelet's client certificate. It is the host name when not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// criSocket is the container runtime socket kubeadm talks to; it is
	// recorded as an annotation on the Node.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	CRISocket string `json:"criSocket,omitempty"`

	// taints are put on the Node when it registers. When the field is unset,
	// kubeadm taints control plane nodes with its default control-plane taint;
	// set it to an empty list ("taints: []") to register with no taint at all.
	// +optional
	// +kubebuilder:validation:MinItems=0
	// +kubebuilder:validation:MaxItems=100
	Taints *[]corev1.Taint `json:"taints,omitempty"`

	// kubeletExtraArgs are command-line flags for the kubelet, named without
	// the leading dashes. They override the flags kubeadm sets. Each name may appear once.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +listMapKey=value
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, x.name == y.name))",message="kubeletExtraArgs name must be unique: give each flag once, joining repeated values the way the flag expects"
	KubeletExtraArgs []Arg `json:"kubeletExtraArgs,omitempty"`

	// ignorePreflightErrors names kubeadm preflight checks whose errors are
	// ignored on this node, for example "Swap"; "all" ignores every check.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	IgnorePreflightErrors []string `json:"ignorePreflightErrors,omitempty"`

	// imagePullPolicy is how kubeadm pulls images during init and join:
	// Always, IfNotPresent (the default) or Never.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// imagePullSerial pulls images one at a time when true (kubeadm's default)
	// and in parallel when false. Needs Kubernetes v1.31 or later.
	// +optional
	ImagePullSerial *bool `json:"imagePullSerial,omitempty"`
}

// BootstrapToken is a bootstrap token that "kubeadm init" creates, stored as
// a Secret in the workload cluster.
// +kubebuilder:validation:XValidation:rule="!(has(self.ttlSeconds) && has(self.expires))",message="set either ttlSeconds or expires on a bootstrap token, not both"
type BootstrapToken struct {
	// token is the secret that joining nodes present, of the form
	// "[a-z0-9]{6}.[a-z0-9]{16}" (token ID, a dot, token secret).
	// +required
	Token BootstrapTokenString `json:"token,omitempty,omitzero"`

	// description says what the token is for, for other administrators.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Description string `json:"description,omitempty"`

	// ttlSeconds is how long the token lives; 24 hours when neither it nor
	// expires is set. Do not set it together with expires.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSeconds *int32 `json:"ttlSeconds,omitempty"`

	// expires is the time the token stops working. Do not set it together with ttlSeconds.
	// +optional
	Expires metav1.Time `json:"expires,omitempty,omitzero"`

	// usages are the ways the token may be used, for example "signing" and
	// "authentication" (both by default).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Usages []string `json:"usages,omitempty"`

	// groups are the extra groups the token authenticates as.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Groups []string `json:"groups,omitempty"`
}

// Etcd configures etcd: either a local member on each control plane machine
// or an external cluster.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!(has(self.local) && has(self.external))",message="etcd: set either local or external, not both"
type Etcd struct {
	// local configures the etcd member kubeadm runs on each control plane
	// machine. Not allowed together with external.
	// +optional
	Local LocalEtcd `json:"local,omitempty,omitzero"`

	// external points at an etcd cluster that runs outside the control plane
	// machines. Not allowed together with local.
	// +optional
	External ExternalEtcd `json:"external,omitempty,omitzero"`
}

// LocalEtcd configures the etcd member kubeadm runs as a static pod.
// +kubebuilder:validation:MinProperties=1
type LocalEtcd struct {
	// imageRepository is the registry the etcd image is pulled from; the
	// cluster-wide imageRepository when it is not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ImageRepository string `json:"imageRepository,omitempty"`

	// imageTag pins the etcd image tag. While it is set, upgrades leave the
	// etcd version alone.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ImageTag string `json:"imageTag,omitempty"`

	// dataDir is where etcd keeps its data; /var/lib/etcd when it is not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	DataDir string `json:"dataDir,omitempty"`

	// extraArgs are command-line flags for etcd, named without the leading
	// dashes. They override the flags kubeadm sets. Each name may appear once.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +listMapKey=value
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, x.name == y.name))",message="extraArgs name must be unique: give each flag once, joining repeated values the way the flag expects"
	ExtraArgs []Arg `json:"extraArgs,omitempty"`

	// extraEnvs are environment variables for etcd; they win over the ones
	// kubeadm sets. Needs Kubernetes v1.31 or later.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	ExtraEnvs *[]EnvVar `json:"extraEnvs,omitempty"`

	// serverCertSANs are extra subject alternative names for etcd's serving certificate.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	ServerCertSANs []string `json:"serverCertSANs,omitempty"`

	// peerCertSANs are extra subject alternative names for etcd's peer certificate.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	PeerCertSANs []string `json:"peerCertSANs,omitempty"`
}

// IsDefined tells whether any field of the LocalEtcd is set.
func (e *LocalEtcd) IsDefined() bool { return !isZero(*e) }

// ExternalEtcd points at an etcd cluster kubeadm does not manage. The
// certificate files must already be on the machine (for example through files).
type ExternalEtcd struct {
	// endpoints are the client URLs of the etcd members.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	Endpoints []string `json:"endpoints,omitempty"`

	// caFile is the path of the CA certificate that signed etcd's certificates.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	CAFile string `json:"caFile,omitempty"`

	// certFile is the path of the client certificate used to talk to etcd.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	CertFile string `json:"certFile,omitempty"`

	// keyFile is the path of the client key used to talk to etcd.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	KeyFile string `json:"keyFile,omitempty"`
}

// IsDefined tells whether any field of the ExternalEtcd is set.
func (e *ExternalEtcd) IsDefined() bool { return !isZero(*e) }

// JoinConfiguration holds the settings of "kubeadm join", for workers and for
// control plane machines after the first.
// +kubebuilder:validation:MinProperties=1
type JoinConfiguration struct {
	// nodeRegistration says how the joining node registers itself. Keep it
	// consistent with initConfiguration.nodeRegistration for control plane machines.
	// +optional
	NodeRegistration NodeRegistrationOptions `json:"nodeRegistration,omitempty,omitzero"`

	// caCertPath is where the cluster CA certificate is written on the node;
	// /etc/kubernetes/pki/ca.crt when it is not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	CACertPath string `json:"caCertPath,omitempty"`

	// discovery says how the joining kubelet finds and trusts the cluster
	// during TLS bootstrap. Capstan fills a bootstrap token when it is not set.
	// +optional
	Discovery Discovery `json:"discovery,omitempty,omitzero"`

	// controlPlane, when present (even empty), makes the machine join as an
	// additional control plane instance; when absent it joins as a worker.
	// +optional
	ControlPlane *JoinControlPlane `json:"controlPlane,omitempty"`

	// skipPhases lists "kubeadm join" phases to skip (see "kubeadm join --help").
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	SkipPhases []string `json:"skipPhases,omitempty"`

	// patches points kubeadm at patches for the static pods it writes during "kubeadm join".
	// +optional
	Patches Patches `json:"patches,omitempty,omitzero"`

	// timeouts overrides how long "kubeadm join" waits at each step.
	// +optional
	Timeouts Timeouts `json:"timeouts,omitempty,omitzero"`
}

// IsDefined tells whether any field of the JoinConfiguration is set.
func (c *JoinConfiguration) IsDefined() bool { return !isZero(*c) }

// JoinControlPlane holds the settings of a control plane instance added by "kubeadm join".
type JoinControlPlane struct {
	// localAPIEndpoint is the address and port the new API server advertises and binds to.
	// +optional
	LocalAPIEndpoint APIEndpoint `json:"localAPIEndpoint,omitempty,omitzero"`
}

// Discovery says how a joining kubelet discovers the cluster and verifies it
// during TLS bootstrap: with a bootstrap token or with a kubeconfig file.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!(has(self.bootstrapToken) && has(self.file))",message="discovery: set either bootstrapToken or file, not both"
type Discovery struct {
	// bootstrapToken discovers the cluster with a bootstrap token. Not allowed together with file.
	// +optional
	BootstrapToken BootstrapTokenDiscovery `json:"bootstrapToken,omitempty,omitzero"`

	// file discovers the cluster from a kubeconfig file or URL. Not allowed
	// together with bootstrapToken.
	// +optional
	File FileDiscovery `json:"file,omitempty,omitzero"`

	// tlsBootstrapToken is the token the kubelet uses for TLS bootstrap. It
	// defaults to bootstrapToken.token; with file discovery it is required
	// unless the kubeconfig carries other credentials.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	TLSBootstrapToken string `json:"tlsBootstrapToken,omitempty"`
}

// BootstrapTokenDiscovery discovers the cluster with a bootstrap token.
// +kubebuilder:validation:MinProperties=1
type BootstrapTokenDiscovery struct {
	// token validates the cluster information fetched from the control plane,
	// of the form "[a-z0-9]{6}.[a-z0-9]{16}". Capstan generates one when it is not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]{6}\.[a-z0-9]{16}$`
	Token string `json:"token,omitempty"`

	// apiServerEndpoint is the IP address or DNS name, with port, of the API
	// server the cluster information is fetched from.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	APIServerEndpoint string `json:"apiServerEndpoint,omitempty"`

	// caCertHashes pin the cluster CA's public key: the CA found during
	// discovery must match one of them. Each is "sha256:" followed by the
	// hex SHA-256 of the CA's DER-encoded Subject Public Key Info. Leaving the
	// list empty turns pinning off, which is unsafe.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	CACertHashes []string `json:"caCertHashes,omitempty"`

	// unsafeSkipCAVerification allows token discovery without caCertHashes.
	// It is unsafe: another machine could impersonate the control plane.
	// +optional
	UnsafeSkipCAVerification *bool `json:"unsafeSkipCAVerification,omitempty"`
}

// IsDefined tells whether any field of the BootstrapTokenDiscovery is set.
func (d *BootstrapTokenDiscovery) IsDefined() bool { return !isZero(*d) }

// FileDiscovery discovers the cluster from a kubeconfig file or URL.
type FileDiscovery struct {
	// kubeConfigPath is the path or URL of the kubeconfig file that holds the
	// cluster information.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	KubeConfigPath string `json:"kubeConfigPath,omitempty"`

	// kubeConfig, when set, makes Capstan generate that kubeconfig file at
	// kubeConfigPath, filling the server from the Cluster's control plane
	// endpoint and the CA from the cluster CA secret.
	// +optional
	KubeConfig FileDiscoveryKubeConfig `json:"kubeConfig,omitempty,omitzero"`
}

// IsDefined tells whether any field of the FileDiscovery is set.
func (d *FileDiscovery) IsDefined() bool { return !isZero(*d) }

// FileDiscoveryKubeConfig describes the kubeconfig Capstan generates for file discovery.
type FileDiscoveryKubeConfig struct {
	// cluster says how to reach the cluster. Its server and CA data are filled
	// from the Cluster when they are not set.
	// +optional
	Cluster KubeConfigCluster `json:"cluster,omitempty,omitzero"`

	// user says how the joining node authenticates.
	// +required
	User KubeConfigUser `json:"user,omitempty,omitzero"`
}

// IsDefined tells whether any field of the FileDiscoveryKubeConfig is set.
func (k *FileDiscoveryKubeConfig) IsDefined() bool { return !isZero(*k) }

// KubeConfigCluster is the cluster entry of a generated kubeconfig, modelled
// on the kubeconfig file format.
// +kubebuilder:validation:MinProperties=1
type KubeConfigCluster struct {
	// server is the API server URL (https://host:port); by default https://
	// followed by the Cluster's control plane endpoint.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Server string `json:"server,omitempty"`

	// tlsServerName is the name checked against the server certificate; the
	// host of server when it is not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	TLSServerName string `json:"tlsServerName,omitempty"`

	// insecureSkipTLSVerify turns off verification of the server certificate. Insecure.
	// +optional
	InsecureSkipTLSVerify *bool `json:"insecureSkipTLSVerify,omitempty"`

	// certificateAuthorityData holds PEM-encoded CA certificates; the cluster
	// CA certificate when it is not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=51200
	CertificateAuthorityData []byte `json:"certificateAuthorityData,omitempty"`

	// proxyURL is the proxy for every request (http, https or socks5 scheme).
	// When unset, the http_proxy and https_proxy environment variables apply.
	// socks5 does not carry exec, attach or port-forward streams.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProxyURL string `json:"proxyURL,omitempty"`
}

// IsDefined tells whether any field of the KubeConfigCluster is set.
func (c *KubeConfigCluster) IsDefined() bool { return !isZero(*c) }

// KubeConfigUser is the user entry of a generated kubeconfig: exactly one of
// authProvider or exec.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!(has(self.authProvider) && has(self.exec))",message="kubeConfig user: set either authProvider or exec, not both"
type KubeConfigUser struct {
	// authProvider is an authentication provider plugin.
	// +optional
	AuthProvider KubeConfigAuthProvider `json:"authProvider,omitempty,omitzero"`

	// exec is an exec credential plugin.
	// +optional
	Exec KubeConfigAuthExec `json:"exec,omitempty,omitzero"`
}

// KubeConfigAuthProvider names an authentication provider plugin and its settings.
type KubeConfigAuthProvider struct {
	// name of the authentication provider plugin.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`

	// config holds the plugin's settings.
	// +optional
	Config map[string]string `json:"config,omitempty"`
}

// IsDefined tells whether any field of the KubeConfigAuthProvider is set.
func (p *KubeConfigAuthProvider) IsDefined() bool { return !isZero(*p) }

// KubeConfigAuthExec runs a command that prints client credentials, in the
// format of the client.authentication.k8s.io API group.
type KubeConfigAuthExec struct {
	// command is the program to run.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Command string `json:"command,omitempty"`

	// args are passed to the command.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	Args []string `json:"args,omitempty"`

	// env adds environment variables to the command's environment.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Env []KubeConfigAuthExecEnv `json:"env,omitempty"`

	// apiVersion is the ExecCredential version the command is given and must
	// answer in; client.authentication.k8s.io/v1 when it is not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	APIVersion string `json:"apiVersion,omitempty"`

	// provideClusterInfo passes the cluster information (possibly large CA
	// data) to the command in the KUBERNETES_EXEC_INFO variable. Off by default.
	// +optional
	ProvideClusterInfo *bool `json:"provideClusterInfo,omitempty"`
}

// IsDefined tells whether any field of the KubeConfigAuthExec is set.
func (e *KubeConfigAuthExec) IsDefined() bool { return !isZero(*e) }

// KubeConfigAuthExecEnv is one environment variable for an exec credential plugin.
type KubeConfigAuthExecEnv struct {
	// name of the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Name string `json:"name,omitempty"`

	// value of the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Value string `json:"value,omitempty"`
}

// HostPathMount mounts a path of the host into a control plane pod.
type HostPathMount struct {
	// name of the volume in the pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Name string `json:"name,omitempty"`

	// hostPath is the path on the host.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	HostPath string `json:"hostPath,omitempty"`

	// mountPath is where the host path appears inside the pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	MountPath string `json:"mountPath,omitempty"`

	// readOnly mounts the volume read-only when true.
	// +optional
	ReadOnly *bool `json:"readOnly,omitempty"`

	// pathType is the Kubernetes hostPath type checked before mounting, for
	// example DirectoryOrCreate or File.
	// +optional
	// +kubebuilder:validation:Enum="";DirectoryOrCreate;Directory;FileOrCreate;File;Socket;CharDevice;BlockDevice
	PathType corev1.HostPathType `json:"pathType,omitempty"`
}

// Patches points kubeadm at a directory of patches for the static pods it writes.
// +kubebuilder:validation:MinProperties=1
type Patches struct {
	// directory holds patch files named "target[suffix][+patchtype].extension":
	// target is kube-apiserver, kube-controller-manager, kube-scheduler, etcd
	// or kubeletconfiguration; patchtype is strategic (the default), merge or
	// json; extension is json or yaml; the optional suffix orders patches
	// alphanumerically. The files can be written with spec.files.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Directory string `json:"directory,omitempty"`
}

// Arg is one command-line flag: its name without leading dashes, and its value.
type Arg struct {
	// name of the flag, without leading dashes.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`

	// value of the flag; may be empty.
	// +required
	// +kubebuilder:validation:MinLength=0
	// +kubebuilder:validation:MaxLength=1024
	Value *string `json:"value,omitempty"`
}

// EnvVar is one environment variable for a control plane component, with the
// fields of a container's environment variable.
type EnvVar struct {
	corev1.EnvVar `json:",inline"`
}

// Timeouts overrides how long kubeadm waits at each step. Every value is in
// seconds; kubeadm's default applies to each one not set.
// +kubebuilder:validation:MinProperties=1
type Timeouts struct {
	// controlPlaneComponentHealthCheckSeconds is how long to wait for a control
	// plane component, such as the API server, to become healthy; 240 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ControlPlaneComponentHealthCheckSeconds *int32 `json:"controlPlaneComponentHealthCheckSeconds,omitempty"`

	// kubeletHealthCheckSeconds is how long to wait for the kubelet to become
	// healthy; 240 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	KubeletHealthCheckSeconds *int32 `json:"kubeletHealthCheckSeconds,omitempty"`

	// kubernetesAPICallSeconds is how long a single request of kubeadm to the
	// API server may take; 60 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	KubernetesAPICallSeconds *int32 `json:"kubernetesAPICallSeconds,omitempty"`

	// etcdAPICallSeconds is how long a single request of kubeadm to etcd may
	// take; 120 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	EtcdAPICallSeconds *int32 `json:"etcdAPICallSeconds,omitempty"`

	// tlsBootstrapSeconds is how long a joining kubelet may take to finish TLS
	// bootstrap; 300 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TLSBootstrapSeconds *int32 `json:"tlsBootstrapSeconds,omitempty"`

	// discoverySeconds is how long a joining node may take to verify the API
	// server's identity; 300 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DiscoverySeconds *int32 `json:"discoverySeconds,omitempty"`
}
