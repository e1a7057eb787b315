package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// MachineHealthCheckKind is the kind name of MachineHealthCheck.
const MachineHealthCheckKind = "MachineHealthCheck"

// DefaultNodeStartupTimeoutSeconds is how long a Machine may run without a
// Node before a MachineHealthCheck calls it unhealthy, when no timeout is set.
const DefaultNodeStartupTimeoutSeconds = int32(600)

// MachineHealthCheckSpec is what the user wants a MachineHealthCheck to do.
type MachineHealthCheckSpec struct {
	// clusterName is the name of the Cluster whose Machines are checked.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterName string `json:"clusterName,omitempty"`

	// selector picks the Machines to check. It must not be empty.
	// +required
	Selector metav1.LabelSelector `json:"selector,omitempty,omitzero"`

	// checks decide when a Machine is unhealthy. Machines carrying the
	// cluster.x-k8s.io/remediate-machine annotation and Machines whose Node
	// was deleted are always unhealthy.
	// +optional
	Checks MachineHealthCheckChecks `json:"checks,omitempty,omitzero"`

	// remediation decides whether and how unhealthy Machines are repaired.
	// When unset, every unhealthy Machine is handed to its owner (for example
	// its MachineSet or KubeadmControlPlane) through the OwnerRemediated
	// condition.
	// +optional
	Remediation MachineHealthCheckRemediation `json:"remediation,omitempty,omitzero"`
}

// MachineHealthCheckChecks decide when a Machine is unhealthy.
// +kubebuilder:validation:MinProperties=1
type MachineHealthCheckChecks struct {
	// nodeStartupTimeoutSeconds is how long a Machine may run without a Node
	// before it counts as unhealthy, counted from the latest of the Cluster's
	// infrastructure and control plane readiness and the Machine's own
	// infrastructure readiness or creation. 600 when unset; 0 turns the check
	// off; otherwise at least 30.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self == 0 || self >= 30",message="nodeStartupTimeoutSeconds must be 0 (off) or at least 30"
	NodeStartupTimeoutSeconds *int32 `json:"nodeStartupTimeoutSeconds,omitempty"`

	// unhealthyNodeConditions mark the Machine unhealthy when any one of them holds.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	UnhealthyNodeConditions []UnhealthyNodeCondition `json:"unhealthyNodeConditions,omitempty"`

	// unhealthyMachineConditions mark the Machine unhealthy when any one of them holds.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	UnhealthyMachineConditions []UnhealthyMachineCondition `json:"unhealthyMachineConditions,omitempty"`
}

// MachineHealthCheckRemediation decides whether and how unhealthy Machines
// are repaired.
// +kubebuilder:validation:MinProperties=1
type MachineHealthCheckRemediation struct {
	// triggerIf limits when remediation starts; it always starts when unset.
	// +optional
	TriggerIf MachineHealthCheckRemediationTriggerIf `json:"triggerIf,omitempty,omitzero"`

	// templateRef hands remediation to an external controller: for each
	// unhealthy Machine an object is created from this template. When unset
	// the Machine's owner remediates.
	// +optional
	TemplateRef MachineHealthCheckRemediationTemplateReference `json:"templateRef,omitempty,omitzero"`
}

// MachineHealthCheckRemediationTriggerIf limits when remediation starts.
// +kubebuilder:validation:MinProperties=1
type MachineHealthCheckRemediationTriggerIf struct {
	// unhealthyLessThanOrEqualTo allows remediation only while at most this
	// many (or this percentage of) the checked Machines are unhealthy.
	// unhealthyInRange wins when both are set.
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="unhealthyLessThanOrEqualTo must be a non-negative number or a percentage such as 40%"
	UnhealthyLessThanOrEqualTo *intstr.IntOrString `json:"unhealthyLessThanOrEqualTo,omitempty"`

	// unhealthyInRange allows remediation only while the number of unhealthy
	// Machines is within "[min-max]", bounds included; for example "[3-5]".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^\[[0-9]+-[0-9]+\]$`
	// +kubebuilder:validation:XValidation:rule=`!self.matches('^\\[[0-9]+-[0-9]+\\]$') || int(self.substring(1, self.indexOf('-'))) <= int(self.substring(self.indexOf('-') + 1, self.size() - 1))`,message="unhealthyInRange must be written [min-max] with min not above max, for example [3-5]"
	UnhealthyInRange string `json:"unhealthyInRange,omitempty"`
}

// MachineHealthCheckRemediationTemplateReference names a remediation template.
type MachineHealthCheckRemediationTemplateReference struct {
	// kind of the template.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`
	Kind string `json:"kind,omitempty"`

	// name of the template, in the MachineHealthCheck's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`

	// apiVersion of the template, group/version, for example
	// infrastructure.cluster.x-k8s.io/v1beta2. Keep it in step with the
	// version the template is served at.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[a-z]([-a-z0-9]*[a-z0-9])?$`
	APIVersion string `json:"apiVersion,omitempty"`
}

// IsDefined tells whether the reference names anything.
func (r MachineHealthCheckRemediationTemplateReference) IsDefined() bool {
	return r.Kind != "" || r.Name != "" || r.APIVersion != ""
}

// GroupVersionKind is the group, version and kind of the referenced template.
func (r MachineHealthCheckRemediationTemplateReference) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(r.APIVersion, r.Kind)
}

// ToObjectReference turns the reference into a core ObjectReference in the
// given namespace.
func (r MachineHealthCheckRemediationTemplateReference) ToObjectReference(namespace string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: namespace, Name: r.Name}
}

// UnhealthyNodeCondition marks a Machine unhealthy when its Node has had a
// condition in the given status for at least the given time.
type UnhealthyNodeCondition struct {
	// type of the Node condition, for example Ready.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	Type corev1.NodeConditionType `json:"type,omitempty"`

	// status of the condition: True, False or Unknown.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	Status corev1.ConditionStatus `json:"status,omitempty"`

	// timeoutSeconds is how long the condition must hold; 300 means five minutes.
	// +required
	// +kubebuilder:validation:Minimum=0
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// UnhealthyMachineCondition marks a Machine unhealthy when it has had a
// condition in the given status for at least the given time.
type UnhealthyMachineCondition struct {
	// type of the Machine condition. The conditions a MachineHealthCheck
	// itself sets or relies on (Ready, Available, HealthCheckSucceeded,
	// OwnerRemediated, ExternallyRemediated) cannot be used.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`
	// +kubebuilder:validation:XValidation:rule="!(self in ['Ready', 'Available', 'HealthCheckSucceeded', 'OwnerRemediated', 'ExternallyRemediated'])",message="type cannot be Ready, Available, HealthCheckSucceeded, OwnerRemediated or ExternallyRemediated: pick another Machine condition"
	Type string `json:"type,omitempty"`

	// status of the condition: True, False or Unknown.
	// +required
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status metav1.ConditionStatus `json:"status,omitempty"`

	// timeoutSeconds is how long the condition must hold; 300 means five minutes.
	// +required
	// +kubebuilder:validation:Minimum=0
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// MachineHealthCheckStatus is what the controller last saw of a MachineHealthCheck.
// +kubebuilder:validation:MinProperties=1
type MachineHealthCheckStatus struct {
	// conditions describe the MachineHealthCheck's state. Types in use:
	// RemediationAllowed, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// expectedMachines is the number of Machines the selector picks.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ExpectedMachines *int32 `json:"expectedMachines,omitempty"`

	// currentHealthy is the number of those Machines that are healthy.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CurrentHealthy *int32 `json:"currentHealthy,omitempty"`

	// remediationsAllowed is how many more Machines may be remediated before
	// triggerIf stops remediation.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RemediationsAllowed *int32 `json:"remediationsAllowed,omitempty"`

	// observedGeneration is the metadata.generation this status reflects.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// targets are the names of the Machines being checked.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Targets []string `json:"targets,omitempty"`

	// deprecated holds status fields of older API versions; Capstan does
	// not write them.
	// +optional
	Deprecated *DeprecatedConditionsStatus `json:"deprecated,omitempty"`
}

// MachineHealthCheck watches a set of Machines and has the unhealthy ones
// repaired, usually by replacing them.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=machinehealthchecks,shortName=mhc;mhcs,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=cluster-api"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterName",description="Cluster the checked Machines belong to"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.expectedMachines",description="Machines being checked"
// +kubebuilder:printcolumn:name="Healthy",type="integer",JSONPath=".status.currentHealthy",description="Machines found healthy"
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the MachineHealthCheck was created"
type MachineHealthCheck struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired behaviour of the MachineHealthCheck.
	// +required
	// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName",message="spec.clusterName is immutable: create a new MachineHealthCheck for the other Cluster instead",fieldPath=".clusterName"
	// +kubebuilder:validation:XValidation:rule="(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",message="spec.selector must not be empty: an empty selector would check every Machine in the namespace",fieldPath=".selector"
	// +kubebuilder:validation:XValidation:rule="!has(self.selector.matchLabels) || !('cluster.x-k8s.io/cluster-name' in self.selector.matchLabels) || self.selector.matchLabels['cluster.x-k8s.io/cluster-name'] == self.clusterName",message="spec.selector may only select the cluster.x-k8s.io/cluster-name of spec.clusterName",fieldPath=".selector"
	Spec MachineHealthCheckSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the MachineHealthCheck.
	// +optional
	Status MachineHealthCheckStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the MachineHealthCheck's conditions.
func (m *MachineHealthCheck) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the MachineHealthCheck's conditions.
func (m *MachineHealthCheck) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// MachineHealthCheckList is a list of MachineHealthChecks.
// +kubebuilder:object:root=true
type MachineHealthCheckList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the MachineHealthChecks.
	Items []MachineHealthCheck `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MachineHealthCheck{}, &MachineHealthCheckList{})
}
