package machine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/drain"
	"capstan.dev/capstan/internal/workload"
)

// How often deletion looks again at things that do not send events to the
// management cluster: pods leaving a draining node, volumes detaching.
const (
	drainRetry  = 5 * time.Second
	volumeRetry = 5 * time.Second
)

// defaultNodeDeletionTimeout bounds how long an unreachable workload cluster
// can hold a Machine's deletion at the last step.
const defaultNodeDeletionTimeout = 10 * time.Second

// reconcileDelete runs the deletion sequence; each pass advances as far as it
// can and says in the Deleting condition what it waits for.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	m := s.machine
	if !controllerutil.ContainsFinalizer(m, clusterv1.MachineFinalizer) {
		return ctrl.Result{}, nil
	}
	if hooks := hooksWithPrefix(m, clusterv1.PreDrainDeleteHookAnnotationPrefix); len(hooks) > 0 {
		s.deleting = "waiting for pre-drain hooks to be removed: " + strings.Join(hooks, ", ")
		startOnce(&deletionStatus(m).WaitForPreDrainHookStartTime, s.now)
		return ctrl.Result{}, nil
	}

	workloadClient, skipNode := r.nodeAccess(ctx, s)
	if !skipNode && m.Status.NodeRef.Name != "" {
		if wait, err := r.drainNode(ctx, s, workloadClient); err != nil || wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, err
		}
		if wait, err := r.waitForVolumes(ctx, s); err != nil || wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, err
		}
	}

	if hooks := hooksWithPrefix(m, clusterv1.PreTerminateDeleteHookAnnotationPrefix); len(hooks) > 0 {
		s.deleting = "waiting for pre-terminate hooks to be removed: " + strings.Join(hooks, ", ")
		s.waitingForPreTerminateHooks = true
		startOnce(&deletionStatus(m).WaitForPreTerminateHookStartTime, s.now)
		return ctrl.Result{}, nil
	}

	var remaining []string
	for _, ref := range []clusterv1.ContractVersionedObjectReference{m.Spec.InfrastructureRef, m.Spec.Bootstrap.ConfigRef} {
		if !ref.IsDefined() {
			continue
		}
		gone, err := r.deleteExternal(ctx, s, ref)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !gone {
			remaining = append(remaining, fmt.Sprintf("%s %s", ref.Kind, ref.Name))
		}
	}
	if len(remaining) > 0 {
		s.deleting = "waiting for " + strings.Join(remaining, " and ") + " to be deleted"
		// Provider objects wake the Machine through its owner reference.
		return ctrl.Result{}, nil
	}

	if !skipNode && m.Status.NodeRef.Name != "" {
		if wait, err := r.deleteNode(ctx, s, workloadClient); err != nil || wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, err
		}
	}
	controllerutil.RemoveFinalizer(m, clusterv1.MachineFinalizer)
	r.event(m, corev1.EventTypeNormal, "MachineDeleted", "Delete", "Machine deleted")
	return ctrl.Result{}, nil
}

// nodeAccess decides whether deletion deals with a Node at all: not when
// the Cluster is going (its nodes go with it) or never had a control plane,
// and not when the Machine never got a Node.
func (r *Reconciler) nodeAccess(ctx context.Context, s *scope) (client.Client, bool) {
	c := s.cluster
	if c == nil || !c.DeletionTimestamp.IsZero() || !workload.Reachable(c) || r.Workload == nil {
		return nil, true
	}
	if s.machine.Status.NodeRef.Name == "" {
		return nil, true
	}
	wc, err := r.Workload.GetClient(ctx, client.ObjectKeyFromObject(c))
	if err != nil {
		s.nodeErr = err
		return nil, false
	}
	return wc, false
}

// deletionStatus is the Machine's status.deletion, made when it has none.
func deletionStatus(m *clusterv1.Machine) *clusterv1.MachineDeletionStatus {
	if m.Status.Deletion == nil {
		m.Status.Deletion = &clusterv1.MachineDeletionStatus{}
	}
	return m.Status.Deletion
}

// startOnce records now as the start of a wait, unless the wait already has
// a start: a later pass must not move it.
func startOnce(start *metav1.Time, now time.Time) {
	if start.IsZero() {
		*start = metav1.NewTime(now)
	}
}

func (r *Reconciler) drainNode(ctx context.Context, s *scope, wc client.Client) (time.Duration, error) {
	m := s.machine
	if _, excluded := m.Annotations[clusterv1.ExcludeNodeDrainingAnnotation]; excluded {
		return 0, nil
	}
	startOnce(&deletionStatus(m).NodeDrainStartTime, s.now)
	if drain.TimeoutPassed(m.Status.Deletion.NodeDrainStartTime.Time, s.now, ptr.Deref(m.Spec.Deletion.NodeDrainTimeoutSeconds, 0)) {
		r.event(m, corev1.EventTypeWarning, "DrainTimedOut", "Drain", fmt.Sprintf("gave up draining node %s after nodeDrainTimeoutSeconds", m.Status.NodeRef.Name))
		return 0, nil
	}
	node := m.Status.NodeRef.Name
	if wc == nil {
		s.deleting = fmt.Sprintf("cannot drain node %s: %v", node, s.nodeErr)
		return 15 * time.Second, nil
	}
	if err := drain.Cordon(ctx, wc, node); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		s.deleting = fmt.Sprintf("cordoning node %s: %v", node, err)
		return drainRetry, nil
	}
	reader, err := r.Workload.GetReader(ctx, client.ObjectKeyFromObject(s.cluster))
	if err != nil {
		s.deleting = fmt.Sprintf("cannot drain node %s: %v", node, err)
		return drainRetry, nil
	}
	rules, err := r.drainRules(ctx, s)
	if err != nil {
		// A rule the user must fix holds the drain: evicting without it
		// could move Pods it was written to keep.
		s.deleting = fmt.Sprintf("cannot drain node %s: %v", node, err)
		return drainRetry, nil
	}
	result, err := drain.Drain(ctx, wc, node, drain.Options{Reader: reader, Policy: drain.Policy{Rules: rules}})
	if err != nil {
		s.deleting = fmt.Sprintf("draining node %s: %v", node, err)
		return drainRetry, nil
	}
	if !result.Done() {
		s.deleting = result.Message()
		if details := result.Details(); details != "" {
			s.deleting += "\n" + details
		}
		return drainRetry, nil
	}
	return 0, nil
}

// drainRules reads the MachineDrainRules of the Machine's namespace from the
// cache and keeps those that apply to the Machine and its Cluster. Rules are
// not watched: a Machine being drained comes back every drainRetry anyway,
// and only then does a rule matter.
func (r *Reconciler) drainRules(ctx context.Context, s *scope) ([]drain.Rule, error) {
	list := &clusterv1.MachineDrainRuleList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.machine.Namespace)); err != nil {
		return nil, fmt.Errorf("listing MachineDrainRules: %w", err)
	}
	var clusterLabels map[string]string
	if s.cluster != nil {
		clusterLabels = s.cluster.Labels
	}
	return drain.RulesForMachine(list.Items, s.machine.Labels, clusterLabels)
}

func (r *Reconciler) waitForVolumes(ctx context.Context, s *scope) (time.Duration, error) {
	m := s.machine
	reader, err := r.Workload.GetReader(ctx, client.ObjectKeyFromObject(s.cluster))
	if err != nil {
		s.deleting = fmt.Sprintf("cannot check volumes of node %s: %v", m.Status.NodeRef.Name, err)
		return volumeRetry, nil
	}
	detached, why, err := drain.VolumesDetached(ctx, reader, m.Status.NodeRef.Name)
	if err != nil {
		s.deleting = fmt.Sprintf("checking volumes of node %s: %v", m.Status.NodeRef.Name, err)
		return volumeRetry, nil
	}
	if detached {
		return 0, nil
	}
	startOnce(&deletionStatus(m).WaitForNodeVolumeDetachStartTime, s.now)
	if drain.TimeoutPassed(m.Status.Deletion.WaitForNodeVolumeDetachStartTime.Time, s.now, ptr.Deref(m.Spec.Deletion.NodeVolumeDetachTimeoutSeconds, 0)) {
		return 0, nil
	}
	s.deleting = why
	return volumeRetry, nil
}

// deleteExternal deletes a provider object the Machine references and
// tells whether it is gone.
func (r *Reconciler) deleteExternal(ctx context.Context, s *scope, ref clusterv1.ContractVersionedObjectReference) (bool, error) {
	// Watched, so that the object going wakes the Machine.
	obj, err := r.Resolver.GetWatched(ctx, r.Client, r.externalWatches, ref, s.machine.Namespace)
	if contract.Absent(err) {
		return true, nil // gone, or of a kind no CRD defines: nothing to wait for
	}
	if err != nil {
		s.deleting = fmt.Sprintf("cannot read %s %s: %v", ref.Kind, ref.Name, err)
		return false, err
	}
	if obj.GetDeletionTimestamp().IsZero() {
		if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
	}
	return false, nil
}

func (r *Reconciler) deleteNode(ctx context.Context, s *scope, wc client.Client) (time.Duration, error) {
	m := s.machine
	timeout := defaultNodeDeletionTimeout
	if t := m.Spec.Deletion.NodeDeletionTimeoutSeconds; t != nil {
		timeout = time.Duration(*t) * time.Second
	}
	if wc == nil {
		started := m.DeletionTimestamp.Time
		if timeout > 0 && s.now.Sub(started) > timeout {
			r.event(m, corev1.EventTypeWarning, "NodeNotDeleted", "DeleteNode",
				fmt.Sprintf("could not reach the workload cluster to delete node %s; gave up after nodeDeletionTimeoutSeconds", m.Status.NodeRef.Name))
			return 0, nil
		}
		s.deleting = fmt.Sprintf("cannot delete node %s: %v", m.Status.NodeRef.Name, s.nodeErr)
		return 5 * time.Second, nil
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.Status.NodeRef.Name}}
	if err := wc.Delete(ctx, node); err != nil && !apierrors.IsNotFound(err) {
		s.deleting = fmt.Sprintf("deleting node %s: %v", node.Name, err)
		return 5 * time.Second, nil
	}
	return 0, nil
}

func hooksWithPrefix(m *clusterv1.Machine, prefix string) []string {
	var hooks []string
	for k := range m.Annotations {
		if strings.HasPrefix(k, prefix) {
			hooks = append(hooks, k)
		}
	}
	sort.Strings(hooks)
	return hooks
}

func (r *Reconciler) event(m *clusterv1.Machine, eventType, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(m, nil, eventType, reason, action, "%s", note)
	}
}
