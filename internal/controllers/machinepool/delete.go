package machinepool

import (
	"context"
	"fmt"
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
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/drain"
	"capstan.dev/capstan/internal/workload"
)

// drainRetry is how soon a drain that is not done yet is looked at again:
// evictions and Pod deletions in the workload cluster send the pool no
// event.
const drainRetry = 5 * time.Second

// reconcileDelete takes a MachinePool apart in order: its Machines (the
// Machine controller drains their Nodes and deletes their infrastructure
// machines), or without Machines the Nodes drained here; then the
// infrastructure pool and bootstrap config; then the Nodes still in the
// workload cluster. The finalizer goes last.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	mp := s.mp
	if !controllerutil.ContainsFinalizer(mp, clusterv1.MachinePoolFinalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.listMachines(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if len(s.machines) > 0 {
		names := make([]string, 0, len(s.machines))
		for _, m := range s.machines {
			names = append(names, m.Name)
			if !m.DeletionTimestamp.IsZero() {
				continue
			}
			if err := r.Client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("deleting Machine %s: %w", m.Name, err)
			}
			r.event(mp, m, "Normal", "SuccessfulDelete", "Delete", "Deleted Machine %s: the MachinePool is being deleted", m.Name)
		}
		// Their deletions wake the pool through the Machine watch.
		s.deleting = "Waiting for " + conditions.MachineList(names) + " to be deleted"
		return ctrl.Result{}, nil
	}

	wc := r.nodeAccess(ctx, s)
	if wc != nil {
		// Nodes of Machines were drained and deleted with them: the
		// cordon finds none of them.
		if wait := r.drainNodes(ctx, s, wc); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}

	waiting, err := r.deleteExternal(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(waiting) > 0 {
		// Their deletion wakes the pool through the watch on what it
		// controls.
		s.deleting = "Waiting for " + strings.Join(waiting, " and ") + " to be deleted"
		return ctrl.Result{}, nil
	}

	if wc != nil && !nodeDeletionTimedOut(mp, s.now) {
		for _, ref := range mp.Status.NodeRefs {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ref.Name}}
			if err := wc.Delete(ctx, node); err != nil && !apierrors.IsNotFound(err) {
				s.deleting = fmt.Sprintf("deleting Node %s: %v", ref.Name, err)
				return ctrl.Result{RequeueAfter: workload.RetryAfter(err)}, nil
			}
		}
	}
	controllerutil.RemoveFinalizer(mp, clusterv1.MachinePoolFinalizer)
	s.deleting = "Deletion completed"
	return ctrl.Result{}, nil
}

// nodeAccess is a client of the workload cluster when the pool's Nodes are
// to be drained and deleted there: not when the whole Cluster goes (its
// Nodes go with it) nor when it cannot be reached yet.
func (r *Reconciler) nodeAccess(ctx context.Context, s *scope) client.Client {
	c := s.cluster
	if c == nil || !c.DeletionTimestamp.IsZero() || !workload.Reachable(c) || r.Workload == nil || len(s.mp.Status.NodeRefs) == 0 {
		return nil
	}
	wc, err := r.Workload.GetClient(ctx, client.ObjectKeyFromObject(c))
	if err != nil {
		s.nodesErr = err
		return nil
	}
	return wc
}

// drainNodes cordons and drains the pool's Nodes, as the Machine controller
// drains a Machine's, until done or spec.template.spec.deletion
// .nodeDrainTimeoutSeconds (counted from the pool's deletion) has passed. It
// returns how soon to look again, 0 when done.
func (r *Reconciler) drainNodes(ctx context.Context, s *scope, wc client.Client) time.Duration {
	mp := s.mp
	if _, excluded := mp.Spec.Template.Annotations[clusterv1.ExcludeNodeDrainingAnnotation]; excluded {
		return 0
	}
	if drain.TimeoutPassed(mp.DeletionTimestamp.Time, s.now, ptr.Deref(mp.Spec.Template.Spec.Deletion.NodeDrainTimeoutSeconds, 0)) {
		return 0
	}
	reader, err := r.Workload.GetReader(ctx, client.ObjectKeyFromObject(s.cluster))
	if err != nil {
		s.deleting = fmt.Sprintf("cannot drain the pool's Nodes: %v", err)
		return workload.RetryAfter(err)
	}
	var pending []string
	for _, ref := range mp.Status.NodeRefs {
		if err := drain.Cordon(ctx, wc, ref.Name); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			pending = append(pending, fmt.Sprintf("cordoning Node %s: %v", ref.Name, err))
			continue
		}
		result, err := drain.Drain(ctx, wc, ref.Name, drain.Options{Reader: reader})
		switch {
		case err != nil:
			pending = append(pending, fmt.Sprintf("draining Node %s: %v", ref.Name, err))
		case !result.Done():
			pending = append(pending, "Node "+ref.Name+": "+result.Message())
		}
	}
	if len(pending) == 0 {
		return 0
	}
	s.deleting = strings.Join(pending, "; ")
	return drainRetry
}

// nodeDeletionTimedOut tells whether spec.template.spec.deletion
// .nodeDeletionTimeoutSeconds (unset or 0: no limit) has passed since the
// pool's deletion, after which its Nodes are left to the workload cluster.
func nodeDeletionTimedOut(mp *clusterv1.MachinePool, now time.Time) bool {
	seconds := ptr.Deref(mp.Spec.Template.Spec.Deletion.NodeDeletionTimeoutSeconds, 0)
	return seconds > 0 && now.After(mp.DeletionTimestamp.Add(time.Duration(seconds)*time.Second))
}

// deleteExternal deletes the infrastructure pool and the bootstrap config
// and names those that still exist.
func (r *Reconciler) deleteExternal(ctx context.Context, s *scope) ([]string, error) {
	mp := s.mp
	var waiting []string
	for _, ref := range []clusterv1.ContractVersionedObjectReference{mp.Spec.Template.Spec.InfrastructureRef, mp.Spec.Template.Spec.Bootstrap.ConfigRef} {
		if !ref.IsDefined() {
			continue
		}
		obj, err := r.Resolver.GetWatched(ctx, r.Client, r.externalWatches, ref, mp.Namespace)
		if contract.Absent(err) {
			continue // nothing of a kind no CRD defines can exist
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", ref.Kind, ref.Name, err)
		}
		waiting = append(waiting, ref.Kind+" "+ref.Name)
		if !obj.GetDeletionTimestamp().IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleting %s %s: %w", ref.Kind, ref.Name, err)
		}
	}
	return waiting, nil
}
