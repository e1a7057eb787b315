package qemu

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
)

func TestBootstrappingControlPlane(t *testing.T) {
	running := controlPlaneVM{Name: "cp-a", Started: true, Running: true}
	for _, c := range []struct {
		name string
		cps  []controlPlaneVM
		want string
	}{
		{"no control plane yet", nil, ""},
		{"one still bootstrapping", []controlPlaneVM{running}, "cp-a"},
		{"reported Unknown: still bootstrapping", []controlPlaneVM{{Name: "cp-a", Started: true, Running: true, Bootstrap: metav1.ConditionUnknown}}, "cp-a"},
		{"bootstrap succeeded", []controlPlaneVM{{Name: "cp-a", Started: true, Running: true, Bootstrap: metav1.ConditionTrue}}, ""},
		{"bootstrap failed: waiting would be forever", []controlPlaneVM{{Name: "cp-a", Started: true, Running: true, Bootstrap: metav1.ConditionFalse}}, ""},
		{"VM not started yet", []controlPlaneVM{{Name: "cp-a"}}, ""},
		{"VM gone", []controlPlaneVM{{Name: "cp-a", Started: true}}, ""},
		{"the second of two", []controlPlaneVM{{Name: "cp-a", Started: true, Running: true, Bootstrap: metav1.ConditionTrue}, {Name: "cp-b", Started: true, Running: true}}, "cp-b"},
	} {
		if got := bootstrappingControlPlane(c.cps); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestWaitingWorkers(t *testing.T) {
	machine := func(name, reason string) qemuv1.QEMUMachine {
		m := qemuv1.QEMUMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if reason != "" {
			m.Status.Conditions = []metav1.Condition{{Type: qemuv1.VMProvisionedCondition, Status: metav1.ConditionFalse, Reason: reason}}
		}
		return m
	}
	got := waitingWorkers([]qemuv1.QEMUMachine{
		machine("cp", qemuv1.WaitingForBootstrapReason),
		machine("w-1", qemuv1.WaitingForControlPlaneReason),
		machine("w-2", ""),
		machine("w-3", qemuv1.WaitingForControlPlaneReason),
	})
	var names []string
	for _, r := range got {
		names = append(names, r.Namespace+"/"+r.Name)
	}
	if want := []string{"ns/w-1", "ns/w-3"}; !slices.Equal(names, want) {
		t.Errorf("woken %v, want %v", names, want)
	}
}
