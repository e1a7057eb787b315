package machineset

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/plan"
)

// updateStatus turns what the reconcile learned into the set's status: the
// selector for the scale subresource, replica counters and conditions.
func (r *Reconciler) updateStatus(s *scope) {
	if s.paused {
		return
	}
	ms := s.ms
	if sel, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector); err == nil && !sel.Empty() {
		ms.Status.Selector = sel.String()
	}
	if s.machinesRead {
		var ready, available, upToDate int32
		for _, m := range s.machines {
			// A Machine being deleted serves no longer, whatever its
			// conditions say until the Machine controller looks again:
			// counting it would let a rollout take one more away.
			going := !m.DeletionTimestamp.IsZero()
			if !going && conditions.IsTrue(m, clusterv1.ReadyCondition) {
				ready++
			}
			if !going && conditions.IsTrue(m, clusterv1.AvailableCondition) {
				available++
			}
			if conditions.IsTrue(m, clusterv1.UpToDateCondition) {
				upToDate++
			}
		}
		ms.Status.Replicas = ptr.To(int32(len(s.machines)))
		ms.Status.ReadyReplicas = ptr.To(ready)
		ms.Status.AvailableReplicas = ptr.To(available)
		ms.Status.UpToDateReplicas = ptr.To(upToDate)
		ms.Status.Versions = plan.CountVersions(s.machines)
	}
	set := func(c metav1.Condition) { conditions.Set(ms, c) }
	if !s.machinesRead {
		reason, msg := clusterv1.InternalErrorReason, "the Machines could not be listed; the controller's log says why"
		if s.clusterMissing {
			reason, msg = clusterv1.ObjectDoesNotExistReason, "Cluster "+ms.Spec.ClusterName+" does not exist"
		}
		for _, t := range []string{clusterv1.ScalingUpCondition, clusterv1.ScalingDownCondition, clusterv1.MachinesReadyCondition,
			clusterv1.MachinesUpToDateCondition, clusterv1.RemediatingCondition} {
			set(metav1.Condition{Type: t, Status: metav1.ConditionUnknown, Reason: reason, Message: msg})
		}
	} else {
		set(scalingUp(s))
		set(scalingDown(s))
		set(aggregate(s.machines, clusterv1.ReadyCondition, clusterv1.MachinesReadyCondition,
			clusterv1.ReadyReason, clusterv1.NotReadyReason, clusterv1.ReadyUnknownReason, "Ready"))
		set(aggregate(s.machines, clusterv1.UpToDateCondition, clusterv1.MachinesUpToDateCondition,
			clusterv1.UpToDateReason, clusterv1.NotUpToDateReason, clusterv1.UpToDateUnknownReason, "up to date"))
		set(remediating(s))
	}
	if ms.DeletionTimestamp.IsZero() {
		set(metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotDeletingReason})
	} else {
		set(metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionTrue, Reason: clusterv1.DeletingReason, Message: s.deleting})
	}
	ms.Status.ObservedGeneration = ms.Generation
}

func desiredReplicas(ms *clusterv1.MachineSet) int {
	if !ms.DeletionTimestamp.IsZero() {
		return 0
	}
	return int(ptr.Deref(ms.Spec.Replicas, 0))
}

func scalingUp(s *scope) metav1.Condition {
	want, have := desiredReplicas(s.ms), len(s.machines)
	var blocked []string
	if s.notCreated != "" {
		blocked = append(blocked, s.notCreated)
	}
	if s.scaleUpErr != nil {
		blocked = append(blocked, s.scaleUpErr.Error())
	}
	if s.repairErr != nil {
		blocked = append(blocked, s.repairErr.Error())
	}
	if have >= want {
		c := metav1.Condition{Type: clusterv1.ScalingUpCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotScalingUpReason}
		if len(blocked) > 0 && s.ms.DeletionTimestamp.IsZero() {
			c.Message = "Scaling up would be blocked: " + strings.Join(blocked, "; ")
		}
		return c
	}
	msg := fmt.Sprintf("Scaling up from %d to %d replicas", have, want)
	if len(blocked) > 0 {
		msg += " is blocked: " + strings.Join(blocked, "; ")
	}
	return metav1.Condition{Type: clusterv1.ScalingUpCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ScalingUpReason, Message: msg}
}

func scalingDown(s *scope) metav1.Condition {
	want, have := desiredReplicas(s.ms), len(s.machines)
	if have > want {
		return metav1.Condition{Type: clusterv1.ScalingDownCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ScalingDownReason,
			Message: fmt.Sprintf("Scaling down from %d to %d replicas", have, want)}
	}
	return metav1.Condition{Type: clusterv1.ScalingDownCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotScalingDownReason}
}

// aggregate summarises one condition of the Machines: False if any Machine
// has it False, Unknown if any has it Unknown or not at all, True otherwise.
// Messages name the Machines rather than repeat theirs, so that the set's
// status changes when a Machine's state does, not with every word of it.
func aggregate(machines []*clusterv1.Machine, machineType, setType, trueReason, falseReason, unknownReason, adjective string) metav1.Condition {
	c := metav1.Condition{Type: setType}
	if len(machines) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, clusterv1.NoReplicasReason
		return c
	}
	var notTrue, unknown []string
	for _, m := range machines {
		got := conditions.Get(m, machineType)
		switch {
		case got == nil || got.Status == metav1.ConditionUnknown:
			unknown = append(unknown, m.Name)
		case got.Status == metav1.ConditionFalse:
			notTrue = append(notTrue, m.Name)
		}
	}
	switch {
	case len(notTrue) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, falseReason
		c.Message = machineList(notTrue) + isAre(len(notTrue)) + " not " + adjective
		if len(unknown) > 0 {
			c.Message += "; " + machineList(unknown) + " report" + verbS(len(unknown)) + " no " + machineType + " condition yet"
		}
	case len(unknown) > 0:
		c.Status, c.Reason = metav1.ConditionUnknown, unknownReason
		c.Message = machineList(unknown) + " report" + verbS(len(unknown)) + " no " + machineType + " condition yet"
	default:
		c.Status, c.Reason = metav1.ConditionTrue, trueReason
	}
	return c
}

func remediating(s *scope) metav1.Condition {
	var asked, sick []string
	for _, m := range s.machines {
		switch {
		case toRemediate(m):
			asked = append(asked, m.Name)
		case unhealthy(m):
			sick = append(sick, m.Name)
		}
	}
	if len(asked) > 0 {
		return metav1.Condition{Type: clusterv1.RemediatingCondition, Status: metav1.ConditionTrue, Reason: clusterv1.RemediatingReason,
			Message: "Remediating " + machineList(asked)}
	}
	c := metav1.Condition{Type: clusterv1.RemediatingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotRemediatingReason}
	if len(sick) > 0 {
		c.Message = machineList(sick) + isAre(len(sick)) + " not healthy (not to be remediated by the MachineSet)"
	}
	return c
}

// machineList names up to three Machines: "Machine a", "Machines a, b, c
// and 2 more".
func machineList(names []string) string {
	sort.Strings(names)
	const shown = 3
	noun := "Machine "
	if len(names) > 1 {
		noun = "Machines "
	}
	if len(names) <= shown {
		return noun + strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s%s and %d more", noun, strings.Join(names[:shown], ", "), len(names)-shown)
}

func isAre(n int) string {
	if n == 1 {
		return " is"
	}
	return " are"
}

func verbS(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}
