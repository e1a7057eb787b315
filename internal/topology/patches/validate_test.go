package patches

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
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
			expectErrors(t, Validate(patchesOf(t, tc.patches), field.NewPath("spec", "patches")), tc.want)
		})
	}
}

// quickStartClass is the class quickStartPatches belong to, without its
// patches: its templates and variables.
const quickStartClass = `
apiVersion: cluster.x-k8s.io/v1beta2
kind: ClusterClass
metadata: {name: quick-start, namespace: ns}
spec:
  infrastructure:
    templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalClusterTemplate, name: quick-start-cluster}
  controlPlane:
    templateRef: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, name: quick-start-control-plane}
    machineInfrastructure:
      templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, name: quick-start-control-plane}
  workers:
    machineDeployments:
    - class: default-worker
      bootstrap:
        templateRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, name: quick-start-default-worker}
      infrastructure:
        templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, name: quick-start-default-worker}
    - class: large-worker
      bootstrap:
        templateRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, name: quick-start-large-worker}
      infrastructure:
        templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, name: quick-start-large-worker}
    machinePools:
    - class: default-pool
      bootstrap:
        templateRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, name: quick-start-default-pool}
      infrastructure:
        templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachinePoolTemplate, name: quick-start-default-pool}
  variables:
  - {name: imageRepository, required: true, schema: {openAPIV3Schema: {type: string, default: ""}}}
  - {name: etcdImageTag, required: true, schema: {openAPIV3Schema: {type: string, default: ""}}}
  - {name: coreDNSImageTag, required: true, schema: {openAPIV3Schema: {type: string, default: ""}}}
  - {name: failureDomains, required: false, schema: {openAPIV3Schema: {type: array, items: {type: object, x-kubernetes-preserve-unknown-fields: true}}}}
  - name: podSecurityStandard
    required: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          enabled: {type: boolean, default: true}
          enforce: {type: string, default: baseline}
          audit: {type: string, default: restricted}
          warn: {type: string, default: restricted}
`

func TestValidateClass(t *testing.T) {
	const selector = `
- name: extra
  definitions:
  - selector: `
	cases := []struct {
		name  string
		extra string // patches added to the quick-start ones
		want  []string
		count int // how many errors
	}{
		{"the quick-start class is valid", ``, nil, 0},
		{"every builtin variable of the book can be read", selector + `{apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, matchResources: {machineDeploymentClass: {names: ["*"]}, machinePoolClass: {names: ["*"]}}}
    jsonPatches:
    - {op: add, path: /spec/a, valueFrom: {variable: builtin.cluster.topology.classRef.name}}
    - {op: add, path: /spec/a, valueFrom: {variable: builtin.cluster.network.pods}}
    - {op: add, path: /spec/a, valueFrom: {variable: builtin.cluster.metadata.labels}}
    - {op: add, path: /spec/a, valueFrom: {variable: builtin.controlPlane.machineTemplate.infrastructureRef.name}}
    - {op: add, path: /spec/a, valueFrom: {variable: builtin.machineDeployment.bootstrap.configRef.name}}
    - {op: add, path: /spec/a, valueFrom: {variable: builtin.machinePool.infrastructureRef.name}}
    - {op: add, path: /spec/a, valueFrom: {variable: builtin}}
    - {op: add, path: /spec/a, valueFrom: {variable: "failureDomains[0].name"}}`, nil, 0},
		{"a builtin that does not exist", selector + `{apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, matchResources: {machineDeploymentClass: {names: ["*"]}}}
    jsonPatches:
    - {op: add, path: /spec/a, valueFrom: {variable: builtin.machineDeployment.zone}}
    - {op: add, path: /spec/a, valueFrom: {variable: builtin.cluster.metadata.labels.team}}`,
			[]string{
				"spec.patches[7].definitions[0].jsonPatches[0].valueFrom.variable: Invalid value: \"builtin.machineDeployment.zone\": not a builtin variable",
				"spec.patches[7].definitions[0].jsonPatches[1].valueFrom.variable: Invalid value: \"builtin.cluster.metadata.labels.team\": not a builtin variable",
			}, 2},
		{"a variable the class does not define", selector + `{apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, matchResources: {machineDeploymentClass: {names: ["*"]}}}
    jsonPatches:
    - {op: add, path: /spec/a, valueFrom: {variable: "registry.host"}}
    - {op: remove, path: /spec/a, valueFrom: {variable: notChecked}}`,
			[]string{`spec.patches[7].definitions[0].jsonPatches[0].valueFrom.variable: Invalid value: "registry.host": the class defines no variable "registry"`}, 1},
		{"infrastructureCluster with the kind of another template", selector + `{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {infrastructureCluster: true}}
    jsonPatches: [{op: remove, path: /spec/a}]`,
			[]string{"spec.patches[7].definitions[0].selector.matchResources.infrastructureCluster: Invalid value", "LocalClusterTemplate of infrastructure.cluster.x-k8s.io/v1beta2, not LocalMachineTemplate"}, 1},
		{"controlPlane with a kind the control plane has not", selector + `{apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, matchResources: {controlPlane: true}}
    jsonPatches: [{op: remove, path: /spec/a}]`,
			[]string{"spec.patches[7].definitions[0].selector.matchResources.controlPlane: Invalid value", "neither the class's control plane template nor its machine infrastructure template"}, 1},
		{"controlPlane with another apiVersion", selector + `{apiVersion: controlplane.cluster.x-k8s.io/v1beta1, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}
    jsonPatches: [{op: remove, path: /spec/a}]`,
			[]string{"spec.patches[7].definitions[0].selector.matchResources.controlPlane: Invalid value"}, 1},
		{"machineDeployment class names that pick no template of the kind", selector + `{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: [default-worker, gpu-worker, "*-pool", "large-*"]}}}
    jsonPatches: [{op: remove, path: /spec/a}]`,
			[]string{
				`machineDeploymentClass.names[1]: Invalid value: "gpu-worker": no machineDeployment class of that name`,
				`machineDeploymentClass.names[2]: Invalid value: "*-pool"`,
			}, 2},
		{"machinePool class names", selector + `{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachinePoolTemplate, matchResources: {machinePoolClass: {names: [default-pool, default-worker]}}}
    jsonPatches: [{op: remove, path: /spec/a}]`,
			[]string{`machinePoolClass.names[1]: Invalid value: "default-worker": no machinePool class of that name`}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			class := &clusterv1.ClusterClass{}
			if err := yaml.UnmarshalStrict([]byte(quickStartClass), class); err != nil {
				t.Fatalf("class manifest: %v", err)
			}
			class.Spec.Patches = patchesOf(t, quickStartPatches+tc.extra)
			errs := ValidateClass(class)
			expectErrors(t, errs, tc.want)
			if len(errs) != tc.count {
				t.Errorf("%d errors, want %d: %v", len(errs), tc.count, errs.ToAggregate())
			}
		})
	}
}

// Every builtin variable the Cluster API book lists may be read by a patch.
func TestBuiltinPathsCoverTheBook(t *testing.T) {
	book := []string{"builtin", "builtin.cluster", "builtin.controlPlane", "builtin.machineDeployment", "builtin.machinePool"}
	for _, leaf := range []string{"name", "namespace", "uid", "metadata.labels", "metadata.annotations",
		"topology", "topology.classRef.name", "topology.classRef.namespace", "topology.class", "topology.classNamespace", "topology.version",
		"network", "network.serviceDomain", "network.services", "network.pods"} {
		book = append(book, "builtin.cluster."+leaf)
	}
	for _, leaf := range []string{"name", "replicas", "version", "metadata.labels", "metadata.annotations", "machineTemplate.infrastructureRef.name"} {
		book = append(book, "builtin.controlPlane."+leaf)
	}
	for _, worker := range []string{"machineDeployment", "machinePool"} {
		for _, leaf := range []string{"class", "name", "replicas", "topologyName", "version", "metadata.labels", "metadata.annotations",
			"bootstrap.configRef.name", "infrastructureRef.name"} {
			book = append(book, "builtin."+worker+"."+leaf)
		}
	}
	for _, ref := range book {
		if msg := variableDefined(ref, nil); msg != "" {
			t.Errorf("%s: %s", ref, msg)
		}
	}
}

// expectErrors fails the test unless errs say each of want, or, for an
// empty want, unless there are no errors.
func expectErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	all := errs.ToAggregate()
	if len(want) == 0 {
		if all != nil {
			t.Fatalf("unexpected errors: %v", all)
		}
		return
	}
	if all == nil {
		t.Fatalf("no errors, want %q", want)
	}
	for _, w := range want {
		if !strings.Contains(all.Error(), w) {
			t.Errorf("errors %q do not say %s", all, w)
		}
	}
}
