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

func TestDesiredVersionAndReplicasRoundTrip(t *testing.T) {
	cp := obj(map[string]any{"version": "v1.33.0"}, nil)
	if err := SetDesiredVersion(cp, "v1.34.1"); err != nil {
		t.Fatal(err)
	}
	if err := SetDesiredReplicas(cp, 3); err != nil {
		t.Fatal(err)
	}
	if v, err := DesiredVersion(cp); err != nil || v != "v1.34.1" {
		t.Errorf("DesiredVersion = %q, %v; want v1.34.1 (status.version is not the desired one)", v, err)
	}
	// The API machinery's form of a whole number: int64.
	if got := cp.Object["spec"].(map[string]any)["replicas"]; got != int64(3) {
		t.Errorf("spec.replicas = %#v, want int64(3)", got)
	}
	bad := obj(nil, nil)
	bad.Object["spec"] = "not an object"
	if err := SetDesiredReplicas(bad, 1); err == nil || !strings.Contains(err.Error(), "spec.replicas") {
		t.Errorf("error %v does not name spec.replicas", err)
	}
}

func TestReportedVersions(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status map[string]any
		want   []string
		err    bool
	}{
		{name: "none yet", status: nil},
		{name: "status.version only", status: map[string]any{"version": "v1.33.1"}, want: []string{"v1.33.1"}},
		{name: "status.versions wins", status: map[string]any{"version": "v1.33.1", "versions": []any{
			map[string]any{"version": "v1.33.1", "replicas": int64(1)}, map[string]any{"version": "v1.34.0", "replicas": int64(2)}}},
			want: []string{"v1.33.1", "v1.34.0"}},
		{name: "empty entries are skipped", status: map[string]any{"versions": []any{map[string]any{"replicas": int64(1)}}, "version": "v1.33.1"},
			want: []string{"v1.33.1"}},
		{name: "a malformed list falls back, with an error", status: map[string]any{"versions": "v1.34.0", "version": "v1.33.1"},
			want: []string{"v1.33.1"}, err: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReportedVersions(obj(tt.status, nil))
			if !reflect.DeepEqual(got, tt.want) || (err != nil) != tt.err {
				t.Errorf("ReportedVersions = %q, %v; want %q (error %v)", got, err, tt.want, tt.err)
			}
		})
	}
}
