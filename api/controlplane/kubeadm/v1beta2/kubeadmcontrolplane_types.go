package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// Names that other tools and the Machines KubeadmControlPlane creates rely
// on; their values are part of the Cluster API contract and never change.
const (
	// KubeadmControlPlaneFinalizer holds a KubeadmControlPlane until its
	// Machines are gone.
	KubeadmControlPlaneFinalizer = "kubeadm.controlplane.cluster.x-k8s.io"

	// SkipCoreDNSAnnotation on a KubeadmControlPlane stops it from managing
	// the CoreDNS add-on of the workload cluster.
	SkipCoreDNSAnnotation = "controlplane.cluster.x-k8s.io/skip-coredns"

	// SkipKubeProxyAnnotation on a KubeadmControlPlane stops it from managing
	// the kube-proxy add-on of the workload cluster.
	SkipKubeProxyAnnotation = "controlplane.cluster.x-k8s.io/skip-kube-proxy"

	// KubeadmClusterConfigurationAnnotation on a control plane Machine records,
	// as JSON, the ClusterConfiguration the Machine was created with, so that a
	// change to it can be detected and rolled out.
	KubeadmClusterConfigurationAnnotation = "controlplane.cluster.x-k8s.io/kubeadm-cluster-configuration"

	// RemediationInProgressAnnotation on a KubeadmControlPlane marks the
	// window between deleting an unhealthy Machine and creating its
	// replacement.
	RemediationInProgressAnnotation = "controlplane.cluster.x-k8s.io/remediation-in-progress"

	// RemediationForAnnotation on a Machine names the unhealthy Machine it
	// replaces (the first Machine of a chain of retries).
	RemediationForAnnotation = "controlplane.cluster.x-k8s.io/remediation-for"

	// PreTerminateHookCleanupAnnotation is the pre-terminate hook
	// KubeadmControlPlane puts on its Machines so that it can remove the
	// Machine's etcd member just before the infrastructure is deleted.
	PreTerminateHookCleanupAnnotation = clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/kcp-cleanup"

	// The load-balancer hand-over between KubeadmControlPlane and the
	// machines of Capstan's own providers (Capstan's extension, not the
	// Cluster API contract). A control-plane Node whose machine can leave
	// the cluster's load balancer says so with LoadBalancerLeaverAnnotation;
	// before removing such a Machine's etcd member, KubeadmControlPlane asks
	// with LeaveLoadBalancerAnnotation and waits for
	// LeftLoadBalancerAnnotation. Other providers' Nodes are not asked: no
	// one would answer.
	LoadBalancerLeaverAnnotation = "capstan.dev/leaves-load-balancer"
	LeaveLoadBalancerAnnotation  = "capstan.dev/leave-load-balancer"
	LeftLoadBalancerAnnotation   = "capstan.dev/left-load-balancer"

	// DefaultMinHealthyPeriodSeconds is used when
	// spec.remediation.minHealthyPeriodSeconds is not set: one hour.
	DefaultMinHealthyPeriodSeconds = int32(60 * 60)

	// DefaultMaxSurge is used when spec.rollout.strategy.rollingUpdate.maxSurge
	// is not set.
	DefaultMaxSurge = int32(1)
)

// Condition types a KubeadmControlPlane reports in status.conditions.
const (
	// KubeadmControlPlaneAvailableCondition is True when the control plane can
	// serve: certificates exist, at least one Machine runs healthy control
	// plane components and, with stacked etcd, etcd has quorum.
	KubeadmControlPlaneAvailableCondition = "Available"

	// KubeadmControlPlaneInitializedCondition is True once the first control
	// plane Machine answers API requests.
	KubeadmControlPlaneInitializedCondition = "Initialized"

	// KubeadmControlPlaneCertificatesAvailableCondition is True when every
	// cluster certificate authority (and, with external etcd, the API server's
	// etcd client certificate) exists.
	KubeadmControlPlaneCertificatesAvailableCondition = "CertificatesAvailable"

	// KubeadmControlPlaneEtcdClusterHealthyCondition sums up the health of the
	// etcd members on the control plane Machines. Not set with external etcd.
	KubeadmControlPlaneEtcdClusterHealthyCondition = "EtcdClusterHealthy"

	// KubeadmControlPlaneControlPlaneComponentsHealthyCondition sums up the
	// health of the API server, controller manager, scheduler and etcd pods
	// on the control plane Machines.
	KubeadmControlPlaneControlPlaneComponentsHealthyCondition = "ControlPlaneComponentsHealthy"

	// KubeadmControlPlaneMachinesReadyCondition sums up the Ready conditions of
	// the control plane Machines.
	KubeadmControlPlaneMachinesReadyCondition = "MachinesReady"

	// KubeadmControlPlaneMachinesUpToDateCondition sums up the UpToDate
	// conditions of the control plane Machines.
	KubeadmControlPlaneMachinesUpToDateCondition = "MachinesUpToDate"

	// KubeadmControlPlaneRollingOutCondition is True while at least one
	// Machine is not up to date.
	KubeadmControlPlaneRollingOutCondition = "RollingOut"

	// KubeadmControlPlaneScalingUpCondition is True while there are fewer
	// Machines than spec.replicas.
	KubeadmControlPlaneScalingUpCondition = "ScalingUp"

	// KubeadmControlPlaneScalingDownCondition is True while there are more
	// Machines than spec.replicas.
	KubeadmControlPlaneScalingDownCondition = "ScalingDown"

	// KubeadmControlPlaneRemediatingCondition reports Machines that a
	// MachineHealthCheck marked unhealthy and that are being replaced.
	KubeadmControlPlaneRemediatingCondition = "Remediating"

	// KubeadmControlPlaneDeletingCondition reports the progress of deletion.
	KubeadmControlPlaneDeletingCondition = "Deleting"

	// KubeadmControlPlanePausedCondition is True while reconciliation is
	// paused on the KubeadmControlPlane or its Cluster.
	KubeadmControlPlanePausedCondition = "Paused"
)

// Condition types KubeadmControlPlane sets on each of its Machines.
const (
	// KubeadmControlPlaneMachineAPIServerPodHealthyCondition reports the
	// kube-apiserver pod of a control plane Machine.
	KubeadmControlPlaneMachineAPIServerPodHealthyCondition = "APIServerPodHealthy"

	// KubeadmControlPlaneMachineControllerManagerPodHealthyCondition reports the
	// kube-controller-manager pod of a control plane Machine.
	KubeadmControlPlaneMachineControllerManagerPodHealthyCondition = "ControllerManagerPodHealthy"

	// KubeadmControlPlaneMachineSchedulerPodHealthyCondition reports the
	// kube-scheduler pod of a control plane Machine.
	KubeadmControlPlaneMachineSchedulerPodHealthyCondition = "SchedulerPodHealthy"

	// KubeadmControlPlaneMachineEtcdPodHealthyCondition reports the etcd pod of
	// a control plane Machine (stacked etcd only).
	KubeadmControlPlaneMachineEtcdPodHealthyCondition = "EtcdPodHealthy"

	// KubeadmControlPlaneMachineEtcdMemberHealthyCondition reports the etcd
	// member of a control plane Machine (stacked etcd only).
	KubeadmControlPlaneMachineEtcdMemberHealthyCondition = "EtcdMemberHealthy"
)

// KubeadmControlPlaneRolloutStrategyType names a way of replacing control
// plane Machines.
// +kubebuilder:validation:Enum=RollingUpdate
type KubeadmControlPlaneRolloutStrategyType string

const (
	// RollingUpdateStrategyType replaces Machines one at a time: a new Machine
	// is added before an old one is removed, or the other way round when
	// maxSurge is 0.
	RollingUpdateStrategyType KubeadmControlPlaneRolloutStrategyType = "RollingUpdate"
)

// KubeadmControlPlaneSpec is the desired state of a KubeadmControlPlane.
//
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.replicas % 2 != 0 || self.?kubeadmConfigSpec.?clusterConfiguration.?etcd.?external.hasValue()",message="replicas must be an odd number (1, 3, 5, ...) while etcd runs on the control plane machines, so that etcd keeps quorum; choose an odd count or configure kubeadmConfigSpec.clusterConfiguration.etcd.external",fieldPath=".replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.replicas >= 3 || !has(self.rollout) || !has(self.rollout.strategy) || !has(self.rollout.strategy.rollingUpdate) || !has(self.rollout.strategy.rollingUpdate.maxSurge) || string(self.rollout.strategy.rollingUpdate.maxSurge) != '0'",message="rollout.strategy.rollingUpdate.maxSurge 0 removes a machine before adding its replacement and needs replicas of at least 3; set maxSurge to 1 or raise replicas",fieldPath=".rollout.strategy.rollingUpdate"
// +kubebuilder:validation:XValidation:rule="!self.?kubeadmConfigSpec.?clusterConfiguration.?certificateValidityPeriodDays.hasValue() || !self.?kubeadmConfigSpec.?clusterConfiguration.?caCertificateValidityPeriodDays.hasValue() || self.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays <= self.kubeadmConfigSpec.clusterConfiguration.caCertificateValidityPeriodDays",message="kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays must not exceed caCertificateValidityPeriodDays; lower it or raise caCertificateValidityPeriodDays",fieldPath=".kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays"
// +kubebuilder:validation:XValidation:rule="!self.?rollout.?before.?certificatesExpiryDays.hasValue() || !self.?kubeadmConfigSpec.?clusterConfiguration.?certificateValidityPeriodDays.hasValue() || self.rollout.before.certificatesExpiryDays < self.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays",message="rollout.before.certificatesExpiryDays must be less than kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays, or every new machine would be replaced at once; lower it",fieldPath=".rollout.before.certificatesExpiryDays"
// +kubebuilder:validation:XValidation:rule="self.?kubeadmConfigSpec.?initConfiguration.?timeouts.?controlPlaneComponentHealthCheckSeconds == self.?kubeadmConfigSpec.?joinConfiguration.?timeouts.?controlPlaneComponentHealthCheckSeconds",message="kubeadmConfigSpec.initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds and kubeadmConfigSpec.joinConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds must be equal (or both unset); set them to the same value",fieldPath=".kubeadmConfigSpec.joinConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds"
// +kubebuilder:validation:XValidation:rule="self.?kubeadmConfigSpec.?clusterConfiguration.?controlPlaneEndpoint.hasValue() == oldSelf.?kubeadmConfigSpec.?clusterConfiguration.?controlPlaneEndpoint.hasValue() && (!self.?kubeadmConfigSpec.?clusterConfiguration.?controlPlaneEndpoint.hasValue() || self.kubeadmConfigSpec.clusterConfiguration.controlPlaneEndpoint == oldSelf.kubeadmConfigSpec.clusterConfiguration.controlPlaneEndpoint)",message="kubeadmConfigSpec.clusterConfiguration.controlPlaneEndpoint cannot be changed after creation; create a new control plane instead",fieldPath=".kubeadmConfigSpec.clusterConfiguration.controlPlaneEndpoint",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.?kubeadmConfigSpec.?clusterConfiguration.?certificatesDir.hasValue() == oldSelf.?kubeadmConfigSpec.?clusterConfiguration.?certificatesDir.hasValue() && (!self.?kubeadmConfigSpec.?clusterConfiguration.?certificatesDir.hasValue() || self.kubeadmConfigSpec.clusterConfiguration.certificatesDir == oldSelf.kubeadmConfigSpec.clusterConfiguration.certificatesDir)",message="kubeadmConfigSpec.clusterConfiguration.certificatesDir cannot be changed after creation; restore the previous value",fieldPath=".kubeadmConfigSpec.clusterConfiguration.certificatesDir",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.?kubeadmConfigSpec.?clusterConfiguration.?etcd.?external.hasValue() == oldSelf.?kubeadmConfigSpec.?clusterConfiguration.?etcd.?external.hasValue()",message="kubeadmConfigSpec.clusterConfiguration.etcd cannot switch between local (stacked) and external etcd after creation; keep the etcd mode the control plane was created with",fieldPath=".kubeadmConfigSpec.clusterConfiguration.etcd",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!self.version.matches('^v[0-9]+[.][0-9]+[.]') || !oldSelf.version.matches('^v[0-9]+[.][0-9]+[.]') || int(self.version.split('.')[0].substring(1)) < int(oldSelf.version.split('.')[0].substring(1)) || (int(self.version.split('.')[0].substring(1)) == int(oldSelf.version.split('.')[0].substring(1)) && int(self.version.split('.')[1]) <= int(oldSelf.version.split('.')[1]) + 1)",message="version can move up by at most one minor release at a time; upgrade to the next minor version first",fieldPath=".version",reason=FieldValueForbidden
type KubeadmControlPlaneSpec struct {
	// replicas is the number of control plane Machines. With stacked etcd
	// (no kubeadmConfigSpec.clusterConfiguration.etcd.external) it must be
	// odd, so that etcd can keep quorum. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	Replicas *int32 `json:"replicas,omitempty"`

	// version is the Kubernetes version of the control plane, a semantic
	// version with a leading "v", for example "v1.33.1". An upgrade may move
	// at most one minor version at a time.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^v(0|[1-9][0-9]*)[.](0|[1-9][0-9]*)[.](0|[1-9][0-9]*)([-+][-+._0-9A-Za-z]*)?$')",message="version must be a semantic version with a leading v, for example v1.33.1"
	Version string `json:"version,omitempty"`

	// machineTemplate describes the Machines of the control plane.
	// +required
	MachineTemplate KubeadmControlPlaneMachineTemplate `json:"machineTemplate,omitempty,omitzero"`

	// kubeadmConfigSpec is the kubeadm configuration used to initialize the
	// first control plane Machine and to join the others.
	// +optional
	KubeadmConfigSpec bootstrapv1.KubeadmConfigSpec `json:"kubeadmConfigSpec,omitempty,omitzero"`

	// rollout controls when and how control plane Machines are replaced.
	// When unset it defaults to a RollingUpdate strategy with maxSurge 1.
	// +optional
	// +kubebuilder:default={strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1}}}
	Rollout KubeadmControlPlaneRolloutSpec `json:"rollout,omitempty,omitzero"`

	// remediation controls how unhealthy control plane Machines are replaced.
	// +optional
	Remediation KubeadmControlPlaneRemediationSpec `json:"remediation,omitempty,omitzero"`

	// machineNaming sets how the names of new Machines are made. Their
	// infrastructure machines and KubeadmConfigs get the same names.
	// +optional
	MachineNaming MachineNamingSpec `json:"machineNaming,omitempty,omitzero"`
}

// KubeadmControlPlaneMachineTemplate describes the Machines of a
// KubeadmControlPlane.
type KubeadmControlPlaneMachineTemplate struct {
	// metadata holds labels and annotations copied to every control plane
	// Machine, its infrastructure machine and its KubeadmConfig.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec describes the control plane Machines.
	// +required
	Spec KubeadmControlPlaneMachineTemplateSpec `json:"spec,omitempty,omitzero"`
}

// KubeadmControlPlaneMachineTemplateSpec is the part of a Machine's spec a
// KubeadmControlPlane lets users choose.
type KubeadmControlPlaneMachineTemplateSpec struct {
	// infrastructureRef names the infrastructure machine template (for
	// example a LocalMachineTemplate) cloned for each control plane Machine.
	// +required
	InfrastructureRef clusterv1.ContractVersionedObjectReference `json:"infrastructureRef,omitempty,omitzero"`

	// readinessGates lists extra conditions a Machine needs before it counts
	// as Ready. KubeadmControlPlane always adds gates for the conditions it
	// sets itself (APIServerPodHealthy, ControllerManagerPodHealthy,
	// SchedulerPodHealthy and, with stacked etcd, EtcdPodHealthy and
	// EtcdMemberHealthy); list here only conditions owned by other
	// controllers.
	// +optional
	// +listType=map
	// +listMapKey=conditionType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	ReadinessGates []clusterv1.MachineReadinessGate `json:"readinessGates,omitempty"`

	// deletion holds the timeouts used when a control plane Machine is
	// deleted.
	// +optional
	Deletion KubeadmControlPlaneMachineTemplateDeletionSpec `json:"deletion,omitempty,omitzero"`

	// taints are the Node taints the control plane Machines get, copied to
	// each Machine's spec.taints.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Taints []clusterv1.MachineTaint `json:"taints,omitempty"`
}

// KubeadmControlPlaneMachineTemplateDeletionSpec holds the timeouts used when
// a control plane Machine is deleted.
// +kubebuilder:validation:MinProperties=1
type KubeadmControlPlaneMachineTemplateDeletionSpec struct {
	// nodeDrainTimeoutSeconds bounds the time spent draining the Machine's
	// node. Unset or 0 waits as long as draining takes. This is not the same
	// as `kubectl drain --timeout`.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDrainTimeoutSeconds *int32 `json:"nodeDrainTimeoutSeconds,omitempty"`

	// nodeVolumeDetachTimeoutSeconds bounds the time spent waiting for the
	// node's volumes to detach. Unset or 0 waits as long as it takes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeVolumeDetachTimeoutSeconds *int32 `json:"nodeVolumeDetachTimeoutSeconds,omitempty"`

	// nodeDeletionTimeoutSeconds bounds the time spent trying to delete the
	// Machine's Node object once the Machine is being deleted. 0 retries
	// forever; unset uses the Machine's own default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDeletionTimeoutSeconds *int32 `json:"nodeDeletionTimeoutSeconds,omitempty"`
}

// KubeadmControlPlaneRolloutSpec controls when and how control plane
// Machines are replaced.
// +kubebuilder:validation:MinProperties=1
type KubeadmControlPlaneRolloutSpec struct {
	// before asks for Machines to be replaced ahead of an event, such as
	// their certificates expiring.
	// +optional
	Before KubeadmControlPlaneRolloutBeforeSpec `json:"before,omitempty,omitzero"`

	// after asks for every Machine created before this time to be replaced
	// once the time has passed, even when nothing else changed. RFC 3339,
	// for example "2025-03-09T09:00:00Z".
	// +optional
	After metav1.Time `json:"after,omitempty,omitzero"`

	// strategy sets how Machines are replaced.
	// +optional
	Strategy KubeadmControlPlaneRolloutStrategy `json:"strategy,omitempty,omitzero"`
}

// KubeadmControlPlaneRolloutBeforeSpec lists events ahead of which Machines
// are replaced.
// +kubebuilder:validation:MinProperties=1
type KubeadmControlPlaneRolloutBeforeSpec struct {
	// certificatesExpiryDays replaces a Machine when its certificates expire
	// within this many days. At least 7.
	// +optional
	// +kubebuilder:validation:Minimum=7
	CertificatesExpiryDays int32 `json:"certificatesExpiryDays,omitempty"`
}

// KubeadmControlPlaneRolloutStrategy sets how control plane Machines are
// replaced.
// +kubebuilder:validation:MinProperties=1
type KubeadmControlPlaneRolloutStrategy struct {
	// type of rollout. Only "RollingUpdate" exists, and it is the default.
	// +required
	// +kubebuilder:default=RollingUpdate
	Type KubeadmControlPlaneRolloutStrategyType `json:"type,omitempty"`

	// rollingUpdate tunes the RollingUpdate strategy.
	// +optional
	RollingUpdate KubeadmControlPlaneRolloutStrategyRollingUpdate `json:"rollingUpdate,omitempty,omitzero"`
}

// KubeadmControlPlaneRolloutStrategyRollingUpdate tunes a rolling update of
// the control plane.
// +kubebuilder:validation:MinProperties=1
type KubeadmControlPlaneRolloutStrategyRollingUpdate struct {
	// maxSurge is how many Machines may exist above spec.replicas during a
	// rollout: 1 (the default) adds a new Machine before removing an old
	// one; 0 removes an old Machine first and needs at least 3 replicas.
	// +optional
	// +kubebuilder:validation:XValidation:rule="string(self) == '0' || string(self) == '1'",message="maxSurge must be 0 or 1"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
}

// KubeadmControlPlaneRemediationSpec controls how unhealthy control plane
// Machines are replaced.
// +kubebuilder:validation:MinProperties=1
type KubeadmControlPlaneRemediationSpec struct {
	// maxRetry is how many times in a row a replacement Machine that also
	// turns unhealthy is itself replaced. For example, when M1 fails and its
	// replacement M1-1 fails too, replacing M1-1 is retry 1, replacing its
	// replacement M1-2 is retry 2, and so on. A failure more than
	// minHealthyPeriodSeconds after the previous remediation is a new
	// problem, not a retry. Unset retries without limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxRetry *int32 `json:"maxRetry,omitempty"`

	// retryPeriodSeconds is how long to wait before remediating a Machine
	// that was itself created as a replacement (a retry). Unset retries at
	// once.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RetryPeriodSeconds *int32 `json:"retryPeriodSeconds,omitempty"`

	// minHealthyPeriodSeconds is how long a replacement Machine must stay
	// healthy before a new failure counts as unrelated, which resets the
	// retry count. Unset means one hour (3600).
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinHealthyPeriodSeconds *int32 `json:"minHealthyPeriodSeconds,omitempty"`
}

// MachineNamingSpec sets how the names of new control plane Machines are
// made.
// +kubebuilder:validation:MinProperties=1
type MachineNamingSpec struct {
	// template is a Go text/template for Machine names. It may use
	// `.cluster.name`, `.kubeadmControlPlane.name` and `.random` (five random
	// lowercase consonants and digits), and must contain `{{ .random }}`.
	// Names longer than 63 characters are cut to 58 and get a random
	// five-character suffix. When unset names are
	// `{{ .kubeadmControlPlane.name }}-{{ .random }}`.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.contains('{{ .random }}')",message="machineNaming.template must contain {{ .random }} so that every Machine gets a unique name"
	Template string `json:"template,omitempty"`
}

// KubeadmControlPlaneStatus is the observed state of a KubeadmControlPlane.
// +kubebuilder:validation:MinProperties=1
type KubeadmControlPlaneStatus struct {
	// conditions describe the current state of the control plane. Known
	// types: Available, Initialized, CertificatesAvailable,
	// EtcdClusterHealthy, ControlPlaneComponentsHealthy, MachinesReady,
	// MachinesUpToDate, RollingOut, ScalingUp, ScalingDown, Remediating,
	// Deleting, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization reports the steps of bringing up the control plane that
	// the Cluster API contract relies on.
	// +optional
	Initialization KubeadmControlPlaneInitializationStatus `json:"initialization,omitempty,omitzero"`

	// selector is the label selector, in query-parameter string form, that
	// matches the control plane Machines. The scale subresource and
	// autoscalers read it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Selector string `json:"selector,omitempty"`

	// replicas is the number of control plane Machines that are not being
	// deleted.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of control plane Machines whose Ready
	// condition is True.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// availableReplicas is the number of control plane Machines whose
	// Available condition is True.
	// +optional
	AvailableReplicas *int32 `json:"availableReplicas,omitempty"`

	// upToDateReplicas is the number of control plane Machines whose UpToDate
	// condition is True.
	// +optional
	UpToDateReplicas *int32 `json:"upToDateReplicas,omitempty"`

	// versions counts the KubeadmControlPlane's Machines by Kubernetes version.
	// +optional
	// +listType=map
	// +listMapKey=version
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Versions []clusterv1.StatusVersion `json:"versions,omitempty"`

	// version is the lowest Kubernetes version among the control plane
	// Machines.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`

	// observedGeneration is the metadata.generation the status describes.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// lastRemediation records the most recent remediation.
	// +optional
	LastRemediation LastRemediationStatus `json:"lastRemediation,omitempty,omitzero"`

	// deprecated holds status fields of older API versions; Capstan does
	// not write them.
	// +optional
	Deprecated *KubeadmControlPlaneDeprecatedStatus `json:"deprecated,omitempty"`
}

// KubeadmControlPlaneDeprecatedStatus holds a KubeadmControlPlane's status
// fields from older API versions, kept for objects converted from them.
type KubeadmControlPlaneDeprecatedStatus struct {
	// v1beta1 holds the fields v1beta1 had.
	// +optional
	V1Beta1 *KubeadmControlPlaneV1Beta1DeprecatedStatus `json:"v1beta1,omitempty"`
}

// KubeadmControlPlaneV1Beta1DeprecatedStatus is a KubeadmControlPlane's
// v1beta1 status remainder.
type KubeadmControlPlaneV1Beta1DeprecatedStatus struct {
	clusterv1.V1Beta1FailureStatus `json:",inline"`

	// updatedReplicas counted the Machines at the current spec.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`

	// readyReplicas counted the Machines with a Ready Node.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// unavailableReplicas counted the Machines still needed for the desired
	// count to be available.
	// +optional
	UnavailableReplicas int32 `json:"unavailableReplicas"`
}

// KubeadmControlPlaneInitializationStatus reports the steps of bringing up
// the control plane.
// +kubebuilder:validation:MinProperties=1
type KubeadmControlPlaneInitializationStatus struct {
	// controlPlaneInitialized is true once the control plane answers API
	// requests, even if not every Machine exists yet. The Cluster controller
	// waits for it before workers and further control plane Machines join.
	// +optional
	ControlPlaneInitialized *bool `json:"controlPlaneInitialized,omitempty"`
}

// LastRemediationStatus records the most recent remediation. If it is lost,
// the retry count starts again from 0.
type LastRemediationStatus struct {
	// machine is the name of the Machine that was remediated.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Machine string `json:"machine,omitempty"`

	// time is when the remediation happened (RFC 3339, UTC).
	// +required
	Time metav1.Time `json:"time,omitempty,omitzero"`

	// retryCount is how many retries the chain of replacements for that
	// Machine has used so far.
	// +required
	// +kubebuilder:validation:Minimum=0
	RetryCount *int32 `json:"retryCount,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubeadmcontrolplanes,shortName=kcp,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=control-plane-kubeadm"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the control plane belongs to"
// +kubebuilder:printcolumn:name="Available",type="string",JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="Whether the control plane passes every availability check"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".spec.replicas",description="Desired number of control plane machines"
// +kubebuilder:printcolumn:name="Current",type="integer",JSONPath=".status.replicas",description="Number of control plane machines"
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas",description="Machines whose Ready condition is true"
// +kubebuilder:printcolumn:name="Available",type="integer",JSONPath=".status.availableReplicas",description="Machines whose Available condition is true"
// +kubebuilder:printcolumn:name="Up-to-date",type="integer",JSONPath=".status.upToDateReplicas",description="Machines whose UpToDate condition is true"
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Initialized",type="boolean",JSONPath=".status.initialization.controlPlaneInitialized",description="Whether the control plane accepts requests"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the KubeadmControlPlane was created"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".spec.version",description="Kubernetes version of the control plane"

// KubeadmControlPlane runs a Kubernetes control plane on a set of Machines
// bootstrapped with kubeadm, and scales, upgrades and remediates it.
type KubeadmControlPlane struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the control plane.
	// +required
	Spec KubeadmControlPlaneSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the control plane.
	// +optional
	Status KubeadmControlPlaneStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns status.conditions.
func (in *KubeadmControlPlane) GetConditions() []metav1.Condition {
	return in.Status.Conditions
}

// SetConditions replaces status.conditions.
func (in *KubeadmControlPlane) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// KubeadmControlPlaneList is a list of KubeadmControlPlanes.
type KubeadmControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the KubeadmControlPlanes.
	Items []KubeadmControlPlane `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KubeadmControlPlane{}, &KubeadmControlPlaneList{})
}
