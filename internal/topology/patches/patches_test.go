package patches

import (
	"errors"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/topology"
)

// specJSON is the template's whole spec as compact JSON.
func specJSON(t *testing.T, tpl *topology.Template) string {
	t.Helper()
	return asJSON(t, fieldOf(t, tpl, "spec"))
}

func TestApplyOperations(t *testing.T) {
	const start = `{template: {spec: {providerID: p, list: [a, b], nested: {keep: 1}}}}`
	cases := []struct {
		name     string
		patches  string
		wantSpec string
	}{{
		name: "add a field",
		patches: `
- name: p
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/failureDomain, value: fd-1}`,
		wantSpec: `{"template":{"spec":{"failureDomain":"fd-1","list":["a","b"],"nested":{"keep":1},"providerID":"p"}}}`,
	}, {
		name: "add an object replaces what was there",
		patches: `
- name: p
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/nested, value: {other: [1, 2.5, true, null]}}`,
		wantSpec: `{"template":{"spec":{"list":["a","b"],"nested":{"other":[1,2.5,true,null]},"providerID":"p"}}}`,
	}, {
		name: "add prepends to a list with 0 and appends with -",
		patches: `
- name: p
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/list/0, value: first}
    - {op: add, path: /spec/template/spec/list/-, value: last}`,
		wantSpec: `{"template":{"spec":{"list":["first","a","b","last"],"nested":{"keep":1},"providerID":"p"}}}`,
	}, {
		name: "replace a field",
		patches: `
- name: p
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: replace, path: /spec/template/spec/providerID, value: q}`,
		wantSpec: `{"template":{"spec":{"list":["a","b"],"nested":{"keep":1},"providerID":"q"}}}`,
	}, {
		name: "remove a field; a remove's value is not read",
		patches: `
- name: p
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: remove, path: /spec/template/spec/nested}
    - {op: remove, path: /spec/template/spec/list, valueFrom: {variable: notSet}}`,
		wantSpec: `{"template":{"spec":{"providerID":"p"}}}`,
	}, {
		name: "the key of a field with a slash is escaped as ~1",
		patches: `
- name: p
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/nested/a~1b, value: x}`,
		wantSpec: `{"template":{"spec":{"list":["a","b"],"nested":{"a/b":"x","keep":1},"providerID":"p"}}}`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tpl := newTemplate(t, topology.ControlPlaneMachineInfrastructure, "", infraAPIVersion, machineKind, "cp", start, `{}`)
			if err := Apply(patchesOf(t, tc.patches), []*topology.Template{tpl}); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if got := specJSON(t, tpl); got != tc.wantSpec {
				t.Errorf("spec\n got %s\nwant %s", got, tc.wantSpec)
			}
		})
	}
}

func TestApplyExternalPatchIsUnsupported(t *testing.T) {
	patches := patchesOf(t, `
- name: inline-one
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/failureDomain, value: fd-1}
- name: from-extension
  external: {generatePatchesExtension: generate.my-extension}
- name: validate-only
  external: {validateTopologyExtension: validate.my-extension}`)
	tpl := newTemplate(t, topology.ControlPlaneMachineInfrastructure, "", infraAPIVersion, machineKind, "cp", `{template: {spec: {}}}`, `{}`)
	err := Apply(patches, []*topology.Template{tpl})
	var unsupported *UnsupportedError
	if !errors.As(err, &unsupported) {
		t.Fatalf("Apply: got %v, want an *UnsupportedError", err)
	}
	if got, want := strings.Join(unsupported.Patches, ","), "from-extension,validate-only"; got != want {
		t.Errorf("unsupported patches %s, want %s", got, want)
	}
	for _, want := range []string{`"from-extension"`, `"validate-only"`, "spec.patches[].external", "inline definitions"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	if got := specJSON(t, tpl); got != `{"template":{"spec":{}}}` {
		t.Errorf("the inline patch was applied although the class was refused: spec %s", got)
	}
}

func TestApplyWithoutPatchesLeavesTemplatesAlone(t *testing.T) {
	tpl := controlPlaneTemplate(t, `{}`)
	obj := tpl.Object.Object
	if err := Apply(nil, []*topology.Template{tpl}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if len(obj) != len(tpl.Object.Object) || specJSON(t, tpl) != `{"template":{"spec":{}}}` {
		t.Errorf("template changed: %v", tpl.Object.Object)
	}
}
