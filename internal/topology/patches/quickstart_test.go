package patches

import (
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/topology"
)

// quickStartPatches are the patches of a class in the shape of upstream's
// quick-start class, written for Capstan's kubeadm and local provider kinds:
// registry and image tags of the control plane gated on non-empty
// variables, a Pod Security admission configuration gated on an object
// variable and shaped by the Kubernetes version, failure domains for the
// infrastructure cluster, labels on the control plane's machines and the
// workers' kubelet flags for one of the two worker classes.
const quickStartPatches = `
- name: imageRepository
  description: The registry the control plane pulls its images from.
  enabledIf: '{{ ne .imageRepository "" }}'
  definitions:
  - selector:
      apiVersion: controlplane.cluster.x-k8s.io/v1beta2
      kind: KubeadmControlPlaneTemplate
      matchResources: {controlPlane: true}
    jsonPatches:
    - op: add
      path: /spec/template/spec/kubeadmConfigSpec/clusterConfiguration/imageRepository
      valueFrom: {variable: imageRepository}
- name: etcdImageTag
  enabledIf: '{{ ne .etcdImageTag "" }}'
  definitions:
  - selector:
      apiVersion: controlplane.cluster.x-k8s.io/v1beta2
      kind: KubeadmControlPlaneTemplate
      matchResources: {controlPlane: true}
    jsonPatches:
    - op: add
      path: /spec/template/spec/kubeadmConfigSpec/clusterConfiguration/etcd
      valueFrom:
        template: |
          local:
            imageTag: {{ .etcdImageTag }}
- name: coreDNSImageTag
  enabledIf: '{{ ne .coreDNSImageTag "" }}'
  definitions:
  - selector:
      apiVersion: controlplane.cluster.x-k8s.io/v1beta2
      kind: KubeadmControlPlaneTemplate
      matchResources: {controlPlane: true}
    jsonPatches:
    - op: add
      path: /spec/template/spec/kubeadmConfigSpec/clusterConfiguration/dns
      valueFrom:
        template: |
          imageTag: {{ .coreDNSImageTag }}
- name: failureDomains
  definitions:
  - selector:
      apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
      kind: LocalClusterTemplate
      matchResources: {infrastructureCluster: true}
    jsonPatches:
    - op: add
      path: /spec/template/spec/failureDomains
      valueFrom: {variable: failureDomains}
- name: machineLabels
  definitions:
  - selector:
      apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
      kind: LocalMachineTemplate
      matchResources:
        controlPlane: true
        machineDeploymentClass: {names: ["*-worker"]}
    jsonPatches:
    - op: add
      path: /spec/template/metadata
      valueFrom:
        template: |
          labels:
            example.com/cluster: {{ .builtin.cluster.name }}
            example.com/version: {{ .builtin.cluster.topology.version | replace "+" "_" }}
            {{- if .builtin.machineDeployment }}
            example.com/pool: {{ .builtin.machineDeployment.topologyName }}
            {{- end }}
- name: workerKubeletFlags
  definitions:
  - selector:
      apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
      kind: KubeadmConfigTemplate
      matchResources:
        machineDeploymentClass: {names: [default-worker]}
    jsonPatches:
    - op: add
      path: /spec/template/spec/joinConfiguration/nodeRegistration/kubeletExtraArgs/-
      valueFrom:
        template: |
          name: node-labels
          value: "example.com/pool={{ .builtin.machineDeployment.topologyName }}"
- name: podSecurityStandard
  enabledIf: "{{ .podSecurityStandard.enabled }}"
  definitions:
  - selector:
      apiVersion: controlplane.cluster.x-k8s.io/v1beta2
      kind: KubeadmControlPlaneTemplate
      matchResources: {controlPlane: true}
    jsonPatches:
    - op: add
      path: /spec/template/spec/kubeadmConfigSpec/clusterConfiguration/apiServer/extraArgs
      value:
      - {name: admission-control-config-file, value: /etc/kubernetes/pod-security.yaml}
    - op: add
      path: /spec/template/spec/kubeadmConfigSpec/clusterConfiguration/apiServer/extraVolumes
      value:
      - {name: pod-security, hostPath: /etc/kubernetes/pod-security.yaml, mountPath: /etc/kubernetes/pod-security.yaml, readOnly: true, pathType: File}
    - op: add
      path: /spec/template/spec/kubeadmConfigSpec/files
      valueFrom:
        template: |
          - path: /etc/kubernetes/pod-security.yaml
            content: |
              apiVersion: apiserver.config.k8s.io/v1
              kind: AdmissionConfiguration
              plugins:
              - name: PodSecurity
                configuration:
                  apiVersion: pod-security.admission.config.k8s.io/v1{{ if semverCompare "< v1.25-0" .builtin.controlPlane.version }}beta1{{ end }}
                  kind: PodSecurityConfiguration
                  defaults:
                    enforce: "{{ .podSecurityStandard.enforce }}"
                    audit: "{{ .podSecurityStandard.audit }}"
                    warn: "{{ .podSecurityStandard.warn }}"
`

// The class's templates, as a Cluster's topology clones them.
const (
	quickStartCluster      = `{template: {spec: {}}}`
	quickStartControlPlane = `
template:
  spec:
    kubeadmConfigSpec:
      clusterConfiguration:
        apiServer:
          certSANs: [localhost, 127.0.0.1]
      initConfiguration:
        nodeRegistration:
          kubeletExtraArgs: [{name: eviction-hard, value: "nodefs.available<0%"}]
      joinConfiguration:
        nodeRegistration:
          kubeletExtraArgs: [{name: eviction-hard, value: "nodefs.available<0%"}]`
	quickStartMachine   = `{template: {spec: {}}}`
	quickStartBootstrap = `
template:
  spec:
    joinConfiguration:
      nodeRegistration:
        kubeletExtraArgs: [{name: eviction-hard, value: "nodefs.available<0%"}]`
)

// quickStartTopology is a Cluster of the class with one MachineDeployment of
// each worker class; values are the Cluster's variables (defaults filled)
// and version its Kubernetes version, which builtin variables carry.
func quickStartTopology(t *testing.T, values, version string) []*topology.Template {
	cluster := `cluster: {name: prod, namespace: team-a, topology: {class: quick-start, version: ` + version + `}}`
	global := values + "\nbuiltin: {" + cluster + "}"
	controlPlane := values + "\nbuiltin: {" + cluster + ", controlPlane: {name: prod-cp, replicas: 3, version: " + version + "}}"
	worker := func(class, name string) string {
		return values + "\nbuiltin: {" + cluster + ", machineDeployment: {class: " + class + ", name: prod-" + name + ", topologyName: " + name + ", replicas: 2, version: " + version + "}}"
	}
	withTopology := func(tpl *topology.Template, name string) *topology.Template {
		tpl.Topology = name
		return tpl
	}
	return []*topology.Template{
		newTemplate(t, topology.InfrastructureCluster, "", infraAPIVersion, clusterKind, "quick-start-cluster", quickStartCluster, global),
		newTemplate(t, topology.ControlPlane, "", kcpAPIVersion, kcpKind, "quick-start-control-plane", quickStartControlPlane, controlPlane),
		newTemplate(t, topology.ControlPlaneMachineInfrastructure, "", infraAPIVersion, machineKind, "quick-start-control-plane", quickStartMachine, controlPlane),
		withTopology(newTemplate(t, topology.MachineDeploymentBootstrap, "default-worker", configAPIVersion, configKind, "quick-start-default-worker", quickStartBootstrap, worker("default-worker", "md-0")), "md-0"),
		withTopology(newTemplate(t, topology.MachineDeploymentInfrastructure, "default-worker", infraAPIVersion, machineKind, "quick-start-default-worker", quickStartMachine, worker("default-worker", "md-0")), "md-0"),
		withTopology(newTemplate(t, topology.MachineDeploymentBootstrap, "large-worker", configAPIVersion, configKind, "quick-start-large-worker", quickStartBootstrap, worker("large-worker", "md-1")), "md-1"),
		withTopology(newTemplate(t, topology.MachineDeploymentInfrastructure, "large-worker", infraAPIVersion, machineKind, "quick-start-large-worker", quickStartMachine, worker("large-worker", "md-1")), "md-1"),
	}
}

// typed decodes a patched template into Capstan's type for its kind,
// refusing fields the type does not have: the patches must produce objects
// the API server would store as they are.
func typed[T any](t *testing.T, tpl *topology.Template) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(tpl.Object.Object, out, true); err != nil {
		t.Fatalf("%s %s does not decode into Capstan's type: %v", tpl.Object.GetKind(), tpl.Object.GetName(), err)
	}
	return out
}

func TestApplyQuickStartClass(t *testing.T) {
	const values = `
imageRepository: registry.example.com
etcdImageTag: 3.5.16-0
coreDNSImageTag: v1.11.3
failureDomains: [{name: fd1, controlPlane: true}, {name: fd2, controlPlane: false}]
podSecurityStandard: {enabled: true, enforce: baseline, audit: restricted, warn: restricted}`

	templates := quickStartTopology(t, values, "v1.31.2+build.1")
	if err := Apply(patchesOf(t, quickStartPatches), templates); err != nil {
		t.Fatalf("Apply: %v", err)
	}

	infra := typed[localv1.LocalClusterTemplate](t, templates[0])
	if fds := infra.Spec.Template.Spec.FailureDomains; len(fds) != 2 || fds[0].Name != "fd1" || fds[0].ControlPlane == nil || !*fds[0].ControlPlane {
		t.Errorf("failure domains %+v, want fd1 (control plane) and fd2", fds)
	}

	cp := typed[controlplanev1.KubeadmControlPlaneTemplate](t, templates[1])
	cc := cp.Spec.Template.Spec.KubeadmConfigSpec.ClusterConfiguration
	if cc.ImageRepository != "registry.example.com" || cc.Etcd.Local.ImageTag != "3.5.16-0" || cc.DNS.ImageTag != "v1.11.3" {
		t.Errorf("images: repository %q, etcd %q, coredns %q", cc.ImageRepository, cc.Etcd.Local.ImageTag, cc.DNS.ImageTag)
	}
	if len(cc.APIServer.CertSANs) != 2 {
		t.Errorf("the template's own certSANs were lost: %v", cc.APIServer.CertSANs)
	}
	if len(cc.APIServer.ExtraArgs) != 1 || cc.APIServer.ExtraArgs[0].Name != "admission-control-config-file" ||
		len(cc.APIServer.ExtraVolumes) != 1 || cc.APIServer.ExtraVolumes[0].PathType != "File" {
		t.Errorf("pod security: extraArgs %+v, extraVolumes %+v", cc.APIServer.ExtraArgs, cc.APIServer.ExtraVolumes)
	}
	files := cp.Spec.Template.Spec.KubeadmConfigSpec.Files
	if len(files) != 1 || files[0].Path != "/etc/kubernetes/pod-security.yaml" ||
		!strings.Contains(files[0].Content, "apiVersion: pod-security.admission.config.k8s.io/v1\n") ||
		!strings.Contains(files[0].Content, `enforce: "baseline"`) {
		t.Errorf("pod security file %+v", files)
	}

	wantLabels := map[string]string{
		"quick-start-control-plane":  "prod v1.31.2_build.1 ",
		"quick-start-default-worker": "prod v1.31.2_build.1 md-0",
		"quick-start-large-worker":   "prod v1.31.2_build.1 md-1",
	}
	for _, tpl := range []*topology.Template{templates[2], templates[4], templates[6]} {
		l := typed[localv1.LocalMachineTemplate](t, tpl).Spec.Template.ObjectMeta.Labels
		got := l["example.com/cluster"] + " " + l["example.com/version"] + " " + l["example.com/pool"]
		if got != wantLabels[tpl.Object.GetName()] {
			t.Errorf("%s: labels %v", tpl.Object.GetName(), l)
		}
	}

	defaultArgs := typed[bootstrapv1.KubeadmConfigTemplate](t, templates[3]).Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs
	if len(defaultArgs) != 2 || defaultArgs[1].Name != "node-labels" || defaultArgs[1].Value == nil || *defaultArgs[1].Value != "example.com/pool=md-0" {
		t.Errorf("default-worker kubelet flags %+v", defaultArgs)
	}
	if largeArgs := typed[bootstrapv1.KubeadmConfigTemplate](t, templates[5]).Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs; len(largeArgs) != 1 {
		t.Errorf("large-worker kubelet flags %+v: the patch selects default-worker only", largeArgs)
	}
}

// quickStartDefaults are the class's variables at their defaults (empty
// registry and tags, no failure domains) with podSecurityStandard as given.
func quickStartDefaults(podSecurityStandard string) string {
	return `
imageRepository: ""
etcdImageTag: ""
coreDNSImageTag: ""
failureDomains: []
podSecurityStandard: ` + podSecurityStandard
}

// Before Kubernetes 1.25 the Pod Security configuration is v1beta1.
func TestApplyQuickStartClassOldVersion(t *testing.T) {
	templates := quickStartTopology(t, quickStartDefaults(`{enabled: true, enforce: privileged, audit: baseline, warn: baseline}`), "v1.24.17")
	if err := Apply(patchesOf(t, quickStartPatches), templates); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	files := typed[controlplanev1.KubeadmControlPlaneTemplate](t, templates[1]).Spec.Template.Spec.KubeadmConfigSpec.Files
	if len(files) != 1 || !strings.Contains(files[0].Content, "apiVersion: pod-security.admission.config.k8s.io/v1beta1\n") ||
		!strings.Contains(files[0].Content, `enforce: "privileged"`) {
		t.Errorf("pod security file %+v", files)
	}
}

// With the variables at their empty defaults and Pod Security off, the
// gated patches leave the control plane template as the class wrote it.
func TestApplyQuickStartClassGatedOff(t *testing.T) {
	templates := quickStartTopology(t, quickStartDefaults(`{enabled: false, enforce: baseline, audit: restricted, warn: restricted}`), "v1.31.2")
	before := asJSON(t, templates[1].Object.Object)
	if err := Apply(patchesOf(t, quickStartPatches), templates); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if after := asJSON(t, templates[1].Object.Object); after != before {
		t.Errorf("the control plane template changed:\n before %s\n after  %s", before, after)
	}
	// The ungated patches still apply.
	if l := typed[localv1.LocalMachineTemplate](t, templates[4]).Spec.Template.ObjectMeta.Labels; l["example.com/pool"] != "md-0" {
		t.Errorf("md-0 machine labels %v", l)
	}
}

// What one reconcile of a topology Cluster of the quick-start class spends
// applying its patches.
func BenchmarkApplyQuickStartClass(b *testing.B) {
	t := &testing.T{}
	values := quickStartDefaults(`{enabled: true, enforce: baseline, audit: restricted, warn: restricted}`)
	patches := patchesOf(t, quickStartPatches)
	for b.Loop() {
		b.StopTimer()
		templates := quickStartTopology(t, values, "v1.31.2")
		b.StartTimer()
		if err := Apply(patches, templates); err != nil {
			b.Fatal(err)
		}
	}
}

// Clusters are reconciled in parallel: Apply shares its parsed templates
// between calls, and must give each call the same result (run with -race).
func TestApplyConcurrently(t *testing.T) {
	patches := patchesOf(t, quickStartPatches)
	values := quickStartDefaults(`{enabled: true, enforce: baseline, audit: restricted, warn: restricted}`)
	want := quickStartTopology(t, values, "v1.31.2")
	if err := Apply(patches, want); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	var wg sync.WaitGroup
	results := make([][]*topology.Template, 8)
	for i := range results {
		results[i] = quickStartTopology(t, values, "v1.31.2")
		wg.Go(func() {
			if err := Apply(patches, results[i]); err != nil {
				t.Errorf("Apply %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i, templates := range results {
		for j := range templates {
			if got, w := asJSON(t, templates[j].Object.Object), asJSON(t, want[j].Object.Object); got != w {
				t.Errorf("call %d, template %d:\n got %s\nwant %s", i, j, got, w)
			}
		}
	}
}
