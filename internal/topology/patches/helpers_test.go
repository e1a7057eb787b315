package patches

import (
	"encoding/json"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/topology"
)

// The kinds of the tests' templates: Capstan's kubeadm and local provider kinds.
const (
	kcpAPIVersion    = "controlplane.cluster.x-k8s.io/v1beta2"
	kcpKind          = "KubeadmControlPlaneTemplate"
	infraAPIVersion  = "infrastructure.cluster.x-k8s.io/v1beta2"
	clusterKind      = "LocalClusterTemplate"
	machineKind      = "LocalMachineTemplate"
	poolKind         = "LocalMachinePoolTemplate"
	configAPIVersion = "bootstrap.cluster.x-k8s.io/v1beta2"
	configKind       = "KubeadmConfigTemplate"
)

// object reads a template from YAML, failing the test if it does not parse.
func object(t testing.TB, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("template manifest: %v", err)
	}
	return u
}

// variablesOf reads a template's variables from a YAML object, one variable per key.
func variablesOf(t testing.TB, manifest string) map[string]apiextensionsv1.JSON {
	t.Helper()
	var values map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &values); err != nil {
		t.Fatalf("variables manifest: %v", err)
	}
	out := make(map[string]apiextensionsv1.JSON, len(values))
	for name, v := range values {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("variable %s: %v", name, err)
		}
		out[name] = apiextensionsv1.JSON{Raw: raw}
	}
	return out
}

// patchesOf reads a class's spec.patches from YAML.
func patchesOf(t testing.TB, manifest string) []clusterv1.ClusterClassPatch {
	t.Helper()
	var out []clusterv1.ClusterClassPatch
	if err := yaml.UnmarshalStrict([]byte(manifest), &out); err != nil {
		t.Fatalf("patches manifest: %v", err)
	}
	return out
}

// newTemplate builds a topology template of a role with a spec and variables.
func newTemplate(t testing.TB, role topology.Role, class, apiVersion, kind, name, spec, vars string) *topology.Template {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": object(t, spec).Object}}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	obj.SetName(name)
	obj.SetNamespace("ns")
	topologyName := ""
	if class != "" {
		topologyName = class + "-topology"
	}
	return &topology.Template{Role: role, Class: class, Topology: topologyName, Object: obj, Variables: variablesOf(t, vars)}
}

// fieldOf reads a nested field of a template's object, failing the test if it is absent.
func fieldOf(t testing.TB, tpl *topology.Template, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(tpl.Object.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s: field %v not found (err %v) in %v", tpl.Object.GetKind(), path, err, tpl.Object.Object)
	}
	return v
}

// asJSON renders a value as compact JSON for comparisons.
func asJSON(t testing.TB, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %v: %v", v, err)
	}
	return string(raw)
}

// markControlPlane is a patch named "gated" that sets
// spec.template.spec.marked on the control plane template.
const markControlPlane = `
- name: gated
  definitions:
  - selector: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/marked, value: true}`

// controlPlaneTemplate is a control plane template with an empty spec.template.spec.
func controlPlaneTemplate(t testing.TB, vars string) *topology.Template {
	t.Helper()
	return newTemplate(t, topology.ControlPlane, "", kcpAPIVersion, kcpKind, "cp", `{template: {spec: {}}}`, vars)
}
