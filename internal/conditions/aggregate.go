package conditions

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// AggregateMachines summarises one condition of an owner's Machines as
// the owner's condition ownerType: False if any Machine
// has it False, Unknown if any has it Unknown or not at all, True otherwise.
// Messages name the Machines rather than repeat theirs, so that the owner's
// status changes when a Machine's state does, not with every word of it.
func AggregateMachines(machines []*clusterv1.Machine, machineType, ownerType, trueReason, falseReason, unknownReason, adjective string) metav1.Condition {
	c := metav1.Condition{Type: ownerType}
	if len(machines) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, clusterv1.NoReplicasReason
		return c
	}
	var notTrue, unknown []string
	for _, m := range machines {
		got := Get(m, machineType)
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
		c.Message = MachineList(notTrue) + IsAre(len(notTrue)) + " not " + adjective
		if len(unknown) > 0 {
			c.Message += "; " + MachineList(unknown) + " report" + verbS(len(unknown)) + " no " + machineType + " condition yet"
		}
	case len(unknown) > 0:
		c.Status, c.Reason = metav1.ConditionUnknown, unknownReason
		c.Message = MachineList(unknown) + " report" + verbS(len(unknown)) + " no " + machineType + " condition yet"
	default:
		c.Status, c.Reason = metav1.ConditionTrue, trueReason
	}
	return c
}

// CountMachines counts an owner's Machines that are Ready, Available and
// UpToDate. A Machine being deleted serves no longer, whatever its
// conditions say until the Machine controller looks again, so it is never
// counted ready or available: counting it would let a rollout take one more
// away.
func CountMachines(machines []*clusterv1.Machine) (ready, available, upToDate int32) {
	for _, m := range machines {
		going := !m.DeletionTimestamp.IsZero()
		if !going && IsTrue(m, clusterv1.ReadyCondition) {
			ready++
		}
		if !going && IsTrue(m, clusterv1.AvailableCondition) {
			available++
		}
		if IsTrue(m, clusterv1.UpToDateCondition) {
			upToDate++
		}
	}
	return ready, available, upToDate
}

// MachineList names up to three Machines: "Machine a", "Machines a, b, c
// and 2 more".
func MachineList(names []string) string {
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

// IsAre is the verb that goes with n names.
func IsAre(n int) string {
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
