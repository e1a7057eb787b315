package desired

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/plan"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestContains(t *testing.T) {
	for _, tt := range []struct {
		name       string
		have, want string
		ok         bool
	}{
		{"equal", `{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`, true},
		{"server default beside", `{"a":1,"d":true}`, `{"a":1}`, true},
		{"changed value", `{"a":2}`, `{"a":1}`, false},
		{"missing field", `{}`, `{"a":1}`, false},
		{"empty object wanted, absent", `{}`, `{"a":{}}`, true},
		{"empty list wanted, absent", `{}`, `{"a":[]}`, true},
		{"list items compared in order", `{"l":[{"n":"a","d":1},{"n":"b"}]}`, `{"l":[{"n":"a"},{"n":"b"}]}`, true},
		{"list item missing", `{"l":[{"n":"a"}]}`, `{"l":[{"n":"a"},{"n":"b"}]}`, false},
		{"list item extra", `{"l":[{"n":"a"},{"n":"b"}]}`, `{"l":[{"n":"a"}]}`, false},
		{"object replaced by scalar", `{"a":"x"}`, `{"a":{"b":1}}`, false},
		{"null wanted, absent", `{}`, `{"a":null}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := contains(decode(t, tt.have), decode(t, tt.want)); got != tt.ok {
				t.Errorf("contains(%s, %s) = %v, want %v", tt.have, tt.want, got, tt.ok)
			}
		})
	}
	// Whole numbers are int64 from the API machinery, float64 from JSON.
	if !contains(map[string]any{"n": int64(3)}, map[string]any{"n": float64(3)}) {
		t.Error("int64 3 and float64 3 differ")
	}
}

func TestHolds(t *testing.T) {
	value := decode(t, `{"args":[{"name":"v","value":"4"}],"set":["a","b"],"list":[{"x":1}],"m":{"k":"v"}}`)
	for _, tt := range []struct {
		name, fields string
		ok           bool
	}{
		{"field", `{"f:m":{"f:k":{}}}`, true},
		{"field gone", `{"f:m":{"f:gone":{}}}`, false},
		{"keyed item", `{"f:args":{"k:{\"name\":\"v\"}":{".":{},"f:value":{}}}}`, true},
		{"keyed item gone", `{"f:args":{"k:{\"name\":\"w\"}":{".":{}}}}`, false},
		{"set item", `{"f:set":{"v:\"b\"":{}}}`, true},
		{"set item gone", `{"f:set":{"v:\"c\"":{}}}`, false},
		{"indexed item", `{"f:list":{"i:0":{"f:x":{}}}}`, true},
		{"indexed item gone", `{"f:list":{"i:1":{}}}`, false},
		{"whole list gone", `{"f:absent":{}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := holds(value, decode(t, tt.fields).(map[string]any)); got != tt.ok {
				t.Errorf("holds(%s) = %v, want %v", tt.fields, got, tt.ok)
			}
		})
	}
}

func TestControlPlaneVersionState(t *testing.T) {
	cp := func(status string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"kind": "KubeadmControlPlane", "spec": map[string]any{"version": "v1.34.0"}}}
		if status != "" {
			u.Object["status"] = decode(t, status)
		}
		return u
	}
	for _, tt := range []struct {
		name string
		cp   *unstructured.Unstructured
		want plan.ControlPlaneVersionState
	}{
		{"none", nil, plan.ControlPlaneVersionState{}},
		{"provisioning: no version reported", cp(""), plan.ControlPlaneVersionState{Exists: true, Kind: "KubeadmControlPlane", Version: "v1.34.0", Provisioning: true}},
		{"stable", cp(`{"version":"v1.34.0"}`), plan.ControlPlaneVersionState{Exists: true, Kind: "KubeadmControlPlane", Version: "v1.34.0"}},
		{"status.version behind", cp(`{"version":"v1.33.1"}`), plan.ControlPlaneVersionState{Exists: true, Kind: "KubeadmControlPlane", Version: "v1.34.0", Upgrading: true}},
		{"machines at two versions", cp(`{"version":"v1.33.1","versions":[{"version":"v1.33.1","replicas":1},{"version":"v1.34.0","replicas":2}]}`),
			plan.ControlPlaneVersionState{Exists: true, Kind: "KubeadmControlPlane", Version: "v1.34.0", Upgrading: true}},
		{"all machines there", cp(`{"version":"v1.33.1","versions":[{"version":"v1.34.0","replicas":3}]}`),
			plan.ControlPlaneVersionState{Exists: true, Kind: "KubeadmControlPlane", Version: "v1.34.0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := controlPlaneVersionState(tt.cp); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
