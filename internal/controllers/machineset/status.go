package machineset

import (
	"fmt"
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
		ready, available, upToDate := conditions.CountMachines(s.machines)
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
		set(conditions.AggregateMachines(s.machines, clusterv1.ReadyCondition, clusterv1.MachinesReadyCondition,
			clusterv1.ReadyReason, clusterv1.NotReadyReason, clusterv1.ReadyUnknownReason, "Ready"))
		set(conditions.AggregateMachines(s.machines, clusterv1.UpToDateCondition, clusterv1.MachinesUpToDateCondition,
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
			Message: "Remediating " + conditions.MachineList(asked)}
	}
	c := metav1.Condition{Type: clusterv1.RemediatingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotRemediatingReason}
	if len(sick) > 0 {
		c.Message = conditions.MachineList(sick) + conditions.IsAre(len(sick)) + " not healthy (not to be remediated by the MachineSet)"
	}
	return c
}
