package drain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// PodNodeNameField is the field a drain lists pods by. An uncached client
// passes it to the API server as a field selector; a controller-runtime
// cache answers it only with an index of that name (see IndexPodsByNode).
const PodNodeNameField = "spec.nodeName"

// unreachableGracePeriodSeconds is the termination grace an eviction asks for
// on an unreachable node, where nobody runs the pod's shutdown anyway.
const unreachableGracePeriodSeconds = 1

// Options configure Drain.
type Options struct {
	// Policy says which pods to leave alone and in which order to evict.
	Policy

	// Reader, when set, serves Drain's reads (the node, its pods, their
	// DaemonSets and namespaces, PodDisruptionBudgets) instead of the
	// client. It must answer a pod list by PodNodeNameField: an uncached
	// reader, or a cache with IndexPodsByNode registered. A cache may lag;
	// that costs at worst a pass that waits for a pod already gone, or an
	// eviction answered 404, never the eviction of a pod that replaced one
	// the cache still shows (evictions carry the listed pod's UID).
	Reader client.Reader
}

// IndexPodsByNode registers, on a controller-runtime cache, the pod index
// that lets the cache answer Drain's list of the pods bound to a node.
func IndexPodsByNode(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Pod{}, PodNodeNameField, func(o client.Object) []string {
		if pod, ok := o.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			return []string{pod.Spec.NodeName}
		}
		return nil
	})
}

// Drain makes one non-blocking pass at draining a node: it lists the pods
// bound to the node, classifies them (see Classify), asks the eviction API to
// evict each pod of the current batch, and reports what it did and what is
// left. It never waits: call it again (every 20 s or so, and on pod events)
// until Result.Done, and give up when the caller's drain timeout passes (see
// TimeoutPassed).
//
// A refused or failed eviction is reported in Result.Blocked, not as an
// error; the error is for a pass that could not see what is on the node. A
// node that does not exist is reported as drained (Result.NodeNotFound).
//
// The node should be cordoned first (Cordon), or evicted pods may be
// scheduled straight back onto it.
func Drain(ctx context.Context, c client.Client, nodeName string, opts Options) (Result, error) {
	r := opts.Reader
	if r == nil {
		r = c
	}
	res := Result{Node: nodeName}

	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			res.NodeNotFound = true
			return res, nil
		}
		return res, fmt.Errorf("reading node %s: %w", nodeName, err)
	}

	state, err := observe(ctx, r, node, opts.Policy)
	if err != nil {
		return res, err
	}

	budgets := map[string][]policyv1.PodDisruptionBudget{}
	logger := log.FromContext(ctx).WithValues("node", nodeName)
	for _, d := range Classify(state, opts.Policy) {
		key := d.Key()
		switch d.Action {
		case ActionSkip:
			res.Skipped = append(res.Skipped, Skipped{Pod: key, Reason: d.Reason})
		case ActionDefer:
			res.Deferred = append(res.Deferred, key)
			why := fmt.Sprintf("order %d", d.Order)
			if d.Reason != "" {
				why += ", " + d.Reason
			}
			res.explain(key, why)
		case ActionWaitCompleted:
			res.WaitingCompletion = append(res.WaitingCompletion, key)
			res.explain(key, d.Reason)
		case ActionWaitDeleted:
			res.Terminating = append(res.Terminating, key)
		case ActionEvict:
			pdbs, ok := budgets[key.Namespace]
			if !ok {
				pdbs = listBudgets(ctx, r, key.Namespace)
				budgets[key.Namespace] = pdbs
			}
			if b := unprocessedBudget(d.Pod, pdbs); b != nil {
				res.Blocked = append(res.Blocked, Blocked{
					Pod: key, Budget: b.Name, ByBudget: true,
					Message: fmt.Sprintf("PodDisruptionBudget %s has not been processed by the disruption controller yet (is kube-controller-manager running?)", b.Name),
				})
				continue
			}
			gone, blocked := evict(ctx, c, d.Pod, state.NodeUnreachable)
			switch {
			case blocked != nil:
				logger.V(4).Info("Eviction refused", "pod", key.String(), "reason", blocked.Message)
				res.Blocked = append(res.Blocked, *blocked)
			case gone:
				logger.V(4).Info("Pod already gone", "pod", key.String())
			default:
				logger.V(4).Info("Pod evicted", "pod", key.String())
				res.Evicted = append(res.Evicted, key)
			}
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// observe gathers the State Classify needs.
func observe(ctx context.Context, r client.Reader, node *corev1.Node, p Policy) (State, error) {
	state := State{NodeUnreachable: NodeUnreachable(node), Now: time.Now()}

	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.MatchingFields{PodNodeNameField: node.Name}); err != nil {
		return state, fmt.Errorf("listing pods on node %s: %w", node.Name, err)
	}
	state.Pods = pods.Items

	// Only a DaemonSet that still exists keeps its pods from being evicted.
	state.DaemonSets = map[types.UID]bool{}
	checked := map[types.UID]bool{}
	for i := range state.Pods {
		pod := &state.Pods[i]
		ref := daemonSetOwner(pod)
		if ref == nil || checked[ref.UID] {
			continue
		}
		checked[ref.UID] = true
		ds := &appsv1.DaemonSet{}
		err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, ds)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return state, fmt.Errorf("reading DaemonSet %s/%s of pod %s: %w", pod.Namespace, ref.Name, pod.Name, err)
		case ds.UID == ref.UID:
			state.DaemonSets[ref.UID] = true
		}
	}

	if p.needsNamespaceLabels() {
		state.NamespaceLabels = map[string]map[string]string{}
		for i := range state.Pods {
			name := state.Pods[i].Namespace
			if _, done := state.NamespaceLabels[name]; done {
				continue
			}
			ns := &corev1.Namespace{}
			if err := r.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil && !apierrors.IsNotFound(err) {
				return state, fmt.Errorf("reading namespace %s: %w", name, err)
			}
			state.NamespaceLabels[name] = ns.Labels
		}
	}
	return state, nil
}

// listBudgets returns a namespace's PodDisruptionBudgets, or none when they
// cannot be read: they only serve to spare the eviction API a request it
// would answer by making the client sleep, and the eviction API decides.
func listBudgets(ctx context.Context, r client.Reader, namespace string) []policyv1.PodDisruptionBudget {
	list := &policyv1.PodDisruptionBudgetList{}
	if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
		log.FromContext(ctx).V(4).Info("Cannot list PodDisruptionBudgets; leaving them to the eviction API", "namespace", namespace, "error", err.Error())
		return nil
	}
	return list.Items
}

// unprocessedBudget returns the PodDisruptionBudget that guards the pod when
// the disruption controller has not yet processed its current generation and
// the eviction API would therefore consult it. The API server answers such an
// eviction with 429 and Retry-After, which client-go obeys by sleeping and
// retrying up to ten times: the pass would block for minutes, and for ever
// in a workload cluster whose controller-manager is down. The checks mirror
// the API server's: several matching budgets are its error to report, and
// pods it deletes without consulting a budget are not held back here.
func unprocessedBudget(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) *policyv1.PodDisruptionBudget {
	switch pod.Status.Phase {
	case corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed:
		return nil
	}
	if pod.DeletionTimestamp != nil {
		return nil
	}
	var match *policyv1.PodDisruptionBudget
	for i := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdbs[i].Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if match != nil {
			return nil
		}
		match = &pdbs[i]
	}
	if match == nil || match.Status.ObservedGeneration >= match.Generation {
		return nil
	}
	if !podReady(pod) {
		if p := match.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
			return nil
		}
		if match.Status.CurrentHealthy >= match.Status.DesiredHealthy && match.Status.DesiredHealthy > 0 {
			return nil
		}
	}
	return match
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// evict asks the eviction API to evict one pod. gone reports that the pod no
// longer exists; blocked, that the eviction was refused or failed.
func evict(ctx context.Context, c client.Client, pod *corev1.Pod, unreachable bool) (gone bool, blocked *Blocked) {
	uid := pod.UID
	eviction := &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		// The UID precondition keeps a stale listing from evicting a pod
		// that has since replaced the one listed under the same name.
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	}
	if unreachable {
		grace := int64(unreachableGracePeriodSeconds)
		eviction.DeleteOptions.GracePeriodSeconds = &grace
	}
	err := c.SubResource("eviction").Create(ctx, pod, eviction)
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsTooManyRequests(err):
		b := &Blocked{Pod: key, Message: err.Error()}
		if cause, ok := budgetCause(err); ok {
			b.ByBudget = true
			b.Message = cause
			b.Budget = budgetName(cause)
		}
		return false, b
	default:
		return false, &Blocked{Pod: key, Message: err.Error()}
	}
}

// budgetCause returns the message of the DisruptionBudget cause the API
// server attaches when a PodDisruptionBudget refuses an eviction.
func budgetCause(err error) (string, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return "", false
	}
	details := status.Status().Details
	if details == nil {
		return "", false
	}
	for _, c := range details.Causes {
		if c.Type == policyv1.DisruptionBudgetCause {
			return c.Message, true
		}
	}
	return "", false
}

// budgetName picks the budget's name out of the API server's cause message,
// which reads "The disruption budget <name> ...".
func budgetName(cause string) string {
	const prefix = "The disruption budget "
	if !strings.HasPrefix(cause, prefix) {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(cause, prefix), " ")
	return name
}
