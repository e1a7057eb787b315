package conditions

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestMachineList(t *testing.T) {
	if got := MachineList([]string{"b", "a"}); got != "Machines a, b" {
		t.Error(got)
	}
	if got := MachineList([]string{"e", "d", "c", "b", "a"}); got != "Machines a, b, c and 2 more" {
		t.Error(got)
	}
	if got := MachineList([]string{"a"}); got != "Machine a" {
		t.Error(got)
	}
}

func TestCountMachines(t *testing.T) {
	machine := func(deleting bool, trueTypes ...string) *clusterv1.Machine {
		m := &clusterv1.Machine{}
		if deleting {
			m.DeletionTimestamp = ptr.To(metav1.Now())
		}
		for _, ct := range trueTypes {
			m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: ct, Status: metav1.ConditionTrue, Reason: "R"})
		}
		return m
	}
	all := []string{clusterv1.ReadyCondition, clusterv1.AvailableCondition, clusterv1.UpToDateCondition}
	ready, available, upToDate := CountMachines([]*clusterv1.Machine{
		machine(false, all...),
		machine(false, clusterv1.ReadyCondition),
		machine(true, all...), // going: up to date still, ready and available no longer
		machine(false),
	})
	if ready != 2 || available != 1 || upToDate != 2 {
		t.Errorf("ready %d, available %d, up to date %d; want 2, 1, 2", ready, available, upToDate)
	}
}
