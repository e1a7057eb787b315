package drain

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// Labels and annotations that change how a pod is drained.
const (
	// MirrorPodAnnotation marks the API mirror of a static pod the kubelet
	// runs from a file; evicting it would do nothing, so it is skipped.
	MirrorPodAnnotation = "kubernetes.io/config.mirror"

	// PodDrainLabel lets a workload cluster's user opt a pod out of eviction.
	// Its value is PodDrainLabelSkip or PodDrainLabelWaitCompleted (compared
	// without regard to case, and the hyphen may be left out); it takes
	// precedence over Rules. As upstream, only the label counts, not an
	// annotation of that name.
	PodDrainLabel = clusterv1.PodDrainLabel
	// PodDrainLabelSkip leaves the pod alone: it is neither evicted nor
	// waited for.
	PodDrainLabelSkip = "skip"
	// PodDrainLabelWaitCompleted does not evict the pod, but the drain is not
	// done until the pod has completed (or gone).
	PodDrainLabelWaitCompleted = "wait-completed"
)

// unreachableDeletionGrace is how long a pod on an unreachable node may have
// been deleting before the drain stops waiting for it: nobody is there to
// finish its termination.
const unreachableDeletionGrace = time.Second

// Behavior is what a drain does with a pod that no built-in rule skips. The
// values are those of a MachineDrainRule's spec.drain.behavior.
type Behavior string

const (
	// BehaviorDrain evicts the pod, in the batch of its Order.
	BehaviorDrain = Behavior(clusterv1.MachineDrainRuleDrainBehaviorDrain)
	// BehaviorSkip leaves the pod alone.
	BehaviorSkip = Behavior(clusterv1.MachineDrainRuleDrainBehaviorSkip)
	// BehaviorWaitCompleted does not evict the pod but waits for it to
	// complete; such pods belong to the batch of order 0.
	BehaviorWaitCompleted = Behavior(clusterv1.MachineDrainRuleDrainBehaviorWaitCompleted)
)

// Rule assigns a Behavior and an Order to the pods it selects; it is how a
// MachineDrainRule reaches this package (a MachineDrainRule with several pod
// selector terms becomes several Rules with the same Name, in term order).
type Rule struct {
	// Name says where the rule came from, for reasons and messages.
	Name string
	// Behavior applies to the pods the rule selects; a value other than
	// BehaviorSkip or BehaviorWaitCompleted drains.
	Behavior Behavior
	// Order places the pods in a batch when Behavior is BehaviorDrain: a batch
	// is evicted only once every pod of a lower order is gone.
	Order int32
	// Pods selects by the pod's labels; nil selects every pod.
	Pods labels.Selector
	// Namespaces selects by the labels of the pod's namespace; nil selects
	// every namespace.
	Namespaces labels.Selector
}

func (r Rule) matches(pod *corev1.Pod, namespaceLabels map[string]map[string]string) bool {
	return matches(r.Pods, pod.Labels) && matches(r.Namespaces, namespaceLabels[pod.Namespace])
}

// Policy is the caller's configuration of which pods a drain leaves alone and
// in which order it evicts the rest. The zero Policy drains like kubectl drain
// --ignore-daemonsets, honouring PodDrainLabel.
type Policy struct {
	// SkipSelector skips the pods whose labels it matches; nil skips none.
	SkipSelector labels.Selector
	// Rules are tried in order after the built-in rules and PodDrainLabel;
	// the first that selects a pod decides its behavior and order. Pods no
	// rule selects are drained at order 0.
	Rules []Rule
}

func (p Policy) needsNamespaceLabels() bool {
	for _, r := range p.Rules {
		if r.Namespaces != nil {
			return true
		}
	}
	return false
}

// State is what one drain pass observed in the workload cluster.
type State struct {
	// Pods are the pods bound to the node.
	Pods []corev1.Pod
	// DaemonSets holds the UIDs of the DaemonSets that exist. A pod whose
	// controlling DaemonSet is not among them is an orphan and is evicted
	// like any other pod. Nil means every DaemonSet a pod names exists.
	DaemonSets map[types.UID]bool
	// NamespaceLabels are the labels of the pods' namespaces, needed only by
	// Rules with a Namespaces selector.
	NamespaceLabels map[string]map[string]string
	// NodeUnreachable is true when the node's Ready condition is Unknown (see
	// NodeUnreachable): pods deleting there for over a second are no longer
	// waited for, since no kubelet will finish their termination.
	NodeUnreachable bool
	// Now is when the state was observed; it only matters on an unreachable
	// node.
	Now time.Time
}

// Action is what a drain pass does about one pod.
type Action string

const (
	// ActionSkip: the pod is left alone and does not hold the drain up.
	ActionSkip Action = "Skip"
	// ActionEvict: the pod is evicted in this pass.
	ActionEvict Action = "Evict"
	// ActionDefer: the pod will be evicted once every pod of a lower drain
	// order is gone.
	ActionDefer Action = "Defer"
	// ActionWaitCompleted: the pod is not evicted; the drain waits for it to
	// complete.
	ActionWaitCompleted Action = "WaitCompleted"
	// ActionWaitDeleted: the pod is already being deleted; the drain waits
	// for it to go.
	ActionWaitDeleted Action = "WaitDeleted"
)

// Decision is the classification of one pod.
type Decision struct {
	// Pod is the classified pod (it points into State.Pods).
	Pod *corev1.Pod
	// Action is what to do about it.
	Action Action
	// Order is the pod's drain order (meaningless for skipped pods).
	Order int32
	// Reason says why, in a few words: for a skipped pod what exempts it,
	// otherwise which rule or label decided, or "" for the default.
	Reason string
}

// Key names the pod as namespace/name.
func (d Decision) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: d.Pod.Namespace, Name: d.Pod.Name}
}

// Classify decides, without any I/O, what a drain pass does about each pod on
// the node. The first of these that applies decides:
//
//  1. a mirror pod (MirrorPodAnnotation) is skipped;
//  2. a pod controlled by an existing DaemonSet is skipped (its controller
//     tolerates the unschedulable taint and would put it straight back);
//  3. a pod that has completed (phase Succeeded or Failed) is skipped;
//  4. PodDrainLabel=skip skips, a pod matching Policy.SkipSelector is skipped;
//  5. PodDrainLabel=wait-completed waits for completion;
//  6. the first of Policy.Rules that selects the pod decides;
//  7. otherwise the pod is drained at order 0.
//
// A pod not skipped that already has a deletion timestamp is waited for
// (ActionWaitDeleted) instead of evicted again, except on an unreachable node
// where it is skipped once it has been deleting for over a second.
//
// Pods to drain are batched by order: those of the lowest order among all
// pods still present and not skipped are evicted, the others deferred.
// Decisions come back sorted by namespace and name.
func Classify(s State, p Policy) []Decision {
	decisions := make([]Decision, 0, len(s.Pods))
	for i := range s.Pods {
		decisions = append(decisions, classifyPod(&s.Pods[i], s, p))
	}

	// The batch being drained is the lowest order among the pods that still
	// hold the drain up.
	lowest, found := int32(0), false
	for _, d := range decisions {
		if d.Action == ActionSkip {
			continue
		}
		if !found || d.Order < lowest {
			lowest, found = d.Order, true
		}
	}
	for i := range decisions {
		if decisions[i].Action == ActionEvict && decisions[i].Order > lowest {
			decisions[i].Action = ActionDefer
		}
	}

	sort.Slice(decisions, func(i, j int) bool {
		a, b := decisions[i].Pod, decisions[j].Pod
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return decisions
}

func classifyPod(pod *corev1.Pod, s State, p Policy) Decision {
	skip := func(reason string) Decision { return Decision{Pod: pod, Action: ActionSkip, Reason: reason} }

	if _, ok := pod.Annotations[MirrorPodAnnotation]; ok {
		return skip("mirror pod")
	}
	if ref := daemonSetOwner(pod); ref != nil && (s.DaemonSets == nil || s.DaemonSets[ref.UID]) {
		return skip("DaemonSet pod")
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return skip("completed (" + string(pod.Status.Phase) + ")")
	}

	label, hasLabel := pod.Labels[PodDrainLabel]
	if hasLabel && strings.EqualFold(label, PodDrainLabelSkip) {
		return skip("label " + PodDrainLabel + "=" + label)
	}
	if p.SkipSelector != nil && p.SkipSelector.Matches(labels.Set(pod.Labels)) {
		return skip("matches the skip selector")
	}

	behavior, order, reason := BehaviorDrain, int32(0), ""
	// "wait-completed", "waitcompleted" and "WaitCompleted" all wait: only
	// the first hyphen is dropped before comparing, as upstream does.
	if hasLabel && strings.EqualFold(strings.Replace(label, "-", "", 1), string(BehaviorWaitCompleted)) {
		behavior, reason = BehaviorWaitCompleted, "label "+PodDrainLabel+"="+label
	} else if r, ok := firstRule(p.Rules, pod, s.NamespaceLabels); ok {
		behavior, order, reason = r.Behavior, r.Order, "MachineDrainRule "+r.Name
	}

	switch behavior {
	case BehaviorSkip:
		return skip(reason)
	case BehaviorWaitCompleted:
		// Pods that are only waited for belong to the batch of order 0.
		order = 0
	}

	if pod.DeletionTimestamp != nil {
		if s.NodeUnreachable && s.Now.Sub(pod.DeletionTimestamp.Time) > unreachableDeletionGrace {
			return skip("deleting on an unreachable node")
		}
		return Decision{Pod: pod, Action: ActionWaitDeleted, Order: order, Reason: reason}
	}
	if behavior == BehaviorWaitCompleted {
		return Decision{Pod: pod, Action: ActionWaitCompleted, Order: order, Reason: reason}
	}
	return Decision{Pod: pod, Action: ActionEvict, Order: order, Reason: reason}
}

func firstRule(rules []Rule, pod *corev1.Pod, namespaceLabels map[string]map[string]string) (Rule, bool) {
	for _, r := range rules {
		if r.matches(pod, namespaceLabels) {
			return r, true
		}
	}
	return Rule{}, false
}

// daemonSetOwner returns the pod's controller reference when it is an
// apps DaemonSet.
func daemonSetOwner(pod *corev1.Pod) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "DaemonSet" {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != "apps" {
		return nil
	}
	return ref
}
