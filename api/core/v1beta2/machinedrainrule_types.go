package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachineDrainRuleKind is the kind name of MachineDrainRule.
const MachineDrainRuleKind = "MachineDrainRule"

// PodDrainLabel is the label (or annotation) a workload cluster's user puts on
// a Pod to keep a drain from evicting it: "skip" leaves the Pod alone,
// "wait-completed" waits for it to finish without evicting it. It wins over
// every MachineDrainRule.
const PodDrainLabel = "cluster.x-k8s.io/drain"

// MachineDrainRuleDrainBehavior is what a drain does with the Pods a rule
// selects.
// +kubebuilder:validation:Enum=Drain;Skip;WaitCompleted
type MachineDrainRuleDrainBehavior string

const (
	// MachineDrainRuleDrainBehaviorDrain evicts the Pods, in the group of the
	// rule's order.
	MachineDrainRuleDrainBehaviorDrain MachineDrainRuleDrainBehavior = "Drain"

	// MachineDrainRuleDrainBehaviorSkip leaves the Pods on the Node: they are
	// neither evicted nor waited for.
	MachineDrainRuleDrainBehaviorSkip MachineDrainRuleDrainBehavior = "Skip"

	// MachineDrainRuleDrainBehaviorWaitCompleted never evicts the Pods, but
	// the drain is not over until they have completed.
	MachineDrainRuleDrainBehaviorWaitCompleted MachineDrainRuleDrainBehavior = "WaitCompleted"
)

// MachineDrainRuleSpec says which Pods on which Machines a rule applies to,
// and what a drain does with them.
type MachineDrainRuleSpec struct {
	// drain is what happens to the selected Pods when a selected Machine's
	// Node is drained.
	// +required
	Drain MachineDrainRuleDrainConfig `json:"drain,omitempty,omitzero"`

	// machines picks the Machines of this namespace the rule applies to. A
	// Machine is picked when any entry matches it; an entry matches when both
	// its selector (the Machine's labels) and its clusterSelector (the labels
	// of the Machine's Cluster) do. Left out, the rule applies to every
	// Machine of the namespace.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, x == y))",message="entries in machines must be unique: remove the repeated selector"
	Machines []MachineDrainRuleMachineSelector `json:"machines,omitempty"`

	// pods picks the Pods the rule applies to, in every namespace of the
	// workload cluster. A Pod is picked when any entry matches it; an entry
	// matches when both its selector (the Pod's labels) and its
	// namespaceSelector (the labels of the Pod's namespace) do. Left out, the
	// rule applies to every Pod.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, x == y))",message="entries in pods must be unique: remove the repeated selector"
	Pods []MachineDrainRulePodSelector `json:"pods,omitempty"`
}

// MachineDrainRuleDrainConfig is what a drain does with the selected Pods.
// +kubebuilder:validation:XValidation:rule="!has(self.order) || self.behavior == 'Drain'",message="order may only be set when behavior is Drain: remove spec.drain.order or set behavior to Drain",fieldPath=".order"
type MachineDrainRuleDrainConfig struct {
	// behavior is Drain (evict the Pods, group by group in ascending order),
	// Skip (leave them alone) or WaitCompleted (never evict them, but wait
	// until they have completed; such Pods are in the group of order 0).
	// +required
	Behavior MachineDrainRuleDrainBehavior `json:"behavior,omitempty"`

	// order places the Pods in a drain group when behavior is Drain: the Pods
	// of a group are evicted only once every Pod of every lower group is gone
	// from the Node. Left out it is 0; any int32 is allowed, negative ones
	// drain before the default group.
	// +optional
	Order *int32 `json:"order,omitempty"`
}

// MachineDrainRuleMachineSelector picks Machines by their own labels and by
// their Cluster's; both must match. An empty selector matches everything,
// but at least one of the two must be given.
//
// The selectors' operators are not checked on admission: a CEL rule over a
// list of 32 unbounded label selectors exceeds the API server's cost budget.
// A selector the drain cannot evaluate stops the drain of the Machines in
// the namespace, and their Deleting condition names the rule and the field.
// +kubebuilder:validation:MinProperties=1
type MachineDrainRuleMachineSelector struct {
	// selector matches the Machine's labels; left out or empty it matches
	// every Machine.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// clusterSelector matches the labels of the Machine's Cluster; left out
	// or empty it matches Machines of every Cluster.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
}

// MachineDrainRulePodSelector picks Pods by their own labels and by their
// namespace's; both must match. An empty selector matches everything, but at
// least one of the two must be given.
// +kubebuilder:validation:MinProperties=1
type MachineDrainRulePodSelector struct {
	// selector matches the Pod's labels; left out or empty it matches every
	// Pod.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// namespaceSelector matches the labels of the Pod's namespace; left out
	// or empty it matches Pods of every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// MachineDrainRule tells the drain of the selected Machines' Nodes what to do
// with the selected Pods: evict them in a given order, skip them, or wait for
// them to complete. It applies to the Machines of its own namespace.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=machinedrainrules,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=cluster-api"}
// +kubebuilder:printcolumn:name="Behavior",type="string",JSONPath=".spec.drain.behavior",description="What a drain does with the selected Pods"
// +kubebuilder:printcolumn:name="Order",type="string",JSONPath=".spec.drain.order",description="Drain group of the selected Pods"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the MachineDrainRule was created"
type MachineDrainRule struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +required
	metav1.ObjectMeta `json:"metadata"`

	// spec says which Pods on which Machines the rule applies to, and how.
	// +required
	Spec MachineDrainRuleSpec `json:"spec,omitempty,omitzero"`
}

// MachineDrainRuleList is a list of MachineDrainRules.
// +kubebuilder:object:root=true
type MachineDrainRuleList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +required
	metav1.ListMeta `json:"metadata"`

	// items are the MachineDrainRules.
	Items []MachineDrainRule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MachineDrainRule{}, &MachineDrainRuleList{})
}
