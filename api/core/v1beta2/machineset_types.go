package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachineSetKind is the kind name of MachineSet.
const MachineSetKind = "MachineSet"

// MachineSetFinalizer keeps a MachineSet until its Machines are gone. The
// value is Cluster API's, so that tools written for it recognise it.
const MachineSetFinalizer = "cluster.x-k8s.io/machineset"

// Annotations a MachineSet's controller reads.
const (
	// DisableMachineCreateAnnotation on a MachineSet stops it from creating
	// Machines; a MachineDeployment sets it on its old sets, so that a
	// Machine deleted from one is replaced by the up-to-date set.
	DisableMachineCreateAnnotation = "machineset.cluster.x-k8s.io/disable-machine-create"

	// AutoscalerMinSizeAnnotation and AutoscalerMaxSizeAnnotation are the
	// cluster autoscaler's node group bounds, on a MachineSet or a
	// MachineDeployment; an unset spec.replicas takes the minimum when both
	// are set.
	AutoscalerMinSizeAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	AutoscalerMaxSizeAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
)

// MachineSetSpec is what the user, or the owning MachineDeployment, wants a
// MachineSet to be.
type MachineSetSpec struct {
	// clusterName is the name of the Cluster the MachineSet belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterName string `json:"clusterName,omitempty"`

	// replicas is the number of Machines wanted. When unset it becomes the
	// autoscaler's minimum size if both cluster-api-autoscaler-node-group
	// min and max size annotations are set, otherwise 1.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// selector picks the Machines this MachineSet counts as its own. It must
	// match the labels in template.metadata.labels.
	// Left out, the controller fills it in (there is no defaulting webhook):
	// Cluster API manifests often rely on that.
	// +optional
	Selector metav1.LabelSelector `json:"selector,omitempty,omitzero"`

	// template is the Machine to create when there are too few. References
	// in it to provider objects point at templates that are cloned for each
	// Machine.
	// +required
	Template MachineTemplateSpec `json:"template,omitempty,omitzero"`

	// machineNaming sets how the names of new Machines are built.
	// +optional
	MachineNaming MachineNamingSpec `json:"machineNaming,omitempty,omitzero"`

	// deletion holds options used when the MachineSet scales down.
	// +optional
	Deletion MachineSetDeletionSpec `json:"deletion,omitempty,omitzero"`
}

// MachineSetDeletionSpec holds options used when a MachineSet scales down.
// +kubebuilder:validation:MinProperties=1
type MachineSetDeletionSpec struct {
	// order picks which Machines go first when scaling down: Random (the
	// default), Newest or Oldest.
	// +optional
	Order MachineSetDeletionOrder `json:"order,omitempty"`
}

// MachineTemplateSpec is the Machine a MachineSet or MachineDeployment creates.
type MachineTemplateSpec struct {
	// metadata holds the labels and annotations the new Machines get.
	// +optional
	ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the new Machines.
	// +required
	Spec MachineSpec `json:"spec,omitempty,omitzero"`
}

// MachineSetDeletionOrder picks which Machines are deleted first when scaling
// down. Machines marked with the delete-machine annotation and unhealthy
// Machines always go before the others.
// +kubebuilder:validation:Enum=Random;Newest;Oldest
type MachineSetDeletionOrder string

const (
	// RandomMachineSetDeletionOrder deletes the remaining Machines in no particular order.
	RandomMachineSetDeletionOrder MachineSetDeletionOrder = "Random"

	// NewestMachineSetDeletionOrder deletes the most recently created Machines first.
	NewestMachineSetDeletionOrder MachineSetDeletionOrder = "Newest"

	// OldestMachineSetDeletionOrder deletes the oldest Machines first.
	OldestMachineSetDeletionOrder MachineSetDeletionOrder = "Oldest"
)

// MachineSetStatus is what controllers last saw of a MachineSet.
// +kubebuilder:validation:MinProperties=1
type MachineSetStatus struct {
	// conditions describe the MachineSet's state. Types in use:
	// MachinesReady, MachinesUpToDate, ScalingUp, ScalingDown, Remediating,
	// Deleting, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// selector is spec.selector written as a label query string, for the
	// scale subresource and clients such as the autoscaler.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Selector string `json:"selector,omitempty"`

	// replicas is the number of Machines that exist.
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

	// versions counts the MachineSet's Machines by Kubernetes version.
	// +optional
	// +listType=map
	// +listMapKey=version
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Versions []StatusVersion `json:"versions,omitempty"`

	// observedGeneration is the metadata.generation this status reflects.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// deprecated holds status fields of older API versions; Capstan does
	// not write them.
	// +optional
	Deprecated *MachineSetDeprecatedStatus `json:"deprecated,omitempty"`
}

// A note on the CEL rules that compare the selector with the template labels
// (here and on MachineDeployment). metav1.LabelSelector leaves its maps,
// lists and strings unbounded, so the API server's static cost estimate
// assumes a selector as large as a whole request, and refuses rules that
// could be too slow on one. The rules are written to stay inside the limit:
//   - they test "x in [y]" rather than "x == y"; both mean the same, but the
//     estimate of "==" grows with the maximum string length and that of
//     membership in a one-item list does not;
//   - they bind the template labels once, as the variable of a one-item
//     list's all(), instead of selecting them afresh in every iteration.
// The "In" values of matchExpressions are not compared: no rule doing so fits.

// MachineSet keeps a number of identical Machines running.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:path=machinesets,shortName=ms,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=cluster-api"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterName",description="Cluster the MachineSet belongs to"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".spec.replicas",description="Machines wanted"
// +kubebuilder:printcolumn:name="Current",type="integer",JSONPath=".status.replicas",description="Machines that exist"
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas",description="Machines that are Ready"
// +kubebuilder:printcolumn:name="Available",type="integer",JSONPath=".status.availableReplicas",description="Machines that are Available"
// +kubebuilder:printcolumn:name="Up-to-date",type="integer",JSONPath=".status.upToDateReplicas",description="Machines that are up to date"
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the MachineSet was created"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".spec.template.spec.version",description="Kubernetes version of the Machines"
type MachineSet struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the MachineSet.
	// +required
	// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName",message="spec.clusterName is immutable: create a new MachineSet in the other Cluster instead",fieldPath=".clusterName"
	// +kubebuilder:validation:XValidation:rule="self.template.spec.clusterName == self.clusterName",message="spec.template.spec.clusterName must equal spec.clusterName",fieldPath=".template.spec.clusterName"
	// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchLabels) || [has(self.template.metadata) && has(self.template.metadata.labels) ? self.template.metadata.labels : {}].all(l, self.selector.matchLabels.all(k, k in l && l[k] in [self.selector.matchLabels[k]]))",message="spec.selector does not match spec.template.metadata.labels: every selector matchLabels entry must be set to the same value in the template labels",fieldPath=".selector"
	// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchExpressions) || [has(self.template.metadata) && has(self.template.metadata.labels) ? self.template.metadata.labels : {}].all(l, self.selector.matchExpressions.all(e, e.operator in ['NotIn'] || ((e.operator in ['DoesNotExist']) != (e.key in l))))",message="spec.selector does not match spec.template.metadata.labels: add the template labels that the selector's In and Exists expressions ask for, and drop those its DoesNotExist expressions exclude",fieldPath=".selector"
	// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, (e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist']) && ((e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0)))",message="spec.selector.matchExpressions: operator must be In, NotIn, Exists or DoesNotExist; In and NotIn need values, Exists and DoesNotExist take none",fieldPath=".selector.matchExpressions"
	Spec MachineSetSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the MachineSet.
	// +optional
	Status MachineSetStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the MachineSet's conditions.
func (m *MachineSet) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the MachineSet's conditions.
func (m *MachineSet) SetConditions(conditions []metav1.Condition) { m.Status.Conditions = conditions }

// MachineSetList is a list of MachineSets.
// +kubebuilder:object:root=true
type MachineSetList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the MachineSets.
	Items []MachineSet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MachineSet{}, &MachineSetList{})
}
