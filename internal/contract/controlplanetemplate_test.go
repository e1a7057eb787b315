package contract

import (
	"reflect"
	"strings"
	"testing"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestControlPlaneMachineTemplateRefRoundTrip(t *testing.T) {
	cp := obj(nil, map[string]any{"replicas": int64(1)})
	if ref, err := ControlPlaneMachineTemplateRef(cp); err != nil || ref != (clusterv1.ContractVersionedObjectReference{}) {
		t.Fatalf("a control plane without the field: %+v, %v; want an empty reference", ref, err)
	}
	want := clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachineTemplate", Name: "c-cp-abcde"}
	if err := SetControlPlaneMachineTemplateRef(cp, want); err != nil {
		t.Fatal(err)
	}
	if got, err := ControlPlaneMachineTemplateRef(cp); err != nil || got != want {
		t.Fatalf("read back %+v, %v; want %+v", got, err, want)
	}
}

func TestSetControlPlaneMachineTemplateRefLeavesOutEmptyFields(t *testing.T) {
	cp := obj(nil, nil)
	if err := SetControlPlaneMachineTemplateRef(cp, clusterv1.ContractVersionedObjectReference{APIGroup: "g", Kind: "K"}); err != nil {
		t.Fatal(err)
	}
	got := cp.Object["spec"].(map[string]any)["machineTemplate"].(map[string]any)["spec"].(map[string]any)["infrastructureRef"]
	if want := map[string]any{"apiGroup": "g", "kind": "K"}; !reflect.DeepEqual(got, want) {
		t.Errorf("infrastructureRef = %v, want %v (no empty name)", got, want)
	}
}

func TestSetControlPlaneMachineTemplateRefNamesThePathItCannotSet(t *testing.T) {
	cp := obj(nil, map[string]any{"machineTemplate": "not an object"})
	err := SetControlPlaneMachineTemplateRef(cp, clusterv1.ContractVersionedObjectReference{Name: "n"})
	if err == nil || !strings.Contains(err.Error(), "spec.machineTemplate.spec.infrastructureRef") {
		t.Errorf("error %v does not name the path", err)
	}
}
