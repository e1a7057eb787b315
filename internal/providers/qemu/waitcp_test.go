package qemu

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
