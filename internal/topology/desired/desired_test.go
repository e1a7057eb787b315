package desired_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/topology/desired"
	"capstan.dev/capstan/internal/topology/patches"
)

const (
	owned          = clusterv1.ClusterTopologyOwnedLabel
	clusterName    = clusterv1.ClusterNameLabel
	deploymentName = clusterv1.ClusterTopologyMachineDeploymentNameLabel
	poolName       = clusterv1.ClusterTopologyMachinePoolNameLabel
	clonedFromName = clusterv1.TemplateClonedFromNameAnnotation
	clonedFromKind = clusterv1.TemplateClonedFromGroupKindAnnotation
)

func compute(t *testing.T, in desired.Input) *desired.State {
	t.Helper()
	s, err := desired.Compute(in)
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	return s
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %#v\nwant %#v", what, got, want)
	}
}

func clusterOwner() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c1", UID: "22222222-0000-0000-0000-000000000002"}}
}

// The first reconcile: every object named from the naming templates (and
// the known random sequence), labelled and annotated as upstream does, the
// references between them and on the Cluster set, the patches applied.
func TestFirstCompute(t *testing.T) {
	s := compute(t, quickStart(t))

	// The Cluster.
	equal(t, "cluster infrastructureRef", s.Cluster.Spec.InfrastructureRef,
		clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalCluster", Name: "c1-r0001"})
	equal(t, "cluster controlPlaneRef", s.Cluster.Spec.ControlPlaneRef,
		clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "c1-r0002"})
	equal(t, "cluster labels", s.Cluster.Labels, map[string]string{"team": "blue", clusterName: "c1", owned: ""})

	// The infrastructure cluster: the template's spec.template, no owner
	// (the Cluster controller adopts it once referenced).
	infra := s.InfrastructureCluster
	equal(t, "infrastructure cluster identity", []string{infra.GetAPIVersion(), infra.GetKind(), infra.GetNamespace(), infra.GetName()},
		[]string{"infrastructure.cluster.x-k8s.io/v1beta2", "LocalCluster", "ns1", "c1-r0001"})
	equal(t, "infrastructure cluster labels", infra.GetLabels(), map[string]string{"from-template": "cluster", clusterName: "c1", owned: ""})
	equal(t, "infrastructure cluster annotations", infra.GetAnnotations(), map[string]string{
		clonedFromName: "quick-start-cluster", clonedFromKind: "LocalClusterTemplate.infrastructure.cluster.x-k8s.io"})
	equal(t, "infrastructure cluster owners", infra.GetOwnerReferences(), []metav1.OwnerReference(nil))
	equal(t, "infrastructure cluster failure domains", nested(t, infra, "spec", "failureDomains"),
		[]any{map[string]any{"name": "fd1", "controlPlane": true}})

	// The control plane: class metadata under the topology's, the fields
	// the topology sets where the control plane contract puts them, the
	// patches' results.
	cp := s.ControlPlane
	equal(t, "control plane identity", []string{cp.GetAPIVersion(), cp.GetKind(), cp.GetName()},
		[]string{"controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane", "c1-r0002"})
	cpLabels := map[string]string{"class-cp": "yes", "shared": "from-topology", "topology-cp": "yes", clusterName: "c1", owned: ""}
	equal(t, "control plane labels", cp.GetLabels(), cpLabels)
	equal(t, "control plane annotations", cp.GetAnnotations(), map[string]string{"class-cp-note": "yes",
		clonedFromName: "quick-start-control-plane", clonedFromKind: "KubeadmControlPlaneTemplate.controlplane.cluster.x-k8s.io"})
	equal(t, "control plane version", nested(t, cp, "spec", "version"), "v1.33.1")
	equal(t, "control plane replicas", nested(t, cp, "spec", "replicas"), int64(3))
	equal(t, "control plane infrastructureRef", nested(t, cp, "spec", "machineTemplate", "spec", "infrastructureRef"),
		map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "LocalMachineTemplate", "name": "c1-r0003"})
	equal(t, "control plane machine labels", nested(t, cp, "spec", "machineTemplate", "metadata", "labels"), map[string]any{
		"from-template": "machines", "class-cp": "yes", "shared": "from-topology", "topology-cp": "yes", clusterName: "c1", owned: ""})
	equal(t, "control plane machine annotations", nested(t, cp, "spec", "machineTemplate", "metadata", "annotations"), map[string]any{"class-cp-note": "yes"})
	equal(t, "control plane taints (class)", nested(t, cp, "spec", "machineTemplate", "spec", "taints"),
		[]any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule", "propagation": "OnInitialization"}})
	equal(t, "control plane drain timeout (class)", nested(t, cp, "spec", "machineTemplate", "spec", "deletion", "nodeDrainTimeoutSeconds"), int64(60))
	equal(t, "control plane readiness gates (none)", nested(t, cp, "spec", "machineTemplate", "spec", "readinessGates"), nil)
	equal(t, "imageRepository patch (variable default)", nested(t, cp, "spec", "kubeadmConfigSpec", "clusterConfiguration", "imageRepository"), "registry.k8s.io")
	equal(t, "etcdImageRepository patch (enabledIf false)", nested(t, cp, "spec", "kubeadmConfigSpec", "clusterConfiguration", "etcd"), nil)
	equal(t, "podSecurityStandard patch (object default filled, value set)", nested(t, cp, "spec", "kubeadmConfigSpec", "clusterConfiguration", "apiServer"),
		map[string]any{"certSANs": []any{"localhost"}, "extraArgs": []any{map[string]any{"name": "admission-control-config-file", "value": "/etc/kubernetes/pss-restricted.yaml"}}})

	// The control plane's machine template: the Cluster's own copy.
	cpmi := s.ControlPlaneMachineInfrastructure
	equal(t, "control plane machine template identity", []string{cpmi.GetKind(), cpmi.GetNamespace(), cpmi.GetName()}, []string{"LocalMachineTemplate", "ns1", "c1-r0003"})
	equal(t, "control plane machine template labels", cpmi.GetLabels(), map[string]string{"template-label": "cp-machines", clusterName: "c1", owned: ""})
	equal(t, "control plane machine template annotations", cpmi.GetAnnotations(), map[string]string{
		clonedFromName: "quick-start-control-plane", clonedFromKind: "LocalMachineTemplate.infrastructure.cluster.x-k8s.io"})
	equal(t, "control plane machine template owners", cpmi.GetOwnerReferences(), clusterOwner())
	if cpmi.GetUID() != "" || cpmi.GetResourceVersion() != "" {
		t.Errorf("the copy carries the class template's uid or resourceVersion: %v", cpmi.Object["metadata"])
	}

	// The control plane's health check, from the class.
	mhc := s.ControlPlaneHealthCheck
	if mhc == nil {
		t.Fatal("no control plane MachineHealthCheck, the class defines one")
	}
	equal(t, "control plane MHC name", mhc.Name, "c1-r0002")
	equal(t, "control plane MHC selector", mhc.Spec.Selector.MatchLabels, map[string]string{owned: "", clusterv1.MachineControlPlaneLabel: ""})
	equal(t, "control plane MHC labels", mhc.Labels, map[string]string{owned: "", clusterName: "c1"})
	equal(t, "control plane MHC owners", mhc.OwnerReferences, clusterOwner())
	equal(t, "control plane MHC node startup (defaulted)", *mhc.Spec.Checks.NodeStartupTimeoutSeconds, clusterv1.DefaultNodeStartupTimeoutSeconds)
	equal(t, "control plane MHC conditions", len(mhc.Spec.Checks.UnhealthyNodeConditions), 2)

	// MachineDeployment md-0 (default-worker).
	md := s.MachineDeployments["md-0"]
	mdLabels := map[string]string{"class-md": "yes", "shared": "from-topology", clusterName: "c1", owned: "", deploymentName: "md-0"}
	equal(t, "md-0 name", md.Object.Name, "c1-md-0-r0004")
	equal(t, "md-0 labels", md.Object.Labels, mdLabels)
	equal(t, "md-0 machine labels", md.Object.Spec.Template.Labels, mdLabels)
	equal(t, "md-0 annotations (no upgrade annotations)", md.Object.Annotations, map[string]string{"topology-note": "yes"})
	equal(t, "md-0 selector", md.Object.Spec.Selector.MatchLabels, map[string]string{clusterName: "c1", owned: "", deploymentName: "md-0"})
	equal(t, "md-0 replicas", md.Object.Spec.Replicas, ptr.To[int32](2))
	equal(t, "md-0 version", md.Object.Spec.Template.Spec.Version, "v1.33.1")
	equal(t, "md-0 bootstrap ref", md.Object.Spec.Template.Spec.Bootstrap.ConfigRef,
		clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate", Name: "c1-md-0-r0005"})
	equal(t, "md-0 infrastructure ref", md.Object.Spec.Template.Spec.InfrastructureRef,
		clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalMachineTemplate", Name: "c1-md-0-r0006"})
	equal(t, "md-0 minReadySeconds (class)", md.Object.Spec.Template.Spec.MinReadySeconds, ptr.To[int32](5))
	equal(t, "md-0 rollout (class)", md.Object.Spec.Rollout.Strategy, clusterv1.MachineDeploymentRolloutStrategy{
		Type: "RollingUpdate", RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{MaxSurge: ptr.To(intstr.FromInt32(2))}})
	equal(t, "md-0 maxInFlight (class)", md.Object.Spec.Remediation.MaxInFlight, ptr.To(intstr.FromInt32(2)))
	equal(t, "md-0 owners (the MachineDeployment controller adopts it)", md.Object.OwnerReferences, []metav1.OwnerReference(nil))
	equal(t, "md-0 bootstrap template labels", md.Bootstrap.GetLabels(), map[string]string{clusterName: "c1", owned: "", deploymentName: "md-0"})
	equal(t, "md-0 bootstrap template owners", md.Bootstrap.GetOwnerReferences(), clusterOwner())
	equal(t, "md-0 builtin version patch", nested(t, md.Bootstrap, "spec", "template", "spec", "joinConfiguration", "nodeRegistration", "taints"),
		[]any{map[string]any{"key": "topology-version", "value": "v1.33.1", "effect": "PreferNoSchedule"}})
	equal(t, "md-0 kubelet patch (no log level set)", nested(t, md.Bootstrap, "spec", "template", "spec", "joinConfiguration", "nodeRegistration", "kubeletExtraArgs"), nil)
	if md.HealthCheck == nil {
		t.Fatal("no md-0 MachineHealthCheck, the class defines one")
	}
	equal(t, "md-0 MHC", []any{md.HealthCheck.Name, md.HealthCheck.Spec.Selector.MatchLabels, *md.HealthCheck.Spec.Checks.NodeStartupTimeoutSeconds, md.HealthCheck.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo},
		[]any{"c1-md-0-r0004", map[string]string{owned: "", deploymentName: "md-0"}, int32(900), ptr.To(intstr.FromString("40%"))})

	// MachineDeployment gpu (gpu-worker): the class's naming template.
	gpu := s.MachineDeployments["gpu"]
	equal(t, "gpu names", []string{gpu.Object.Name, gpu.Bootstrap.GetName(), gpu.Infrastructure.GetName()}, []string{"c1-gpu-gpu-r0007", "c1-gpu-r0008", "c1-gpu-r0009"})
	equal(t, "gpu failure domain (class)", gpu.Object.Spec.Template.Spec.FailureDomain, "fd-gpu")
	equal(t, "gpu deletion order (class)", gpu.Object.Spec.Deletion.Order, clusterv1.MachineSetDeletionOrder("Oldest"))
	equal(t, "gpu labels (no class metadata)", gpu.Object.Labels, map[string]string{clusterName: "c1", owned: "", deploymentName: "gpu"})
	if gpu.HealthCheck != nil {
		t.Errorf("gpu has a MachineHealthCheck; neither its class nor its topology defines one")
	}
	equal(t, "gpu kubelet args kept, builtin patch added", nested(t, gpu.Bootstrap, "spec", "template", "spec", "joinConfiguration", "nodeRegistration"), map[string]any{
		"kubeletExtraArgs": []any{map[string]any{"name": "feature-gates", "value": "DevicePlugins=true"}},
		"taints":           []any{map[string]any{"key": "topology-version", "value": "v1.33.1", "effect": "PreferNoSchedule"}},
	})

	// MachinePool mp-0: objects made from the templates, not copies of them.
	mp := s.MachinePools["mp-0"]
	equal(t, "mp-0 names", []string{mp.Object.Name, mp.Bootstrap.GetName(), mp.Infrastructure.GetName()}, []string{"c1-mp-0-r0010", "c1-mp-0-r0011", "c1-mp-0-r0012"})
	equal(t, "mp-0 bootstrap kind", mp.Bootstrap.GetKind(), "KubeadmConfig")
	equal(t, "mp-0 bootstrap labels", mp.Bootstrap.GetLabels(), map[string]string{clusterName: "c1", owned: "", poolName: "mp-0"})
	equal(t, "mp-0 bootstrap owners", mp.Bootstrap.GetOwnerReferences(), clusterOwner())
	equal(t, "mp-0 bootstrap spec", nested(t, mp.Bootstrap, "spec"), map[string]any{"joinConfiguration": map[string]any{"nodeRegistration": map[string]any{"imagePullPolicy": "IfNotPresent"}}})
	equal(t, "mp-0 refs", []clusterv1.ContractVersionedObjectReference{mp.Object.Spec.Template.Spec.Bootstrap.ConfigRef, mp.Object.Spec.Template.Spec.InfrastructureRef},
		[]clusterv1.ContractVersionedObjectReference{
			{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: "c1-mp-0-r0011"},
			{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalMachinePool", Name: "c1-mp-0-r0012"}})
	equal(t, "mp-0 labels", mp.Object.Labels, map[string]string{clusterName: "c1", owned: "", poolName: "mp-0"})
	equal(t, "mp-0 failure domains (class)", mp.Object.Spec.FailureDomains, []string{"fd1", "fd2"})
	equal(t, "mp-0 version", mp.Object.Spec.Template.Spec.Version, "v1.33.1")

	// The class's templates are not changed by the computation.
	in := quickStart(t)
	for key, tmpl := range quickStart(t).ClassTemplates {
		equal(t, "class template "+key.Name, tmpl.Object, in.ClassTemplates[key].Object)
	}
}

// Computing again from what the first computation made changes nothing:
// the same names (no rotation: the server's defaults in a template do not
// count as a change), the same objects.
func TestRecomputeIsStable(t *testing.T) {
	first := compute(t, quickStart(t))
	in := quickStart(t)
	in.Cluster = first.Cluster
	in.Current = asCurrent(first)
	second := compute(t, in)

	equal(t, "infrastructure cluster", second.InfrastructureCluster, first.InfrastructureCluster)
	equal(t, "control plane", second.ControlPlane, first.ControlPlane)
	equal(t, "control plane machine template", second.ControlPlaneMachineInfrastructure, first.ControlPlaneMachineInfrastructure)
	equal(t, "control plane health check", second.ControlPlaneHealthCheck, first.ControlPlaneHealthCheck)
	equal(t, "machine deployments", second.MachineDeployments, first.MachineDeployments)
	equal(t, "machine pools", second.MachinePools, first.MachinePools)
	equal(t, "cluster references", []clusterv1.ContractVersionedObjectReference{second.Cluster.Spec.InfrastructureRef, second.Cluster.Spec.ControlPlaneRef},
		[]clusterv1.ContractVersionedObjectReference{first.Cluster.Spec.InfrastructureRef, first.Cluster.Spec.ControlPlaneRef})
}

// recompute is a second reconcile after the first one's objects exist,
// with change applied to the Cluster and class first.
func recompute(t *testing.T, change func(in *desired.Input)) (first, second *desired.State) {
	t.Helper()
	first = compute(t, quickStart(t))
	in := quickStart(t)
	in.Cluster = first.Cluster
	in.Current = asCurrent(first)
	change(&in)
	return first, compute(t, in)
}

func setVariable(in *desired.Input, name, value string) {
	vars := in.Cluster.Spec.Topology.Variables
	for i := range vars {
		if vars[i].Name == name {
			vars[i].Value.Raw = []byte(value)
			return
		}
	}
	in.Cluster.Spec.Topology.Variables = append(vars, clusterv1.ClusterVariable{Name: name, Value: apiextJSON(value)})
}

// A changed variable rotates exactly the templates its patches change; the
// objects that are not templates change in place.
func TestChangedVariableRotatesPatchedTemplates(t *testing.T) {
	first, second := recompute(t, func(in *desired.Input) {
		setVariable(in, "kubeletLogLevel", "4")                // default-worker's bootstrap template
		setVariable(in, "imageRepository", `"mirror.example"`) // the control plane (not a template)
	})
	md, before := second.MachineDeployments["md-0"], first.MachineDeployments["md-0"]
	equal(t, "md-0 bootstrap template rotated", md.Bootstrap.GetName(), "c1-md-0-r0001")
	equal(t, "md-0 refers to the new template", md.Object.Spec.Template.Spec.Bootstrap.ConfigRef.Name, "c1-md-0-r0001")
	equal(t, "md-0 kubelet patch", nested(t, md.Bootstrap, "spec", "template", "spec", "joinConfiguration", "nodeRegistration", "kubeletExtraArgs"),
		[]any{map[string]any{"name": "v", "value": "4"}})
	equal(t, "md-0 infrastructure template kept", md.Infrastructure.GetName(), before.Infrastructure.GetName())
	equal(t, "md-0 kept its name", md.Object.Name, before.Object.Name)
	equal(t, "gpu templates kept (its class is not selected)",
		[]string{second.MachineDeployments["gpu"].Bootstrap.GetName(), second.MachineDeployments["gpu"].Infrastructure.GetName()},
		[]string{first.MachineDeployments["gpu"].Bootstrap.GetName(), first.MachineDeployments["gpu"].Infrastructure.GetName()})
	equal(t, "control plane machine template kept", second.ControlPlaneMachineInfrastructure.GetName(), first.ControlPlaneMachineInfrastructure.GetName())
	equal(t, "control plane kept its name", second.ControlPlane.GetName(), first.ControlPlane.GetName())
	equal(t, "control plane patched in place", nested(t, second.ControlPlane, "spec", "kubeadmConfigSpec", "clusterConfiguration", "imageRepository"), "mirror.example")
}

// A patch that no longer applies (enabledIf turns false) removes a field:
// with the topology's field manager, the field the topology applied before
// rotates the template; without it, the server's copy is trusted.
func TestPatchSwitchedOffRotatesWithFieldManager(t *testing.T) {
	for _, tt := range []struct {
		name    string
		manager string
		rotated bool
	}{
		{name: "field manager known", manager: "capstan-topology", rotated: true},
		{name: "field manager unknown", manager: "", rotated: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := quickStart(t)
			setVariable(&start, "kubeletLogLevel", "4")
			first := compute(t, start)

			in := quickStart(t)
			in.FieldManager = tt.manager
			in.Cluster = first.Cluster.DeepCopy()
			in.Cluster.Spec.Topology.Variables = start.Cluster.Spec.Topology.Variables[:1] // kubeletLogLevel unset
			in.Current = asCurrent(first)
			in.Current.MachineDeployments["md-0"].Bootstrap.SetManagedFields([]metav1.ManagedFieldsEntry{{
				Manager: "capstan-topology", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}},"f:spec":{"f:template":{"f:spec":{"f:joinConfiguration":{"f:nodeRegistration":{
					"f:kubeletExtraArgs":{"k:{\"name\":\"v\"}":{".":{},"f:name":{},"f:value":{}}},
					"f:taints":{}}}}}}}`)},
			}})
			second := compute(t, in)
			old, now := first.MachineDeployments["md-0"].Bootstrap.GetName(), second.MachineDeployments["md-0"].Bootstrap.GetName()
			if (old != now) != tt.rotated {
				t.Errorf("bootstrap template %s became %s; rotation wanted: %v", old, now, tt.rotated)
			}
			equal(t, "infrastructure template kept", second.MachineDeployments["md-0"].Infrastructure.GetName(), first.MachineDeployments["md-0"].Infrastructure.GetName())
		})
	}
}

// MachineDeployments appear and disappear as the topology lists them; the
// others keep their names and templates.
func TestAddAndRemoveMachineDeployments(t *testing.T) {
	first, second := recompute(t, func(in *desired.Input) {
		workers := &in.Cluster.Spec.Topology.Workers
		workers.MachineDeployments = append(workers.MachineDeployments[:1], clusterv1.MachineDeploymentTopology{Class: "default-worker", Name: "md-1"})
	})
	if _, ok := second.MachineDeployments["gpu"]; ok {
		t.Error("gpu is still desired after its removal from the topology")
	}
	equal(t, "md-0 kept", second.MachineDeployments["md-0"], first.MachineDeployments["md-0"])
	md1 := second.MachineDeployments["md-1"]
	if md1 == nil {
		t.Fatal("md-1 not desired")
	}
	equal(t, "md-1 names", []string{md1.Object.Name, md1.Bootstrap.GetName(), md1.Infrastructure.GetName()}, []string{"c1-md-1-r0001", "c1-md-1-r0002", "c1-md-1-r0003"})
	equal(t, "md-1 replicas (unset: left to the MachineDeployment)", md1.Object.Spec.Replicas, (*int32)(nil))
	equal(t, "md-1 labels", md1.Object.Labels, map[string]string{"class-md": "yes", "shared": "from-class", clusterName: "c1", owned: "", deploymentName: "md-1"})
}

// Scaling through the topology sets the replicas and nothing else.
func TestReplicas(t *testing.T) {
	first, second := recompute(t, func(in *desired.Input) {
		in.Cluster.Spec.Topology.ControlPlane.Replicas = nil
		in.Cluster.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](5)
		in.Cluster.Spec.Topology.Workers.MachinePools[0].Replicas = ptr.To[int32](3)
	})
	equal(t, "control plane replicas left out", nested(t, second.ControlPlane, "spec", "replicas"), nil)
	equal(t, "md-0 replicas", second.MachineDeployments["md-0"].Object.Spec.Replicas, ptr.To[int32](5))
	equal(t, "mp-0 replicas", second.MachinePools["mp-0"].Object.Spec.Replicas, ptr.To[int32](3))
	equal(t, "md-0 templates kept", second.MachineDeployments["md-0"].Bootstrap.GetName(), first.MachineDeployments["md-0"].Bootstrap.GetName())
}

// The topology's metadata wins over the class's; the upgrade annotations
// stay on the topology.
func TestMetadataMerge(t *testing.T) {
	in := quickStart(t)
	md := &in.Cluster.Spec.Topology.Workers.MachineDeployments[0]
	md.Metadata.Labels["class-md"] = "overridden"
	md.Metadata.Annotations[clusterv1.ClusterTopologyHoldUpgradeSequenceAnnotation] = ""
	in.Class.Spec.Workers.MachineDeployments[0].Metadata.Annotations = map[string]string{"class-note": "a", "topology-note": "class"}
	in.Cluster.Spec.Topology.Workers.MachinePools[0].Metadata = clusterv1.ObjectMeta{Labels: map[string]string{"pool": "yes"}, Annotations: map[string]string{clusterv1.ClusterTopologyDeferUpgradeAnnotation: ""}}
	s := compute(t, in)
	got := s.MachineDeployments["md-0"].Object
	equal(t, "md-0 labels", got.Labels, map[string]string{"class-md": "overridden", "shared": "from-topology", clusterName: "c1", owned: "", deploymentName: "md-0"})
	equal(t, "md-0 annotations", got.Annotations, map[string]string{"class-note": "a", "topology-note": "yes"})
	equal(t, "md-0 machine annotations", got.Spec.Template.Annotations, got.Annotations)
	mp := s.MachinePools["mp-0"].Object
	equal(t, "mp-0 labels", mp.Labels, map[string]string{"pool": "yes", clusterName: "c1", owned: "", poolName: "mp-0"})
	equal(t, "mp-0 annotations", mp.Annotations, map[string]string{})
}

// A topology health check replaces the class's (checks and remediation
// together); enabled turns one off, and on only when something defines it.
func TestHealthCheckMerge(t *testing.T) {
	topologyChecks := clusterv1.MachineDeploymentTopologyHealthCheck{Checks: clusterv1.MachineDeploymentTopologyHealthCheckChecks{
		UnhealthyMachineConditions: []clusterv1.UnhealthyMachineCondition{{Type: "Healthy", Status: "False", TimeoutSeconds: ptr.To[int32](60)}},
	}}
	for _, tt := range []struct {
		name       string
		md         string
		change     func(in *desired.Input, md *clusterv1.MachineDeploymentTopology)
		wantNone   bool
		wantChecks clusterv1.MachineHealthCheckChecks
		wantRemedy clusterv1.MachineHealthCheckRemediation
	}{
		{
			name: "class only", md: "md-0", change: func(*desired.Input, *clusterv1.MachineDeploymentTopology) {},
			wantChecks: clusterv1.MachineHealthCheckChecks{NodeStartupTimeoutSeconds: ptr.To[int32](900),
				UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{{Type: "Ready", Status: "Unknown", TimeoutSeconds: ptr.To[int32](300)}}},
			wantRemedy: clusterv1.MachineHealthCheckRemediation{TriggerIf: clusterv1.MachineHealthCheckRemediationTriggerIf{UnhealthyLessThanOrEqualTo: ptr.To(intstr.FromString("40%"))}},
		},
		{
			name: "topology replaces checks and remediation", md: "md-0",
			change: func(_ *desired.Input, md *clusterv1.MachineDeploymentTopology) { md.HealthCheck = topologyChecks },
			wantChecks: clusterv1.MachineHealthCheckChecks{NodeStartupTimeoutSeconds: ptr.To(clusterv1.DefaultNodeStartupTimeoutSeconds),
				UnhealthyMachineConditions: topologyChecks.Checks.UnhealthyMachineConditions},
		},
		{
			name: "topology turns the class's off", md: "md-0", wantNone: true,
			change: func(_ *desired.Input, md *clusterv1.MachineDeploymentTopology) {
				md.HealthCheck.Enabled = ptr.To(false)
			},
		},
		{
			name: "enabled with nothing defined makes none", md: "gpu", wantNone: true,
			change: func(_ *desired.Input, md *clusterv1.MachineDeploymentTopology) { md.HealthCheck.Enabled = ptr.To(true) },
		},
		{
			name: "topology only", md: "gpu",
			change: func(_ *desired.Input, md *clusterv1.MachineDeploymentTopology) { md.HealthCheck = topologyChecks },
			wantChecks: clusterv1.MachineHealthCheckChecks{NodeStartupTimeoutSeconds: ptr.To(clusterv1.DefaultNodeStartupTimeoutSeconds),
				UnhealthyMachineConditions: topologyChecks.Checks.UnhealthyMachineConditions},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := quickStart(t)
			for i := range in.Cluster.Spec.Topology.Workers.MachineDeployments {
				if md := &in.Cluster.Spec.Topology.Workers.MachineDeployments[i]; md.Name == tt.md {
					tt.change(&in, md)
				}
			}
			got := compute(t, in).MachineDeployments[tt.md].HealthCheck
			if tt.wantNone {
				if got != nil {
					t.Fatalf("a MachineHealthCheck: %+v", got.Spec)
				}
				return
			}
			if got == nil {
				t.Fatal("no MachineHealthCheck")
			}
			equal(t, "checks", got.Spec.Checks, tt.wantChecks)
			equal(t, "remediation", got.Spec.Remediation, tt.wantRemedy)
		})
	}

	t.Run("control plane: topology turns it off", func(t *testing.T) {
		in := quickStart(t)
		in.Cluster.Spec.Topology.ControlPlane.HealthCheck.Enabled = ptr.To(false)
		if got := compute(t, in).ControlPlaneHealthCheck; got != nil {
			t.Errorf("a control plane MachineHealthCheck: %+v", got.Spec)
		}
	})
	t.Run("control plane: none without machines", func(t *testing.T) {
		in := quickStart(t)
		in.Class.Spec.ControlPlane.MachineInfrastructure = clusterv1.ControlPlaneClassMachineInfrastructureTemplate{}
		s := compute(t, in)
		if s.ControlPlaneHealthCheck != nil || s.ControlPlaneMachineInfrastructure != nil {
			t.Errorf("a control plane without machines got a health check or a machine template")
		}
		equal(t, "no infrastructureRef", nested(t, s.ControlPlane, "spec", "machineTemplate", "spec", "infrastructureRef"), nil)
	})
	t.Run("control plane: topology remediation", func(t *testing.T) {
		in := quickStart(t)
		in.Cluster.Spec.Topology.ControlPlane.HealthCheck.Remediation.TriggerIf.UnhealthyInRange = "[1-2]"
		got := compute(t, in).ControlPlaneHealthCheck
		equal(t, "remediation", got.Spec.Remediation.TriggerIf.UnhealthyInRange, "[1-2]")
		equal(t, "class checks replaced", got.Spec.Checks.UnhealthyNodeConditions, []clusterv1.UnhealthyNodeCondition(nil))
	})
}

// Deletion, taints, readiness gates, minReadySeconds, failure domains and
// rollout: the topology's value wins over the class's.
func TestTopologyOverridesClassSettings(t *testing.T) {
	in := quickStart(t)
	topo := &in.Cluster.Spec.Topology
	topo.ControlPlane.Deletion.NodeDrainTimeoutSeconds = ptr.To[int32](5)
	topo.ControlPlane.Deletion.NodeDeletionTimeoutSeconds = ptr.To[int32](7)
	topo.ControlPlane.ReadinessGates = []clusterv1.MachineReadinessGate{{ConditionType: "NetworkReady"}}
	topo.ControlPlane.Rollout.After = metav1.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	md := &topo.Workers.MachineDeployments[0]
	md.MinReadySeconds = ptr.To[int32](0)
	md.FailureDomain = "fd2"
	md.Taints = []clusterv1.MachineTaint{{Key: "k", Value: "v", Effect: "NoExecute", Propagation: "Always"}}
	md.Rollout = clusterv1.MachineDeploymentTopologyRolloutSpec{Strategy: clusterv1.MachineDeploymentTopologyRolloutStrategy{Type: "OnDelete"}}
	md.Deletion.NodeVolumeDetachTimeoutSeconds = ptr.To[int32](9)
	topo.Workers.MachinePools[0].FailureDomains = []string{"fd3"}
	s := compute(t, in)

	cp := s.ControlPlane
	equal(t, "cp deletion", nested(t, cp, "spec", "machineTemplate", "spec", "deletion"), map[string]any{"nodeDrainTimeoutSeconds": int64(5), "nodeDeletionTimeoutSeconds": int64(7)})
	equal(t, "cp readiness gates", nested(t, cp, "spec", "machineTemplate", "spec", "readinessGates"), []any{map[string]any{"conditionType": "NetworkReady"}})
	equal(t, "cp rollout after", nested(t, cp, "spec", "rollout", "after"), "2026-01-02T03:04:05Z")
	got := s.MachineDeployments["md-0"].Object.Spec
	equal(t, "md minReadySeconds", got.Template.Spec.MinReadySeconds, ptr.To[int32](0))
	equal(t, "md failure domain", got.Template.Spec.FailureDomain, "fd2")
	equal(t, "md taints", got.Template.Spec.Taints, md.Taints)
	equal(t, "md rollout (the topology's replaces the class's)", got.Rollout, clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{Type: "OnDelete"}})
	equal(t, "md deletion", got.Template.Spec.Deletion, clusterv1.MachineDeletionSpec{NodeVolumeDetachTimeoutSeconds: ptr.To[int32](9)})
	equal(t, "mp failure domains", s.MachinePools["mp-0"].Object.Spec.FailureDomains, []string{"fd3"})
}

func TestNamingTemplates(t *testing.T) {
	t.Run("class templates", func(t *testing.T) {
		in := quickStart(t)
		in.Class.Spec.Infrastructure.Naming.Template = "{{ .cluster.name }}-infra"
		in.Class.Spec.ControlPlane.Naming.Template = "cp-{{ .cluster.name }}-{{ .random }}"
		in.Class.Spec.Workers.MachinePools[0].Naming.Template = "{{ .machinePool.topologyName }}-of-{{ .cluster.name }}"
		s := compute(t, in)
		equal(t, "names", []string{s.InfrastructureCluster.GetName(), s.ControlPlane.GetName(), s.MachinePools["mp-0"].Object.Name},
			[]string{"c1-infra", "cp-c1-r0002", "mp-0-of-c1"}) // .random is drawn for every template, used or not
	})
	t.Run("long names are cut and made unique", func(t *testing.T) {
		in := quickStart(t)
		in.Cluster.Name = strings.Repeat("c", 60)
		s := compute(t, in)
		name := s.MachineDeployments["md-0"].Object.Name
		if len(name) != 63 || !strings.HasPrefix(name, strings.Repeat("c", 58)) {
			t.Errorf("name %q: want 58 characters of the rendered name and a random suffix", name)
		}
		if s.InfrastructureCluster.GetName() == s.ControlPlane.GetName() {
			t.Errorf("cut names collide: %s", name)
		}
		if b := s.MachineDeployments["md-0"].Bootstrap.GetName(); len(b) != 63 {
			t.Errorf("bootstrap template name %q is not cut to 63 characters", b)
		}
	})
	for _, tt := range []struct {
		name, template, wantErr string
	}{
		{"unknown key", "{{ .cluster.nope }}", `spec.infrastructure.naming.template "{{ .cluster.nope }}" cannot be rendered`},
		{"not a name", "{{ .cluster.name }}_INFRA", "is not a valid object name"},
		{"broken", "{{ .cluster.name ", "cannot be parsed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := quickStart(t)
			in.Class.Spec.Infrastructure.Naming.Template = tt.template
			_, err := desired.Compute(in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestErrorsNameTheProblem(t *testing.T) {
	for _, tt := range []struct {
		name    string
		change  func(in *desired.Input)
		wantErr []string
		wantAs  any
	}{
		{
			name:    "worker class the class does not define",
			change:  func(in *desired.Input) { in.Cluster.Spec.Topology.Workers.MachineDeployments[1].Class = "nope" },
			wantErr: []string{`spec.topology.workers.machineDeployments[1] ("gpu") names class "nope"`, "ns1/quick-start", "default-worker, gpu-worker"},
		},
		{
			name:    "pool class the class does not define",
			change:  func(in *desired.Input) { in.Cluster.Spec.Topology.Workers.MachinePools[0].Class = "nope" },
			wantErr: []string{`spec.topology.workers.machinePools[0] ("mp-0") names class "nope"`, "default-pool"},
		},
		{
			name: "missing template",
			change: func(in *desired.Input) {
				for k := range in.ClassTemplates {
					if k.Name == "quick-start-gpu-worker-machinetemplate" {
						delete(in.ClassTemplates, k)
					}
				}
			},
			wantErr: []string{"spec.workers.machineDeployments[1].infrastructure.templateRef names LocalMachineTemplate ns1/quick-start-gpu-worker-machinetemplate, which does not exist"},
		},
		{
			name: "external patch",
			change: func(in *desired.Input) {
				in.Class.Spec.Patches = append(in.Class.Spec.Patches, clusterv1.ClusterClassPatch{Name: "ext", External: &clusterv1.ExternalPatchDefinition{GeneratePatchesExtension: "gen"}})
			},
			wantErr: []string{"applying the patches of ClusterClass ns1/quick-start", `"ext"`},
			wantAs:  new(*patches.UnsupportedError),
		},
		{
			name: "patch that fails",
			change: func(in *desired.Input) {
				in.Class.Spec.Patches[0].Definitions[0].JSONPatches[0].Op = "replace"
				in.Class.Spec.Patches[0].Definitions[0].JSONPatches[0].Path = "/spec/template/spec/nothing/here"
			},
			wantErr: []string{"applying the patches of ClusterClass ns1/quick-start", "imageRepository"},
			wantAs:  new(*patches.Error),
		},
		{
			name: "class variable that cannot be used (no status yet)",
			change: func(in *desired.Input) {
				in.Class.Spec.Variables[0].Schema.OpenAPIV3Schema.Default = &apiextensionsv1.JSON{Raw: []byte("5")}
			},
			wantErr: []string{"ClusterClass ns1/quick-start has variables that cannot be used", "spec.variables[0]"},
		},
		{
			name:    "variable value the webhook would have refused",
			change:  func(in *desired.Input) { setVariable(in, "podSecurityStandard", `{"enforce":"nope"}`) },
			wantErr: []string{"the Cluster's variables do not match ClusterClass ns1/quick-start", "spec.topology.variables[0].value.enforce", "nope"},
		},
		{
			name:    "version that does not parse",
			change:  func(in *desired.Input) { in.Cluster.Spec.Topology.Version = "1.33" },
			wantErr: []string{"spec.topology.version"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := quickStart(t)
			tt.change(&in)
			s, err := desired.Compute(in)
			if err == nil {
				t.Fatalf("no error; state %+v", s)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if tt.wantAs != nil && !errors.As(err, tt.wantAs) {
				t.Errorf("error %q is not a %T", err, tt.wantAs)
			}
		})
	}
}

// The versions come from the upgrade decision: the control plane first;
// workers once it is there, a deferred one staying behind.
func TestUpgradeVersions(t *testing.T) {
	first, second := recompute(t, func(in *desired.Input) { in.Cluster.Spec.Topology.Version = "v1.34.0" })
	equal(t, "control plane upgrades first", nested(t, second.ControlPlane, "spec", "version"), "v1.34.0")
	equal(t, "workers wait", []string{second.MachineDeployments["md-0"].Object.Spec.Template.Spec.Version, second.MachineDeployments["gpu"].Object.Spec.Template.Spec.Version},
		[]string{"v1.33.1", "v1.33.1"})
	equal(t, "upgrade step annotation", second.Cluster.Annotations[desired.UpgradeStepAnnotation], "v1.34.0")
	equal(t, "templates not rotated by the control plane upgrade", second.ControlPlaneMachineInfrastructure.GetName(), first.ControlPlaneMachineInfrastructure.GetName())

	// The control plane reached v1.34.0.
	in := quickStart(t)
	in.Cluster = second.Cluster
	in.Cluster.Spec.Topology.Version = "v1.34.0"
	in.Current = asCurrent(second)
	third := compute(t, in)
	md0, gpu := third.MachineDeployments["md-0"], third.MachineDeployments["gpu"]
	equal(t, "md-0 deferred", md0.Object.Spec.Template.Spec.Version, "v1.33.1")
	equal(t, "gpu upgrades", gpu.Object.Spec.Template.Spec.Version, "v1.34.0")
	equal(t, "builtin machineDeployment.version follows", nested(t, gpu.Bootstrap, "spec", "template", "spec", "joinConfiguration", "nodeRegistration", "taints"),
		[]any{map[string]any{"key": "topology-version", "value": "v1.34.0", "effect": "PreferNoSchedule"}})
	if gpu.Bootstrap.GetName() == second.MachineDeployments["gpu"].Bootstrap.GetName() {
		t.Errorf("gpu's bootstrap template changed content (builtin version) but kept its name %s", gpu.Bootstrap.GetName())
	}
}

// A worker the control plane is not ready for is not created yet.
func TestNewWorkerWaitsForControlPlane(t *testing.T) {
	_, second := recompute(t, func(in *desired.Input) {
		in.Cluster.Spec.Topology.Version = "v1.34.0"
		in.Cluster.Spec.Topology.Workers.MachineDeployments = append(in.Cluster.Spec.Topology.Workers.MachineDeployments,
			clusterv1.MachineDeploymentTopology{Class: "default-worker", Name: "late"})
	})
	if _, ok := second.MachineDeployments["late"]; ok {
		t.Error("a new MachineDeployment is desired while the control plane upgrades")
	}
	equal(t, "create pending", second.Upgrade.MachineDeploymentsCreatePending, []string{"late"})
}

// An object made by a reconcile that stopped before the Cluster recorded it
// keeps its name: no second control plane or infrastructure cluster.
func TestUnrecordedObjectsKeepTheirNames(t *testing.T) {
	first := compute(t, quickStart(t))
	in := quickStart(t) // the Cluster without references
	in.Current = desired.Current{InfrastructureCluster: first.InfrastructureCluster, ControlPlane: first.ControlPlane}
	second := compute(t, in)
	equal(t, "names", []string{second.InfrastructureCluster.GetName(), second.ControlPlane.GetName()},
		[]string{first.InfrastructureCluster.GetName(), first.ControlPlane.GetName()})
	equal(t, "cluster references", second.Cluster.Spec.ControlPlaneRef.Name, first.ControlPlane.GetName())
}

// The class's status.variables, once the ClusterClass controller has
// written them for its current generation, are the definitions used.
func TestDefinitionsFromClassStatus(t *testing.T) {
	in := quickStart(t)
	in.Class.Generation, in.Class.Status.ObservedGeneration = 3, 3
	for _, v := range in.Class.Spec.Variables {
		schema := v.Schema
		if v.Name == "imageRepository" {
			schema.OpenAPIV3Schema.Default = &apiextensionsv1.JSON{Raw: []byte(`"from-status"`)}
		}
		in.Class.Status.Variables = append(in.Class.Status.Variables, clusterv1.ClusterClassStatusVariable{Name: v.Name,
			Definitions: []clusterv1.ClusterClassStatusVariableDefinition{{From: "inline", Required: v.Required, Schema: schema}}})
	}
	s := compute(t, in)
	equal(t, "default from the status", nested(t, s.ControlPlane, "spec", "kubeadmConfigSpec", "clusterConfiguration", "imageRepository"), "from-status")

	in.Class.Generation = 4 // the status describes an older class
	s = compute(t, in)
	equal(t, "default from the class", nested(t, s.ControlPlane, "spec", "kubeadmConfigSpec", "clusterConfiguration", "imageRepository"), "registry.k8s.io")
}

// BenchmarkCompute is a quick-start Cluster's recompute, what the topology
// controller runs on every reconcile.
func BenchmarkCompute(b *testing.B) {
	t := &testing.T{}
	first, err := desired.Compute(quickStart(t))
	if err != nil {
		b.Fatal(err)
	}
	in := quickStart(t)
	in.Cluster = first.Cluster
	in.Current = asCurrent(first)
	b.ResetTimer()
	for b.Loop() {
		if _, err := desired.Compute(in); err != nil {
			b.Fatal(err)
		}
	}
}
