package machinedeployment

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/plan"
)

// maxNameAttempts bounds the names tried for a new MachineSet when the
// first ones are taken by other sets.
const maxNameAttempts = 5

// rolloutInput turns the sets into what the planner decides from. While the
// rollout is paused the plan is made as for OnDelete, around the set that
// takes new replicas: replicas still follow spec.replicas, but no old
// Machine is replaced.
func rolloutInput(s *scope) plan.RolloutInput {
	md := s.md
	in := plan.RolloutInput{
		Replicas: ptr.Deref(md.Spec.Replicas, 0),
		Strategy: plan.RolloutStrategy{
			Type:           plan.StrategyType(md.Spec.Rollout.Strategy.Type),
			MaxSurge:       md.Spec.Rollout.Strategy.RollingUpdate.MaxSurge,
			MaxUnavailable: md.Spec.Rollout.Strategy.RollingUpdate.MaxUnavailable,
		},
	}
	if rolloutPaused(md) {
		in.Strategy = plan.RolloutStrategy{Type: plan.OnDelete}
	}
	for _, ms := range s.sets {
		machines := s.machines[ms.Name]
		st := plan.MachineSetState{
			Name:     ms.Name,
			Created:  ms.CreationTimestamp.Time,
			UpToDate: ms == s.scaled,
			Replicas: ptr.Deref(ms.Spec.Replicas, 1),
			// The set's status may lag behind Machines the cache already
			// shows; the larger count keeps the surge limit safe.
			Machines:  max(ptr.Deref(ms.Status.Replicas, 0), int32(len(machines))),
			Available: ptr.Deref(ms.Status.AvailableReplicas, 0),
		}
		for _, m := range machines {
			if !m.DeletionTimestamp.IsZero() {
				st.Deleting++
			}
		}
		if !ms.DeletionTimestamp.IsZero() {
			// Everything a set being deleted holds is going.
			st.Deleting = st.Machines
		}
		in.MachineSets = append(in.MachineSets, st)
	}
	return in
}

// rollout plans the next step and applies it: scale-downs first, then
// scale-ups, then the new MachineSet if one is needed. Sets whose replicas
// stay get only what syncSet puts on them, and no request when that is
// already there.
func (r *Reconciler) rollout(ctx context.Context, s *scope) error {
	md := s.md
	p, err := plan.PlanRollout(rolloutInput(s))
	if err != nil {
		s.planErr = err
		r.event(md, "Warning", "RolloutBlocked", "Plan", err.Error())
	} else {
		s.plan = &p
	}

	// Revisions: the up-to-date set has the highest; one that comes back
	// (a rollback) is given the next number.
	next, bump := plan.Revisions(s.sets, s.current)

	targets := map[string]plan.MachineSetTarget{}
	var order []string
	if s.plan != nil {
		for _, t := range s.plan.Changes() {
			targets[t.Name] = t
			order = append(order, t.Name)
		}
	}
	for _, ms := range s.sets {
		if !slices.Contains(order, ms.Name) {
			order = append(order, ms.Name)
		}
	}
	for _, name := range order {
		i := slices.IndexFunc(s.sets, func(ms *clusterv1.MachineSet) bool { return ms.Name == name })
		ms := s.sets[i]
		if !ms.DeletionTimestamp.IsZero() {
			continue
		}
		updated := ms.DeepCopy()
		helper, err := patch.NewHelper(updated, r.Client)
		if err != nil {
			return err
		}
		t, scale := targets[name]
		if scale {
			updated.Spec.Replicas = ptr.To(t.To)
			r.annotateReplicas(s, updated)
		}
		syncSet(md, updated, ms == s.current, ms == s.scaled)
		if ms == s.current && bump > 0 {
			setAnnotation(updated, clusterv1.RevisionAnnotation, strconv.FormatInt(bump, 10))
		}
		if err := helper.Patch(ctx, updated); err != nil {
			return fmt.Errorf("updating MachineSet %s: %w", name, err)
		}
		s.sets[i] = updated
		if s.current == ms {
			s.current = updated
		}
		if s.scaled == ms {
			s.scaled = updated
		}
		if scale {
			r.event(md, "Normal", "SuccessfulScale", "Scale",
				fmt.Sprintf("Scaled MachineSet %s from %d to %d replicas: %s", name, t.From, t.To, t.Reason))
		}
	}

	if s.plan != nil && s.plan.Create != nil && !rolloutPaused(md) {
		if err := r.createMachineSet(ctx, s, s.plan.Create, next); err != nil {
			return err
		}
	}

	switch {
	case s.current != nil:
		setAnnotation(md, clusterv1.RevisionAnnotation, s.current.Annotations[clusterv1.RevisionAnnotation])
	case s.created != nil:
		setAnnotation(md, clusterv1.RevisionAnnotation, s.created.Annotations[clusterv1.RevisionAnnotation])
	}
	return nil
}

// annotateReplicas records on a set the MachineDeployment's replicas and
// replicas plus maxSurge, as Cluster API does, whenever its replicas change.
func (r *Reconciler) annotateReplicas(s *scope, ms *clusterv1.MachineSet) {
	desired := ptr.Deref(s.md.Spec.Replicas, 0)
	setAnnotation(ms, clusterv1.DesiredReplicasAnnotation, strconv.Itoa(int(desired)))
	surge := int32(0)
	if s.plan != nil {
		surge = s.plan.MaxSurge
	}
	setAnnotation(ms, clusterv1.MaxReplicasAnnotation, strconv.Itoa(int(desired+surge)))
}

func setAnnotation(obj interface {
	GetAnnotations() map[string]string
	SetAnnotations(map[string]string)
}, key, value string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
}

// createMachineSet makes the MachineSet for the MachineDeployment's
// template. Its name comes from the template's hash, so a reconcile that
// runs again before the cache shows the set finds the name taken instead of
// making a second set.
func (r *Reconciler) createMachineSet(ctx context.Context, s *scope, want *plan.NewMachineSet, revision int64) error {
	md := s.md
	// Names are unique in the namespace, across clusters.
	inNamespace := &clusterv1.MachineSetList{}
	if err := r.Client.List(ctx, inNamespace, client.InNamespace(md.Namespace)); err != nil {
		return err
	}
	taken := map[string]bool{}
	for i := range inNamespace.Items {
		taken[inNamespace.Items[i].Name] = true
	}
	var name, hash string
	for salt := 0; salt < maxNameAttempts; salt++ {
		hash = templateHash(&md.Spec.Template, salt)
		if name = setName(md, hash); !taken[name] {
			break
		}
		name = ""
	}
	if name == "" {
		return fmt.Errorf("every name tried for a new MachineSet of %s is taken by another MachineSet", md.Name)
	}
	ms := newMachineSet(md, name, hash, want.Replicas, ptr.Deref(md.Spec.Replicas, 0)+s.plan.MaxSurge, revision)
	if err := r.Client.Create(ctx, ms); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Made by an earlier reconcile whose result the cache does not
			// show yet; its creation event brings the next reconcile.
			return nil
		}
		return fmt.Errorf("creating MachineSet %s: %w", name, err)
	}
	s.created = ms
	r.event(md, "Normal", "SuccessfulCreate", "Create",
		fmt.Sprintf("Created MachineSet %s (revision %d) with %d replicas: %s", name, revision, want.Replicas, want.Reason))
	return nil
}

// revisionHistoryLimit is how many old, empty sets are kept.
func (r *Reconciler) revisionHistoryLimit() int {
	if r.RevisionHistoryLimit != nil && *r.RevisionHistoryLimit >= 0 {
		return int(*r.RevisionHistoryLimit)
	}
	return plan.DefaultRevisionHistoryLimit
}

// cleanupHistory deletes old MachineSets that hold no Machines and have no
// replicas, beyond the newest few kept for rollbacks.
func (r *Reconciler) cleanupHistory(ctx context.Context, s *scope) error {
	var empty []*clusterv1.MachineSet
	for _, ms := range s.sets {
		if ms == s.current || ms == s.scaled || !ms.DeletionTimestamp.IsZero() {
			continue
		}
		if ptr.Deref(ms.Spec.Replicas, 1) != 0 || ptr.Deref(ms.Status.Replicas, 0) != 0 || len(s.machines[ms.Name]) != 0 {
			continue
		}
		empty = append(empty, ms)
	}
	limit := r.revisionHistoryLimit()
	if len(empty) <= limit {
		return nil
	}
	slices.SortFunc(empty, func(a, b *clusterv1.MachineSet) int {
		if newer(a, b) {
			return -1
		}
		if newer(b, a) {
			return 1
		}
		return 0
	})
	for _, ms := range empty[limit:] {
		err := r.Client.Delete(ctx, ms, client.Preconditions{UID: &ms.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting old MachineSet %s: %w", ms.Name, err)
		}
		if err == nil {
			r.event(s.md, "Normal", "SuccessfulDelete", "Delete",
				fmt.Sprintf("Deleted MachineSet %s (revision %d): only %d old revisions are kept", ms.Name, plan.Revision(ms), limit))
		}
	}
	return nil
}

// maxUnavailable is the rollout's maxUnavailable in Machines; 0 for
// OnDelete, whose rollouts never take a Machine away on their own.
func maxUnavailable(md *clusterv1.MachineDeployment) int32 {
	if s := &md.Spec.Rollout.Strategy; s.Type == clusterv1.OnDeleteMachineDeploymentStrategyType || s.RollingUpdate.MaxUnavailable == nil {
		return 0
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(md.Spec.Rollout.Strategy.RollingUpdate.MaxUnavailable, int(ptr.Deref(md.Spec.Replicas, 0)), false)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

func (r *Reconciler) event(md *clusterv1.MachineDeployment, eventType, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(md, nil, eventType, reason, action, "%s", note)
	}
}
