package patches

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		patches string
		want    []string // each "field: text" an error must hold; none for a valid class
	}{
		{"the quick-start class is valid", quickStartPatches, nil},
		{"duplicate names", `
- {name: a, external: {generatePatchesExtension: x}}
- {name: a, external: {generatePatchesExtension: y}}`,
			[]string{"spec.patches[1].name: Duplicate value"}},
		{"neither definitions nor external", `[{name: a}]`,
			[]string{"spec.patches[0]: Invalid value", "neither definitions nor external"}},
		{"both definitions and external", `
- name: a
  external: {generatePatchesExtension: x}
  definitions:
  - selector: {apiVersion: v1/x, kind: K, matchResources: {controlPlane: true}}
    jsonPatches: [{op: remove, path: /spec/x}]`,
			[]string{"spec.patches[0]: Invalid value", "both definitions and external"}},
		{"enabledIf that does not parse", `
- name: a
  enabledIf: "{{ if }}"
  external: {generatePatchesExtension: x}`,
			[]string{"spec.patches[0].enabledIf: Invalid value", "does not parse"}},
		{"a selector that matches nothing", `
- name: a
  definitions:
  - selector: {apiVersion: v1/x, kind: K, matchResources: {controlPlane: false, machineDeploymentClass: {names: []}}}
    jsonPatches: [{op: remove, path: /spec/x}]`,
			[]string{"spec.patches[0].definitions[0].selector.matchResources: Required value", "matches nothing"}},
		{"class names with a misplaced *", `
- name: a
  definitions:
  - selector: {apiVersion: v1/x, kind: K, matchResources: {machineDeploymentClass: {names: [ok, "a*b"]}, machinePoolClass: {names: ["**"]}}}
    jsonPatches: [{op: remove, path: /spec/x}]`,
			[]string{
				"spec.patches[0].definitions[0].selector.matchResources.machineDeploymentClass.names[1]: Invalid value",
				"spec.patches[0].definitions[0].selector.matchResources.machinePoolClass.names[0]: Invalid value",
			}},
		{"a class name that is no name once * is taken away", `
- name: a
  definitions:
  - selector: {apiVersion: v1/x, kind: K, matchResources: {machineDeploymentClass: {names: ["*x!"]}}}
    jsonPatches: [{op: remove, path: /spec/x}]`,
			[]string{"machineDeploymentClass.names[0]: Invalid value", "not a valid name"}},
		{"every jsonPatch is checked", `
- name: a
  definitions:
  - selector: {apiVersion: v1/x, kind: K, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /status/x, value: 1}
    - {op: add, path: /spec/x, valueFrom: {template: "{{ .x "}}
    - {op: add, path: /spec/x, valueFrom: {variable: "x[a]"}}
    - {op: replace, path: /spec/list/0, value: 1}
    - {op: add, path: /spec/x, value: 1}`,
			[]string{
				"spec.patches[0].definitions[0].jsonPatches[0]: Invalid value", "outside spec",
				"spec.patches[0].definitions[0].jsonPatches[1]: Invalid value", "valueFrom.template",
				"spec.patches[0].definitions[0].jsonPatches[2]: Invalid value", "valueFrom.variable",
				"spec.patches[0].definitions[0].jsonPatches[3]: Invalid value", "by index",
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := Validate(patchesOf(t, tc.patches), field.NewPath("spec", "patches"))
			all := errs.ToAggregate()
			if len(tc.want) == 0 {
				if all != nil {
					t.Fatalf("Validate: %v", all)
				}
				return
			}
			if all == nil {
				t.Fatalf("Validate accepted the class, want %q", tc.want)
			}
			for _, want := range tc.want {
				if !strings.Contains(all.Error(), want) {
					t.Errorf("errors %q do not say %s", all, want)
				}
			}
		})
	}
}
