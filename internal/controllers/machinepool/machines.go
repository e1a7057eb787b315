package machinepool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/plan"
)

// poolLabels select a pool's infrastructure machines and Machines.
func poolLabels(mp *clusterv1.MachinePool) client.MatchingLabels {
	return client.MatchingLabels{
		clusterv1.MachinePoolNameLabel: contract.LabelValue(mp.Name),
		clusterv1.ClusterNameLabel:     mp.Spec.ClusterName,
	}
}

// listMachines reads the Machines the pool controls.
func (r *Reconciler) listMachines(ctx context.Context, s *scope) error {
	list := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.mp.Namespace), poolLabels(s.mp)); err != nil {
		s.machinesErr = err
		return err
	}
	s.machines = s.machines[:0]
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], s.mp) {
			s.machines = append(s.machines, &list.Items[i])
		}
	}
	sort.Slice(s.machines, func(i, j int) bool { return s.machines[i].Name < s.machines[j].Name })
	s.machinesRead = true
	return nil
}

// reconcileMachines keeps one Machine per infrastructure machine of a
// provider that makes them (status.infrastructureMachineKind): it creates
// the missing ones, deletes those whose infrastructure machine is gone and
// those a MachineHealthCheck asked to have remediated (the provider
// replaces the instance), and says each is up to date.
func (r *Reconciler) reconcileMachines(ctx context.Context, s *scope) (time.Duration, error) {
	if !s.infraRead || s.infraPool.InfrastructureMachineKind == "" || !s.infra.GetDeletionTimestamp().IsZero() {
		return 0, nil
	}
	mp := s.mp
	gvk := s.infra.GroupVersionKind().GroupVersion().WithKind(s.infraPool.InfrastructureMachineKind)
	if err := r.machineWatches.Watch(gvk); err != nil {
		s.machinesErr = fmt.Errorf("watching %s: %w", gvk.Kind, err)
		return 0, s.machinesErr
	}
	infra := &unstructured.UnstructuredList{}
	infra.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.Client.List(ctx, infra, client.InNamespace(mp.Namespace), poolLabels(mp)); err != nil {
		s.machinesErr = fmt.Errorf("listing the pool's %s objects: %w", gvk.Kind, err)
		return 0, s.machinesErr
	}
	if err := r.listMachines(ctx, s); err != nil {
		return 0, err
	}

	names := make([]string, 0, len(infra.Items))
	byName := map[string]*unstructured.Unstructured{}
	for i := range infra.Items {
		names = append(names, infra.Items[i].GetName())
		byName[infra.Items[i].GetName()] = &infra.Items[i]
	}
	have := make([]plan.PoolMachine, 0, len(s.machines))
	for _, m := range s.machines {
		have = append(have, plan.PoolMachine{Name: m.Name, InfraMachine: m.Spec.InfrastructureRef.Name, Deleting: !m.DeletionTimestamp.IsZero()})
	}
	create, orphaned := plan.PoolMachines(names, have)

	var errs []error
	for _, name := range create {
		im := byName[name]
		if !im.GetDeletionTimestamp().IsZero() {
			continue // an instance on its way out needs no Machine
		}
		m := desiredMachine(mp, im)
		if err := r.Client.Create(ctx, m, client.FieldOwner(FieldManager)); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				errs = append(errs, fmt.Errorf("creating Machine %s for %s %s: %w", m.Name, gvk.Kind, name, err))
			}
			continue
		}
		r.event(mp, m, "Normal", "SuccessfulCreate", "Create", "Created Machine %s for %s %s", m.Name, gvk.Kind, name)
		s.machines = append(s.machines, m)
	}
	gone := map[string]string{}
	for _, name := range orphaned {
		gone[name] = "its " + gvk.Kind + " no longer exists"
	}
	for _, m := range s.machines {
		if m.DeletionTimestamp.IsZero() && isFalse(m, clusterv1.OwnerRemediatedCondition) {
			gone[m.Name] = "a MachineHealthCheck asked for its remediation"
		}
	}
	for _, m := range s.machines {
		why, ok := gone[m.Name]
		if !ok || !m.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting Machine %s: %w", m.Name, err))
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleted a pool Machine", "Machine", m.Name, "reason", why)
		r.event(mp, m, "Normal", "SuccessfulDelete", "Delete", "Deleted Machine %s: %s", m.Name, why)
		m.DeletionTimestamp = ptr.To(metav1.NewTime(s.now))
	}
	for _, m := range s.machines {
		if m.UID == "" {
			continue // just created; its own event brings us back
		}
		if err := conditions.ApplyPaced(ctx, r.Client, r.pacer, m, clusterv1.GroupVersion.WithKind(clusterv1.MachineKind),
			upToDate(mp, m), FieldManager, s.now); err != nil {
			errs = append(errs, fmt.Errorf("setting UpToDate on Machine %s: %w", m.Name, err))
		}
	}
	return 0, errors.Join(errs...)
}

// desiredMachine is the Machine that stands for infrastructure machine im
// of pool mp: named after it, controlled by the pool, with the template's
// labels and annotations, the pool's bootstrap data (shared by all its
// instances) and version.
func desiredMachine(mp *clusterv1.MachinePool, im *unstructured.Unstructured) *clusterv1.Machine {
	labels := maps.Clone(mp.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[clusterv1.MachinePoolNameLabel] = contract.LabelValue(mp.Name)
	labels[clusterv1.ClusterNameLabel] = mp.Spec.ClusterName
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name:            im.GetName(),
			Namespace:       mp.Namespace,
			Labels:          labels,
			Annotations:     maps.Clone(mp.Spec.Template.Annotations),
			OwnerReferences: []metav1.OwnerReference{poolOwner(mp)},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName: mp.Spec.ClusterName,
			// The pool's instances boot from its one data secret; naming it
			// tells the Machine its bootstrap is done.
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(ptr.Deref(mp.Spec.Template.Spec.Bootstrap.DataSecretName, ""))},
			InfrastructureRef: contract.ReferenceTo(im),
			Version:           mp.Spec.Template.Spec.Version,
			MinReadySeconds:   mp.Spec.Template.Spec.MinReadySeconds,
			ReadinessGates:    mp.Spec.Template.Spec.ReadinessGates,
			Deletion:          mp.Spec.Template.Spec.Deletion,
		},
	}
}

// upToDate is a pool Machine's UpToDate condition. The provider decides
// which instances to replace and replaces them itself; a Machine is up to
// date until it is on its way out (as upstream has it) or, so that a
// version rollout shows, while it runs the pool's version.
func upToDate(mp *clusterv1.MachinePool, m *clusterv1.Machine) metav1.Condition {
	if !m.DeletionTimestamp.IsZero() {
		return metav1.Condition{Type: clusterv1.UpToDateCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotUpToDateReason, Message: "Machine is being deleted"}
	}
	if want := mp.Spec.Template.Spec.Version; want != "" && m.Spec.Version != "" && m.Spec.Version != want {
		return metav1.Condition{Type: clusterv1.UpToDateCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotUpToDateReason,
			Message: fmt.Sprintf("* Version %s, %s required", m.Spec.Version, want)}
	}
	return metav1.Condition{Type: clusterv1.UpToDateCondition, Status: metav1.ConditionTrue, Reason: clusterv1.UpToDateReason}
}

func isFalse(m *clusterv1.Machine, t string) bool {
	c := conditions.Get(m, t)
	return c != nil && c.Status == metav1.ConditionFalse
}
