package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The status.deprecated.v1beta1 blocks below keep, in a v1beta2 object, the
// status fields that v1beta1 had and v1beta2 replaced (the old conditions
// with severities, failureReason/failureMessage, the old replica counts).
// The contract still carries them so that objects converted from v1beta1,
// and tools that read the old fields, find them. Capstan serves only v1beta2
// and never writes them; it stores what others write.

// V1Beta1Condition is a condition in the v1beta1 shape, with a severity.
type V1Beta1Condition struct {
	// type of the condition, in CamelCase or example.com/CamelCase.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Type string `json:"type"`

	// status of the condition: True, False or Unknown.
	// +required
	Status corev1.ConditionStatus `json:"status"`

	// severity tells how bad a False condition is: Error, Warning or Info.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Severity string `json:"severity,omitempty"`

	// lastTransitionTime is when the status last changed.
	// +required
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`

	// reason is a CamelCase word saying why the status is what it is.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`

	// message explains the status to people.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=10240
	Message string `json:"message,omitempty"`
}

// V1Beta1Conditions is a list of v1beta1 conditions.
type V1Beta1Conditions []V1Beta1Condition

// DeprecatedConditionsStatus holds the v1beta1 status remainder of a kind
// whose v1beta1 status had only conditions (ClusterClass, MachineHealthCheck).
type DeprecatedConditionsStatus struct {
	// v1beta1 holds the fields v1beta1 had.
	// +optional
	V1Beta1 *V1Beta1ConditionsStatus `json:"v1beta1,omitempty"`
}

// V1Beta1ConditionsStatus is a v1beta1 status that had only conditions.
type V1Beta1ConditionsStatus struct {
	// conditions in the v1beta1 shape.
	// +optional
	Conditions V1Beta1Conditions `json:"conditions,omitempty"`
}

// DeprecatedFailureStatus holds the v1beta1 status remainder of a kind whose
// v1beta1 status had conditions and failure fields (Cluster, Machine).
type DeprecatedFailureStatus struct {
	// v1beta1 holds the fields v1beta1 had.
	// +optional
	V1Beta1 *V1Beta1FailureStatus `json:"v1beta1,omitempty"`
}

// V1Beta1FailureStatus is a v1beta1 status with conditions and the failure
// fields that reported a fatal problem.
type V1Beta1FailureStatus struct {
	// conditions in the v1beta1 shape.
	// +optional
	Conditions V1Beta1Conditions `json:"conditions,omitempty"`

	// failureReason was a terse word for a fatal problem.
	// +optional
	FailureReason *string `json:"failureReason,omitempty"`

	// failureMessage was the explanation of a fatal problem.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=10240
	FailureMessage *string `json:"failureMessage,omitempty"`
}

// MachineSetDeprecatedStatus holds a MachineSet's status fields from older
// API versions.
type MachineSetDeprecatedStatus struct {
	// v1beta1 holds the fields v1beta1 had.
	// +optional
	V1Beta1 *MachineSetV1Beta1DeprecatedStatus `json:"v1beta1,omitempty"`
}

// MachineSetV1Beta1DeprecatedStatus is a MachineSet's v1beta1 status remainder.
type MachineSetV1Beta1DeprecatedStatus struct {
	V1Beta1FailureStatus `json:",inline"`

	// fullyLabeledReplicas counted the Machines whose labels matched the template's.
	// +optional
	FullyLabeledReplicas int32 `json:"fullyLabeledReplicas"`

	// readyReplicas counted the Machines with a Ready Node.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// availableReplicas counted the Machines ready for minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
}

// MachineDeploymentDeprecatedStatus holds a MachineDeployment's status
// fields from older API versions.
type MachineDeploymentDeprecatedStatus struct {
	// v1beta1 holds the fields v1beta1 had.
	// +optional
	V1Beta1 *MachineDeploymentV1Beta1DeprecatedStatus `json:"v1beta1,omitempty"`
}

// MachineDeploymentV1Beta1DeprecatedStatus is a MachineDeployment's v1beta1
// status remainder.
type MachineDeploymentV1Beta1DeprecatedStatus struct {
	V1Beta1ConditionsStatus `json:",inline"`

	// updatedReplicas counted the Machines made from the current template.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`

	// readyReplicas counted the Machines with a Ready Node.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// availableReplicas counted the Machines ready for minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`

	// unavailableReplicas counted the Machines still needed for the desired
	// count to be available.
	// +optional
	UnavailableReplicas int32 `json:"unavailableReplicas"`
}

// MachinePoolDeprecatedStatus holds a MachinePool's status fields from older
// API versions.
type MachinePoolDeprecatedStatus struct {
	// v1beta1 holds the fields v1beta1 had.
	// +optional
	V1Beta1 *MachinePoolV1Beta1DeprecatedStatus `json:"v1beta1,omitempty"`
}

// MachinePoolV1Beta1DeprecatedStatus is a MachinePool's v1beta1 status remainder.
type MachinePoolV1Beta1DeprecatedStatus struct {
	V1Beta1FailureStatus `json:",inline"`

	// readyReplicas counted the pool's ready Nodes.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// availableReplicas counted the pool's available Nodes.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// unavailableReplicas counted the Nodes still needed for the desired
	// count to be available.
	// +optional
	UnavailableReplicas int32 `json:"unavailableReplicas,omitempty"`
}
