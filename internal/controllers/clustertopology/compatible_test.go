package clustertopology

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/topology/desired"
)

func object(group, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(group + "/v1beta2")
	u.SetKind(kind)
	u.SetName(name)
	return u
}

func TestIncompatible(t *testing.T) {
	const infra, cp, boot = "infrastructure.example", "controlplane.example", "bootstrap.example"
	current := desired.Current{
		InfrastructureCluster:             object(infra, "FooCluster", "c"),
		ControlPlane:                      object(cp, "FooControlPlane", "c-cp"),
		ControlPlaneMachineInfrastructure: object(infra, "FooMachineTemplate", "c-1"),
		MachineDeployments: map[string]*desired.MachineDeployment{"md": {
			Infrastructure: object(infra, "FooMachineTemplate", "c-md-1"), Bootstrap: object(boot, "FooConfigTemplate", "c-md-2"),
		}},
	}
	same := func() *desired.State {
		return &desired.State{
			InfrastructureCluster:             object(infra, "FooCluster", "c"),
			ControlPlane:                      object(cp, "FooControlPlane", "c-cp"),
			ControlPlaneMachineInfrastructure: object(infra, "FooMachineTemplate", "c-9"),
			MachineDeployments: map[string]*desired.MachineDeployment{
				"md":  {Infrastructure: object(infra, "FooMachineTemplate", "c-md-9"), Bootstrap: object(boot, "OtherConfigTemplate", "c-md-8")},
				"new": {Infrastructure: object(infra, "BarMachineTemplate", "c-new-1")},
			},
		}
	}
	tests := []struct {
		name   string
		change func(*desired.State)
		want   []string
	}{
		{name: "same kinds, rotated templates, a new worker, another bootstrap kind", change: func(*desired.State) {}},
		{name: "another infrastructure cluster kind", change: func(s *desired.State) { s.InfrastructureCluster = object(infra, "BarCluster", "c") },
			want: []string{"infrastructure cluster would change from FooCluster.infrastructure.example to BarCluster.infrastructure.example"}},
		{name: "another control plane name", change: func(s *desired.State) { s.ControlPlane.SetName("c-cp2") },
			want: []string{"control plane would change from FooControlPlane c-cp to FooControlPlane c-cp2"}},
		{name: "another machine template kind", change: func(s *desired.State) {
			s.ControlPlaneMachineInfrastructure = object(infra, "BarMachineTemplate", "c-9")
			s.MachineDeployments["md"].Infrastructure = object("other.example", "FooMachineTemplate", "c-md-9")
		}, want: []string{"control plane's machine infrastructure template", "MachineDeployment topology md would change from FooMachineTemplate.infrastructure.example to FooMachineTemplate.other.example"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := same()
			tt.change(st)
			got := incompatible(current, st)
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %d complaints like %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("complaint %q, want one saying %q", got[i], tt.want[i])
				}
			}
		})
	}
}
