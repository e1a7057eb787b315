package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// MachineDeploymentKind is the kind name of MachineDeployment.
const MachineDeploymentKind = "MachineDeployment"

// MachineDeploymentFinalizer keeps a MachineDeployment until its MachineSets
// are gone, so that a Cluster being deleted sees its workers go in order.
// The value is Cluster API's.
const MachineDeploymentFinalizer = "cluster.x-k8s.io/machinedeployment"

// MachineDeploymentRolloutStrategyType names how a MachineDeployment replaces
// its Machines.
// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
type MachineDeploymentRolloutStrategyType string

const (
	// RollingUpdateMachineDeploymentStrategyType scales the new MachineSet up
	// and the old ones down step by step, within maxSurge and maxUnavailable.
	RollingUpdateMachineDeploymentStrategyType MachineDeploymentRolloutStrategyType = "RollingUpdate"

	// OnDeleteMachineDeploymentStrategyType replaces an old Machine only
	// after someone deletes it.
	OnDeleteMachineDeploymentStrategyType MachineDeploymentRolloutStrategyType = "OnDelete"
)

// Annotations a MachineDeployment puts on its MachineSets.
const (
	// RevisionAnnotation holds the rollout revision of a MachineSet.
	RevisionAnnotation = "machinedeployment.clusters.x-k8s.io/revision"

	// DesiredReplicasAnnotation holds the MachineDeployment's replicas at the
	// time the MachineSet was last scaled.
	DesiredReplicasAnnotation = "machinedeployment.clusters.x-k8s.io/desired-replicas"

	// MaxReplicasAnnotation holds replicas plus maxSurge of the
	// MachineDeployment at the time the MachineSet was last scaled.
	MaxReplicasAnnotation = "machinedeployment.clusters.x-k8s.io/max-replicas"

	// MachineDeploymentUniqueLabel tells the Machines of one MachineSet apart
	// from those of its siblings; its value never changes for a MachineSet.
	MachineDeploymentUniqueLabel = "machine-template-hash"
)

// MachineDeploymentSpec is what the user wants a MachineDeployment to be.
type MachineDeploymentSpec struct {
	// clusterName is the name of the Cluster the MachineDeployment belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterName string `json:"clusterName,omitempty"`

	// replicas is the number of Machines wanted. When unset it becomes the
	// autoscaler's minimum size if both cluster-api-autoscaler-node-group
	// min and max size annotations are set, otherwise 1.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// rollout says how and when Machines are replaced.
	// +optional
	Rollout MachineDeploymentRolloutSpec `json:"rollout,omitempty,omitzero"`

	// selector picks the Machines (and MachineSets) this MachineDeployment
	// counts as its own. It must match the labels in template.metadata.labels.
	// Left out, the controller fills it in (there is no defaulting webhook):
	// Cluster API manifests often rely on that.
	// +optional
	Selector metav1.LabelSelector `json:"selector,omitempty,omitzero"`

	// template is the Machine the MachineDeployment keeps running.
	// +required
	Template MachineTemplateSpec `json:"template,omitempty,omitzero"`

	// machineNaming sets how the names of new Machines are built.
	// +optional
	MachineNaming MachineNamingSpec `json:"machineNaming,omitempty,omitzero"`

	// remediation limits how unhealthy Machines are replaced.
	// +optional
	Remediation MachineDeploymentRemediationSpec `json:"remediation,omitempty,omitzero"`

	// deletion holds options used when the MachineDeployment scales down.
	// +optional
	Deletion MachineDeploymentDeletionSpec `json:"deletion,omitempty,omitzero"`

	// paused stops rollouts: changes to the template wait until it is unset.
	// +optional
	Paused *bool `json:"paused,omitempty"`
}

// MachineDeploymentRolloutSpec says how and when a MachineDeployment
// replaces its Machines.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentRolloutSpec struct {
	// after asks for every Machine created before this time to be replaced,
	// even if nothing else changed; for example "2025-03-09T09:00:00Z".
	// +optional
	After metav1.Time `json:"after,omitempty,omitzero"`

	// strategy is the replacement strategy.
	// +optional
	Strategy MachineDeploymentRolloutStrategy `json:"strategy,omitempty,omitzero"`
}

// MachineDeploymentRolloutStrategy is the replacement strategy of a
// MachineDeployment.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentRolloutStrategy struct {
	// type is RollingUpdate (the default) or OnDelete.
	// +required
	Type MachineDeploymentRolloutStrategyType `json:"type,omitempty"`

	// rollingUpdate tunes a RollingUpdate.
	// +optional
	RollingUpdate MachineDeploymentRolloutStrategyRollingUpdate `json:"rollingUpdate,omitempty,omitzero"`
}

// MachineDeploymentRolloutStrategyRollingUpdate tunes a rolling update.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!(has(self.maxSurge) && (type(self.maxSurge) == int ? self.maxSurge == 0 : self.maxSurge.matches('^0+%$')) && (!has(self.maxUnavailable) || (type(self.maxUnavailable) == int ? self.maxUnavailable == 0 : self.maxUnavailable.matches('^0+%$'))))",message="maxSurge and maxUnavailable cannot both be 0 (maxUnavailable is 0 when unset): raise one of them so the rollout can make progress"
type MachineDeploymentRolloutStrategyRollingUpdate struct {
	// maxUnavailable is how many Machines (a number, or a percentage of
	// replicas rounded down) may be missing during the update; 0 by default.
	// It cannot be 0 when maxSurge is 0.
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="maxUnavailable must be a non-negative number or a percentage such as 25%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// maxSurge is how many Machines (a number, or a percentage of replicas
	// rounded up) may exist above replicas during the update; 1 by default.
	// It cannot be 0 when maxUnavailable is 0.
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="maxSurge must be a non-negative number or a percentage such as 25%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
}

// MachineDeploymentRemediationSpec limits how unhealthy Machines are replaced.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentRemediationSpec struct {
	// maxInFlight caps how many Machines (a number or a percentage of
	// replicas) are being remediated at the same time; no cap when unset.
	// Only the newest MachineSet remediates; unhealthy Machines are always
	// the first to go when scaling down.
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="maxInFlight must be a non-negative number or a percentage such as 25%"
	MaxInFlight *intstr.IntOrString `json:"maxInFlight,omitempty"`
}

// MachineDeploymentDeletionSpec holds options used when a MachineDeployment
// scales down.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentDeletionSpec struct {
	// order picks which Machines go first when scaling down: Random (the
	// default), Newest or Oldest.
	// +optional
	Order MachineSetDeletionOrder `json:"order,omitempty"`
}

// MachineDeploymentStatus is what controllers last saw of a MachineDeployment.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentStatus struct {
	// conditions describe the MachineDeployment's state. Types in use:
	// Available, MachinesReady, MachinesUpToDate, RollingOut, ScalingUp,
	// ScalingDown, Remediating, Deleting, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the metadata.generation this status reflects.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// selector is spec.selector written as a label query string, for the
	// scale subresource and clients such as the autoscaler.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Selector string `json:"selector,omitempty"`

	// replicas is the number of Machines that exist and match the selector.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// readyReplicas counts Machines whose Ready condition is True.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// availableReplicas counts Machines whose Available condition is True.
	// +optional
	AvailableReplicas *int32 `json:"availableReplicas,omitempty"`

	// upToDateReplicas counts Machines whose UpToDate condition is True.
	// +optional
	UpToDateReplicas *int32 `json:"upToDateReplicas,omitempty"`

	// versions counts the MachineDeployment's Machines by Kubernetes version.
	// +optional
	// +listType=map
	// +listMapKey=version
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Versions []StatusVersion `json:"versions,omitempty"`

	// phase is a one-word summary: ScalingUp, ScalingDown, Running, Failed or Unknown.
	// +optional
	// +kubebuilder:validation:Enum=ScalingUp;ScalingDown;Running;Failed;Unknown
	Phase string `json:"phase,omitempty"`

	// deprecated holds status fields of older API versions; Capstan does
	// not write them.
	// +optional
	Deprecated *MachineDeploymentDeprecatedStatus `json:"deprecated,omitempty"`
}

// MachineDeploymentPhase is a one-word summary of a MachineDeployment's state.
type MachineDeploymentPhase string

// The phases of a MachineDeployment.
const (
	// MachineDeploymentPhaseScalingUp: there are fewer Machines than wanted.
	MachineDeploymentPhaseScalingUp MachineDeploymentPhase = "ScalingUp"
	// MachineDeploymentPhaseScalingDown: there are more Machines than wanted.
	MachineDeploymentPhaseScalingDown MachineDeploymentPhase = "ScalingDown"
	// MachineDeploymentPhaseRunning: the wanted number of Machines run.
	MachineDeploymentPhaseRunning MachineDeploymentPhase = "Running"
	// MachineDeploymentPhaseFailed: kept only for objects converted from v1beta1.
	MachineDeploymentPhaseFailed MachineDeploymentPhase = "Failed"
	// MachineDeploymentPhaseUnknown: the phase cannot be told.
	MachineDeploymentPhaseUnknown MachineDeploymentPhase = "Unknown"
)

// MachineDeployment rolls out changes to a group of identical Machines by
// way of MachineSets, the way a Deployment does for Pods.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:path=machinedeployments,shortName=md,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=cluster-api"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterName",description="Cluster the MachineDeployment belongs to"
// +kubebuilder:printcolumn:name="Available",type="string",JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="Whether the MachineDeployment passes its availability checks"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".spec.replicas",description="Machines wanted"
// +kubebuilder:printcolumn:name="Current",type="integer",JSONPath=".status.replicas",description="Machines that exist"
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas",description="Machines that are Ready"
// +kubebuilder:printcolumn:name="Available",type="integer",JSONPath=".status.availableReplicas",description="Machines that are Available"
// +kubebuilder:printcolumn:name="Up-to-date",type="integer",JSONPath=".status.upToDateReplicas",description="Machines that are up to date"
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase",description="ScalingUp, ScalingDown, Running, Failed or Unknown"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the MachineDeployment was created"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".spec.template.spec.version",description="Kubernetes version of the Machines"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: the MachineDeployment name is used as a label value"
type MachineDeployment struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the MachineDeployment.
	// +required
	// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName",message="spec.clusterName is immutable: create a new MachineDeployment in the other Cluster instead",fieldPath=".clusterName"
	// +kubebuilder:validation:XValidation:rule="self.template.spec.clusterName == self.clusterName",message="spec.template.spec.clusterName must equal spec.clusterName",fieldPath=".template.spec.clusterName"
	// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchLabels) || [has(self.template.metadata) && has(self.template.metadata.labels) ? self.template.metadata.labels : {}].all(l, self.selector.matchLabels.all(k, k in l && l[k] in [self.selector.matchLabels[k]]))",message="spec.selector does not match spec.template.metadata.labels: every selector matchLabels entry must be set to the same value in the template labels",fieldPath=".selector"
	// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchExpressions) || [has(self.template.metadata) && has(self.template.metadata.labels) ? self.template.metadata.labels : {}].all(l, self.selector.matchExpressions.all(e, e.operator in ['NotIn'] || ((e.operator in ['DoesNotExist']) != (e.key in l))))",message="spec.selector does not match spec.template.metadata.labels: add the template labels that the selector's In and Exists expressions ask for, and drop those its DoesNotExist expressions exclude",fieldPath=".selector"
	// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, (e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist']) && ((e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0)))",message="spec.selector.matchExpressions: operator must be In, NotIn, Exists or DoesNotExist; In and NotIn need values, Exists and DoesNotExist take none",fieldPath=".selector.matchExpressions"
	Spec MachineDeploymentSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the MachineDeployment.
	// +optional
	Status MachineDeploymentStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the MachineDeployment's conditions.
func (m *MachineDeployment) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the MachineDeployment's conditions.
func (m *MachineDeployment) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// MachineDeploymentList is a list of MachineDeployments.
// +kubebuilder:object:root=true
type MachineDeploymentList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the MachineDeployments.
	Items []MachineDeployment `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MachineDeployment{}, &MachineDeploymentList{})
}
