package patches

import (
	"errors"
	"strings"
	"testing"
	gotemplate "text/template"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"capstan.dev/capstan/internal/topology"
)

func TestApplyErrors(t *testing.T) {
	const vars = `{name: web, network: {zones: [a, b]}, builtin: {cluster: {name: prod}}}`
	cases := []struct {
		name      string
		jsonPatch string
		want      []string // what the error must say besides the patch's name and field
	}{
		{"a path outside spec", `{op: replace, path: /metadata/name, value: other}`, []string{`"/metadata/name" is outside spec`, "/spec/"}},
		{"a path that only starts like spec", `{op: add, path: /specification, value: x}`, []string{"outside spec"}},
		{"the kind", `{op: replace, path: /kind, value: Other}`, []string{"outside spec"}},
		{"an add at a list index other than 0", `{op: add, path: /spec/template/spec/list/1, value: x}`, []string{"index 1", `prepend ("0") or append ("-")`}},
		{"a replace at a list index", `{op: replace, path: /spec/template/spec/list/0, value: x}`, []string{"by index", "replace"}},
		{"a remove at a list index", `{op: remove, path: /spec/template/spec/list/0}`, []string{"by index", "remove"}},
		{"an unsupported op", `{op: move, path: /spec/template/spec/x, value: y}`, []string{`op "move"`, "add, replace or remove"}},
		{"no value", `{op: add, path: /spec/template/spec/x}`, []string{"set value or valueFrom"}},
		{"a null value is no value", `{op: add, path: /spec/template/spec/x, value: null}`, []string{"set value or valueFrom"}},
		{"both value and valueFrom", `{op: add, path: /spec/template/spec/x, value: 1, valueFrom: {variable: name}}`, []string{"both value and valueFrom"}},
		{"an empty valueFrom", `{op: add, path: /spec/template/spec/x, valueFrom: {}}`, []string{"set variable or template"}},
		{"both variable and template", `{op: add, path: /spec/template/spec/x, valueFrom: {variable: name, template: x}}`, []string{"both variable and template"}},
		{"a missing variable", `{op: add, path: /spec/template/spec/x, valueFrom: {variable: unset}}`, []string{`variable "unset" is not set`, "spec.topology.variables"}},
		{"a missing field of a variable", `{op: add, path: /spec/template/spec/x, valueFrom: {variable: network.cidr}}`, []string{`"network.cidr"`, `network has no field "cidr"`}},
		{"a missing builtin", `{op: add, path: /spec/template/spec/x, valueFrom: {variable: builtin.machineDeployment.class}}`, []string{`builtin has no field "machineDeployment"`, "in their own templates only"}},
		{"an index past the end", `{op: add, path: /spec/template/spec/x, valueFrom: {variable: "network.zones[2]"}}`, []string{"network.zones has 2 items, no index 2"}},
		{"an index into what is not a list", `{op: add, path: /spec/template/spec/x, valueFrom: {variable: "name[0]"}}`, []string{"name is a string, not a list"}},
		{"a field of what is not an object", `{op: add, path: /spec/template/spec/x, valueFrom: {variable: name.first}}`, []string{`name is a string, not an object with field "first"`}},
		{"a malformed variable reference", `{op: add, path: /spec/template/spec/x, valueFrom: {variable: "network.zones[one]"}}`, []string{"valueFrom.variable", "index must be a number"}},
		{"a template that does not parse", `{op: add, path: /spec/template/spec/x, valueFrom: {template: "{{ .name "}}`, []string{"valueFrom.template", "does not parse"}},
		{"a template that fails", `{op: add, path: /spec/template/spec/x, valueFrom: {template: "{{ if not .name2 }}{{ fail \"set name2\" }}{{ end }}"}}`, []string{"valueFrom.template", "set name2"}},
		{"a template that renders what is not YAML", `{op: add, path: /spec/template/spec/x, valueFrom: {template: "a: b: {{ .name }}"}}`, []string{`renders "a: b: web"`, "not YAML or JSON"}},
		{"a replace of a field that does not exist", `{op: replace, path: /spec/template/spec/absent, value: 1}`, []string{"replace /spec/template/spec/absent", "use add"}},
		{"a remove of a field that does not exist", `{op: remove, path: /spec/template/spec/absent}`, []string{"remove /spec/template/spec/absent", "needs the field to exist"}},
		{"an add under a field that does not exist", `{op: add, path: /spec/template/spec/absent/child, value: 1}`, []string{"add /spec/template/spec/absent/child", "add the fields above it first"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok := newTemplate(t, topology.ControlPlane, "", kcpAPIVersion, kcpKind, "cp", `{template: {spec: {list: [a]}}}`, vars)
			before := asJSON(t, ok.Object.Object)
			// The first patch applies cleanly; the error is in the second
			// patch's second definition's second jsonPatch.
			patches := patchesOf(t, `
- name: fine
  definitions:
  - selector: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/fine, value: true}
- name: broken
  definitions:
  - selector: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/fine, value: true}
  - selector: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/fine, value: true}
    - `+tc.jsonPatch)
			err := Apply(patches, []*topology.Template{ok})
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("Apply: got %v, want an *Error", err)
			}
			if perr.Patch != "broken" || perr.PatchIndex != 1 || perr.Definition != 1 || perr.JSONPatch != 1 {
				t.Errorf("error names %s %q, want spec.patches[1].definitions[1].jsonPatches[1] \"broken\"", perr.Field(), perr.Patch)
			}
			for _, want := range append([]string{`"broken"`, "spec.patches[1].definitions[1].jsonPatches[1]"}, tc.want...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %s", err, want)
				}
			}
			if after := asJSON(t, ok.Object.Object); after != before {
				t.Errorf("the template changed although Apply failed:\n before %s\n after  %s", before, after)
			}
		})
	}
}

// An error in one template leaves every template as it was, those patched
// before it included.
func TestApplyIsAllOrNothing(t *testing.T) {
	templates := selectorTopology(t)
	var before []string
	for _, tpl := range templates {
		before = append(before, asJSON(t, tpl.Object.Object))
	}
	patches := patchesOf(t, `
- name: everywhere
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {controlPlane: true, machineDeploymentClass: {names: ["*"]}}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/marked, value: true}
- name: gpu-only-variable
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: ["*"]}}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/gpu, valueFrom: {variable: gpu}}`)
	templates[6].Variables = variablesOf(t, `{gpu: {count: 1}}`) // md-gpu-machine has it; md-default-machine does not
	err := Apply(patches, templates)
	var perr *Error
	if !errors.As(err, &perr) || perr.Patch != "gpu-only-variable" || !strings.Contains(perr.Template, `"md-default-machine"`) {
		t.Fatalf("Apply: got %v, want the error of gpu-only-variable on md-default-machine", err)
	}
	for i, tpl := range templates {
		if after := asJSON(t, tpl.Object.Object); after != before[i] {
			t.Errorf("%s changed although Apply failed: %s", tpl.Object.GetName(), after)
		}
	}
}

// The template's object is changed in place: whoever holds the pointer sees
// the patched content.
func TestApplyChangesTheObjectInPlace(t *testing.T) {
	tpl := controlPlaneTemplate(t, `{}`)
	held := tpl.Object
	if err := Apply(patchesOf(t, markControlPlane), []*topology.Template{tpl}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if tpl.Object != held || asJSON(t, fieldOf(t, &topology.Template{Object: held}, "spec", "template", "spec", "marked")) != "true" {
		t.Errorf("the held object was not patched: %v", held.Object)
	}
}

// A patch that is neither inline nor external, or whose selector names a
// class with a misplaced "*", is refused before anything is applied.
func TestApplyMalformedPatches(t *testing.T) {
	cases := []struct {
		name, patches string
		wantField     string
		want          string
	}{
		{"no definitions", `[{name: empty}]`, "spec.patches[0]", "neither definitions nor external"},
		{"a * inside a class name", `
- name: star
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: [ok, "a*b"]}}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/x, value: 1}`, "spec.patches[0].definitions[0]", `"*" may only begin or end`},
		{"two * in a class name", `
- name: star
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machinePoolClass: {names: ["*a*"]}}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/x, value: 1}`, "spec.patches[0].definitions[0]", `one "*" only`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Apply(patchesOf(t, tc.patches), selectorTopology(t))
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("Apply: got %v, want an *Error", err)
			}
			if perr.Field() != tc.wantField || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want field %s and %q", err, tc.wantField, tc.want)
			}
		})
	}
}

// The guard behind the path rule: were a jsonPatch able to reach the
// template's identity, the definition would be refused. Apply's own checks
// keep such a path out, so the guard is tried on a patch compiled by hand.
func TestIdentityGuard(t *testing.T) {
	tpl := controlPlaneTemplate(t, `{}`)
	for _, path := range []string{"/metadata/name", "/metadata/namespace", "/kind", "/apiVersion"} {
		patches := patchesOf(t, `
- name: rename
  definitions:
  - selector: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: replace, path: `+path+`, value: other}`)
		c := compiled{index: 0, patch: &patches[0], values: [][]*gotemplate.Template{{nil}}}
		err := c.applyTo(&document{template: tpl})
		var perr *Error
		if !errors.As(err, &perr) || perr.Definition != 0 || !strings.Contains(err.Error(), "apiVersion, kind, name or namespace") {
			t.Errorf("%s: got %v, want the definition refused for changing the template's identity", path, err)
		}
	}
}

// Variables that do not hold JSON are an error of the patch that reads them,
// not a panic nor a template rendered without them.
func TestApplyVariablesThatAreNotJSON(t *testing.T) {
	tpl := controlPlaneTemplate(t, `{}`)
	tpl.Variables["broken"] = apiextensionsv1.JSON{Raw: []byte(`{not json`)}
	err := Apply(patchesOf(t, markControlPlane), []*topology.Template{tpl})
	var perr *Error
	if !errors.As(err, &perr) || perr.Patch != "gated" || !strings.Contains(err.Error(), `variable "broken" does not hold JSON`) {
		t.Fatalf("Apply: got %v, want the patch's error naming the variable", err)
	}
}
