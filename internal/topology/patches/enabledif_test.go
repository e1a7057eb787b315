package patches

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/topology"
)

func TestApplyEnabledIf(t *testing.T) {
	const vars = `{imageRepository: registry.example.com, empty: "", flag: false, pss: {enabled: true}, builtin: {controlPlane: {version: v1.31.0}}}`
	cases := []struct {
		enabledIf string
		applied   bool
	}{
		{``, true},
		{`true`, true},
		{`{{ .pss.enabled }}`, true},
		{`{{ .flag }}`, false},
		{`{{ ne .imageRepository "" }}`, true},
		{`{{ ne .empty "" }}`, false},
		{`{{ if .pss.enabled }}True{{ end }}`, true},
		{`  true  `, true},
		{`yes`, true}, // YAML 1.1, as upstream reads it
		{`false`, false},
		{`1`, false},
		{`"true"`, false}, // a string, not the boolean
		{`enabled`, false},
		{`{{ .unset }}`, false},
		{`{{ semverCompare ">=v1.30.0" .builtin.controlPlane.version }}`, true},
		{`{{ semverCompare "<v1.30.0" .builtin.controlPlane.version }}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.enabledIf, func(t *testing.T) {
			tpl := controlPlaneTemplate(t, vars)
			patches := patchesOf(t, markControlPlane)
			patches[0].EnabledIf = tc.enabledIf
			if err := Apply(patches, []*topology.Template{tpl}); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			_, applied, _ := unstructured.NestedBool(tpl.Object.Object, "spec", "template", "spec", "marked")
			if applied != tc.applied {
				t.Errorf("applied = %v, want %v", applied, tc.applied)
			}
		})
	}
}

// enabledIf is rendered with each template's own variables: a patch can be
// on for one MachineDeployment and off for another.
func TestApplyEnabledIfPerTemplate(t *testing.T) {
	const spec = `{template: {spec: {}}}`
	small := newTemplate(t, topology.MachineDeploymentInfrastructure, "workers", infraAPIVersion, machineKind, "small", spec,
		`{gpu: false, builtin: {machineDeployment: {topologyName: small}}}`)
	large := newTemplate(t, topology.MachineDeploymentInfrastructure, "workers", infraAPIVersion, machineKind, "large", spec,
		`{gpu: true, builtin: {machineDeployment: {topologyName: large}}}`)
	patches := patchesOf(t, `
- name: gpu
  enabledIf: "{{ .gpu }}"
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: [workers]}}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/gpuFor, valueFrom: {variable: builtin.machineDeployment.topologyName}}`)
	if err := Apply(patches, []*topology.Template{small, large}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if _, ok, _ := unstructured.NestedString(small.Object.Object, "spec", "template", "spec", "gpuFor"); ok {
		t.Errorf("the patch applied to %q whose gpu is false", "small")
	}
	if got, _, _ := unstructured.NestedString(large.Object.Object, "spec", "template", "spec", "gpuFor"); got != "large" {
		t.Errorf("large: gpuFor = %q, want %q", got, "large")
	}
}

func TestApplyEnabledIfErrors(t *testing.T) {
	cases := []struct {
		name, enabledIf string
		want            []string // what the error must say
	}{
		{"does not parse", `{{ if .flag }}`, []string{`"gated"`, "spec.patches[0]", "enabledIf", "does not parse"}},
		{"fails to render", `{{ .text.field }}`, []string{`"gated"`, "spec.patches[0]", "enabledIf", "KubeadmControlPlaneTemplate \"cp\", the control plane template"}},
		{"calls fail", `{{ fail "no GPU quota" }}`, []string{`"gated"`, "no GPU quota"}},
		{"renders what is not YAML", `{{ "a: b: c" }}`, []string{`"gated"`, "not YAML or JSON"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tpl := controlPlaneTemplate(t, `{text: hello}`)
			patches := patchesOf(t, markControlPlane)
			patches[0].EnabledIf = tc.enabledIf
			err := Apply(patches, []*topology.Template{tpl})
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("Apply: got %v, want an *Error", err)
			}
			if perr.Patch != "gated" || perr.Definition != -1 || perr.JSONPatch != -1 {
				t.Errorf("error names patch %q definition %d jsonPatch %d, want gated -1 -1", perr.Patch, perr.Definition, perr.JSONPatch)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %s", err, want)
				}
			}
		})
	}
}

// A patch's enabledIf is not rendered for templates none of its
// definitions select: its variables need not make sense there.
func TestApplyEnabledIfOnlyWhereSelected(t *testing.T) {
	cp := controlPlaneTemplate(t, `{}`)
	patches := patchesOf(t, `
- name: workers-only
  enabledIf: "{{ .builtin.machineDeployment.class }}"
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: ["*"]}}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/marked, value: true}`)
	if err := Apply(patches, []*topology.Template{cp}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// Patches apply in the class's order, each seeing what the ones before it
// did: the second patch appends to the list the first one adds, the third
// reads nothing from them but replaces what they wrote.
func TestApplyOrder(t *testing.T) {
	first := `
- name: create-list
  definitions:
  - selector: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/list, value: [one]}
    - {op: add, path: /spec/template/spec/list/-, value: two}`
	second := `
- name: append
  definitions:
  - selector: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/list/-, value: three}
    - {op: add, path: /spec/template/spec/list/0, value: zero}`
	third := `
- name: overwrite
  definitions:
  - selector: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: replace, path: /spec/template/spec/list, value: [last]}`

	tpl := controlPlaneTemplate(t, `{}`)
	if err := Apply(patchesOf(t, first+second), []*topology.Template{tpl}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got := asJSON(t, fieldOf(t, tpl, "spec", "template", "spec", "list")); got != `["zero","one","two","three"]` {
		t.Errorf("list = %s, want [zero one two three]", got)
	}

	tpl = controlPlaneTemplate(t, `{}`)
	if err := Apply(patchesOf(t, first+second+third), []*topology.Template{tpl}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got := asJSON(t, fieldOf(t, tpl, "spec", "template", "spec", "list")); got != `["last"]` {
		t.Errorf("list = %s, want [last]", got)
	}

	// In the other order the append finds no list to append to.
	tpl = controlPlaneTemplate(t, `{}`)
	err := Apply(patchesOf(t, second+first), []*topology.Template{tpl})
	var perr *Error
	if !errors.As(err, &perr) || perr.Patch != "append" || perr.PatchIndex != 0 || perr.Definition != 0 || perr.JSONPatch != 0 {
		t.Fatalf("Apply in the other order: got %v, want the error of append's first jsonPatch", err)
	}
}
