package patches

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/topology"
)

// selectorTopology is a topology with every role: a control plane with its
// machine template, two MachineDeployment classes and a MachinePool class.
// Each template's name says where it sits.
func selectorTopology(t *testing.T) []*topology.Template {
	const spec = `{template: {spec: {}}}`
	return []*topology.Template{
		newTemplate(t, topology.InfrastructureCluster, "", infraAPIVersion, clusterKind, "infra-cluster", spec, `{}`),
		newTemplate(t, topology.ControlPlane, "", kcpAPIVersion, kcpKind, "control-plane", spec, `{}`),
		newTemplate(t, topology.ControlPlaneMachineInfrastructure, "", infraAPIVersion, machineKind, "control-plane-machine", spec, `{}`),
		newTemplate(t, topology.MachineDeploymentBootstrap, "default-worker", configAPIVersion, configKind, "md-default-bootstrap", spec, `{}`),
		newTemplate(t, topology.MachineDeploymentInfrastructure, "default-worker", infraAPIVersion, machineKind, "md-default-machine", spec, `{}`),
		newTemplate(t, topology.MachineDeploymentBootstrap, "gpu-worker", configAPIVersion, configKind, "md-gpu-bootstrap", spec, `{}`),
		newTemplate(t, topology.MachineDeploymentInfrastructure, "gpu-worker", infraAPIVersion, machineKind, "md-gpu-machine", spec, `{}`),
		newTemplate(t, topology.MachinePoolBootstrap, "default-worker", configAPIVersion, configKind, "mp-default-bootstrap", spec, `{}`),
		newTemplate(t, topology.MachinePoolInfrastructure, "default-worker", infraAPIVersion, poolKind, "mp-default-pool", spec, `{}`),
	}
}

func TestApplySelectors(t *testing.T) {
	cases := []struct {
		name     string
		selector string
		want     string // the names of the patched templates, comma-separated
	}{
		{"infrastructureCluster selects the infrastructure cluster template",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalClusterTemplate, matchResources: {infrastructureCluster: true}}`,
			"infra-cluster"},
		{"controlPlane selects the control plane template",
			`{apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}`,
			"control-plane"},
		{"controlPlane selects the control plane's machine template, not the workers' of the same kind",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {controlPlane: true}}`,
			"control-plane-machine"},
		{"controlPlane does not select the infrastructure cluster although the kind matches",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalClusterTemplate, matchResources: {controlPlane: true}}`,
			""},
		{"infrastructureCluster: false selects nothing",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalClusterTemplate, matchResources: {infrastructureCluster: false}}`,
			""},
		{"a machineDeployment class's infrastructure template",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: [default-worker]}}}`,
			"md-default-machine"},
		{"a machineDeployment class's bootstrap template, not the pool's of the same class",
			`{apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, matchResources: {machineDeploymentClass: {names: [default-worker]}}}`,
			"md-default-bootstrap"},
		{"several class names",
			`{apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, matchResources: {machineDeploymentClass: {names: [gpu-worker, default-worker]}}}`,
			"md-default-bootstrap,md-gpu-bootstrap"},
		{"* selects every machineDeployment class",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: ["*"]}}}`,
			"md-default-machine,md-gpu-machine"},
		{"*suffix selects by the end of the class name",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: ["*-worker"]}}}`,
			"md-default-machine,md-gpu-machine"},
		{"prefix* selects by the start of the class name",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: ["gpu-*"]}}}`,
			"md-gpu-machine"},
		{"a class name without * must match whole",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: [gpu]}}}`,
			""},
		{"an empty list of class names selects nothing",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: []}}}`,
			""},
		{"a machinePool class's bootstrap template",
			`{apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, matchResources: {machinePoolClass: {names: [default-worker]}}}`,
			"mp-default-bootstrap"},
		{"a machinePool class's infrastructure template, by wildcard",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachinePoolTemplate, matchResources: {machinePoolClass: {names: ["default-*"]}}}`,
			"mp-default-pool"},
		{"several places at once",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {controlPlane: true, machineDeploymentClass: {names: [gpu-worker]}}}`,
			"control-plane-machine,md-gpu-machine"},
		{"another apiVersion of the kind selects nothing",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: LocalMachineTemplate, matchResources: {controlPlane: true, machineDeploymentClass: {names: ["*"]}}}`,
			""},
		{"another kind selects nothing",
			`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: InMemoryMachineTemplate, matchResources: {controlPlane: true, machineDeploymentClass: {names: ["*"]}}}`,
			""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			templates := selectorTopology(t)
			patches := patchesOf(t, `
- name: mark
  definitions:
  - selector: `+tc.selector+`
    jsonPatches:
    - {op: add, path: /spec/template/spec/marked, value: true}`)
			if err := Apply(patches, templates); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			var marked []string
			for _, tpl := range templates {
				if _, ok, _ := unstructured.NestedBool(tpl.Object.Object, "spec", "template", "spec", "marked"); ok {
					marked = append(marked, tpl.Object.GetName())
				}
			}
			slices.Sort(marked)
			if got := strings.Join(marked, ","); got != tc.want {
				t.Errorf("patched %q, want %q", got, tc.want)
			}
		})
	}
}

// Every definition of a patch whose selector matches applies, in the order
// of definitions; the others leave the template alone.
func TestApplyDefinitionsOfOnePatch(t *testing.T) {
	templates := selectorTopology(t)
	patches := patchesOf(t, `
- name: two-definitions
  definitions:
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: ["*"]}}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/steps, value: [first]}
  - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: [gpu-worker]}}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/steps/-, value: second}`)
	if err := Apply(patches, templates); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := map[string]string{"md-default-machine": `["first"]`, "md-gpu-machine": `["first","second"]`}
	for _, tpl := range templates {
		got := ""
		if v, ok, _ := unstructured.NestedFieldNoCopy(tpl.Object.Object, "spec", "template", "spec", "steps"); ok {
			got = asJSON(t, v)
		}
		if got != want[tpl.Object.GetName()] {
			t.Errorf("%s: steps %s, want %s", tpl.Object.GetName(), got, want[tpl.Object.GetName()])
		}
	}
}

func TestAnyClassMatches(t *testing.T) {
	cases := []struct {
		names []string
		class string
		want  bool
	}{
		{[]string{"a"}, "a", true},
		{[]string{"a"}, "ab", false},
		{[]string{"*"}, "anything", true},
		{[]string{"a*"}, "a", true},
		{[]string{"a*"}, "abc", true},
		{[]string{"a*"}, "ba", false},
		{[]string{"*c"}, "abc", true},
		{[]string{"*c"}, "cb", false},
		{[]string{"x", "*c"}, "abc", true},
		{nil, "a", false},
	}
	for _, tc := range cases {
		if got := anyClassMatches(tc.names, tc.class); got != tc.want {
			t.Errorf("anyClassMatches(%q, %q) = %v, want %v", tc.names, tc.class, got, tc.want)
		}
	}
}
