package webhook

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func checkErrors(t *testing.T, got []string, wants ...string) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("errors %q, want %d: %q", got, len(wants), wants)
	}
	for i, w := range wants {
		if !strings.Contains(got[i], w) {
			t.Errorf("error %q lacks %q", got[i], w)
		}
	}
}

func texts[E interface{ Error() string }](errs []E) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func ref(apiVersion, kind string) clusterv1.ClusterClassTemplateReference {
	return clusterv1.ClusterClassTemplateReference{APIVersion: apiVersion, Kind: kind, Name: "t"}
}

func baseClass() *clusterv1.ClusterClass {
	cc := &clusterv1.ClusterClass{}
	cc.Spec.Infrastructure.TemplateRef = ref("infrastructure.cluster.x-k8s.io/v1beta2", "LocalClusterTemplate")
	cc.Spec.ControlPlane.TemplateRef = ref("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlaneTemplate")
	cc.Spec.ControlPlane.MachineInfrastructure.TemplateRef = ref("infrastructure.cluster.x-k8s.io/v1beta2", "LocalMachineTemplate")
	cc.Spec.Workers.MachineDeployments = []clusterv1.MachineDeploymentClass{{Class: "w",
		Bootstrap:      clusterv1.MachineDeploymentClassBootstrapTemplate{TemplateRef: ref("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfigTemplate")},
		Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: ref("infrastructure.cluster.x-k8s.io/v1beta2", "LocalMachineTemplate")}}}
	cc.Spec.Workers.MachinePools = []clusterv1.MachinePoolClass{{Class: "p",
		Bootstrap:      clusterv1.MachinePoolClassBootstrapTemplate{TemplateRef: ref("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfigTemplate")},
		Infrastructure: clusterv1.MachinePoolClassInfrastructureTemplate{TemplateRef: ref("infrastructure.cluster.x-k8s.io/v1beta2", "LocalMachinePoolTemplate")}}}
	return cc
}

func TestClassesCompatible(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*clusterv1.ClusterClass)
		want []string
	}{
		{name: "same kinds, new versions and names", edit: func(cc *clusterv1.ClusterClass) {
			cc.Spec.Infrastructure.TemplateRef = ref("infrastructure.cluster.x-k8s.io/v1beta3", "LocalClusterTemplate")
			cc.Spec.Workers.MachineDeployments[0].Infrastructure.TemplateRef.Name = "other"
		}},
		{name: "bootstrap kind may change", edit: func(cc *clusterv1.ClusterClass) {
			cc.Spec.Workers.MachineDeployments[0].Bootstrap.TemplateRef = ref("bootstrap.example.com/v1", "OtherConfigTemplate")
		}},
		{name: "a new worker class", edit: func(cc *clusterv1.ClusterClass) {
			cc.Spec.Workers.MachineDeployments = append(cc.Spec.Workers.MachineDeployments, clusterv1.MachineDeploymentClass{Class: "new",
				Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: ref("infrastructure.example.com/v1", "OtherMachineTemplate")}})
		}},
		{name: "infrastructure kind and group", edit: func(cc *clusterv1.ClusterClass) {
			cc.Spec.Infrastructure.TemplateRef = ref("infrastructure.example.com/v1", "OtherClusterTemplate")
		}, want: []string{
			`spec.infrastructure.templateRef.apiVersion: Forbidden: the group cannot change from "infrastructure.cluster.x-k8s.io" to "infrastructure.example.com"`,
			`spec.infrastructure.templateRef.kind: Forbidden: cannot change from "LocalClusterTemplate" to "OtherClusterTemplate"`,
		}},
		{name: "control plane kind", edit: func(cc *clusterv1.ClusterClass) {
			cc.Spec.ControlPlane.TemplateRef.Kind = "OtherControlPlaneTemplate"
		}, want: []string{"spec.controlPlane.templateRef.kind: Forbidden"}},
		{name: "machine infrastructure removed", edit: func(cc *clusterv1.ClusterClass) {
			cc.Spec.ControlPlane.MachineInfrastructure = clusterv1.ControlPlaneClassMachineInfrastructureTemplate{}
		}, want: []string{"spec.controlPlane.machineInfrastructure: Forbidden: cannot be removed"}},
		{name: "worker infrastructure kinds", edit: func(cc *clusterv1.ClusterClass) {
			cc.Spec.Workers.MachineDeployments[0].Infrastructure.TemplateRef.Kind = "OtherMachineTemplate"
			cc.Spec.Workers.MachinePools[0].Infrastructure.TemplateRef.Kind = "OtherMachinePoolTemplate"
		}, want: []string{"spec.workers.machineDeployments[0].infrastructure.templateRef.kind: Forbidden", "spec.workers.machinePools[0].infrastructure.templateRef.kind: Forbidden"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := baseClass()
			tc.edit(cc)
			checkErrors(t, texts(classesCompatible(baseClass(), cc)), tc.want...)
		})
	}
	added := baseClass()
	bare := baseClass()
	bare.Spec.ControlPlane.MachineInfrastructure = clusterv1.ControlPlaneClassMachineInfrastructureTemplate{}
	checkErrors(t, texts(classesCompatible(bare, added)), "spec.controlPlane.machineInfrastructure: Forbidden: cannot be added")
}

func TestKubernetesVersionsValid(t *testing.T) {
	for _, tc := range []struct {
		versions []string
		want     []string
	}{
		{versions: nil},
		{versions: []string{"v1.32.4", "v1.33.0", "v1.33.1", "v1.34.2"}},
		{versions: []string{"v1.33.0+a", "v1.33.0+b"}},
		{versions: []string{"v1.33.0", "1.33"}, want: []string{`spec.kubernetesVersions[1]: Invalid value: "1.33": must be a Kubernetes version`}},
		{versions: []string{"v1.33.1", "v1.33.0"}, want: []string{`spec.kubernetesVersions[1]: Invalid value: "v1.33.0": must be newer than the entry before it (v1.33.1)`}},
		{versions: []string{"v1.33.1", "v1.33.1"}, want: []string{"must be newer"}},
		{versions: []string{"v1.32.4", "v1.34.0"}, want: []string{`spec.kubernetesVersions[1]: Invalid value: "v1.34.0": skips a minor version after v1.32.4: list a v1.33 version in between`}},
	} {
		checkErrors(t, texts(kubernetesVersionsValid(tc.versions)), tc.want...)
	}
}

func TestClassShape(t *testing.T) {
	cc := baseClass()
	if errs := classShape(cc); len(errs) != 0 {
		t.Fatalf("a sound class: %v", errs)
	}
	cc.Spec.Infrastructure.TemplateRef.Kind = "LocalCluster"
	cc.Spec.Workers.MachineDeployments[0].Infrastructure.TemplateRef.Kind = "Template"
	cc.Spec.ControlPlane.MachineInfrastructure = clusterv1.ControlPlaneClassMachineInfrastructureTemplate{}
	cc.Spec.ControlPlane.HealthCheck.Checks.NodeStartupTimeoutSeconds = ptr.To(int32(10))
	cc.Spec.Workers.MachineDeployments[0].HealthCheck.Remediation.MaxInFlight = ptr.To(intstr.FromString("half"))
	cc.Spec.Workers.MachinePools[0].Metadata.Labels = map[string]string{"bad key!": "x"}
	cc.Spec.Workers.MachineDeployments[0].Rollout.Strategy.RollingUpdate = clusterv1.MachineDeploymentTopologyRolloutStrategyRollingUpdate{
		MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(0))}
	checkErrors(t, texts(classShape(cc)),
		`spec.infrastructure.templateRef.kind: Invalid value: "LocalCluster": must be a template kind, <Name>Template`,
		"spec.controlPlane.healthCheck: Forbidden: needs spec.controlPlane.machineInfrastructure",
		"spec.controlPlane.healthCheck.checks.nodeStartupTimeoutSeconds: Invalid value: 10: must be 0 (no timeout) or at least 30 seconds",
		`spec.workers.machineDeployments[w].infrastructure.templateRef.kind: Invalid value: "Template"`,
		`spec.workers.machineDeployments[w].healthCheck.remediation.maxInFlight: Invalid value: "half": must be a number or a percentage`,
		`spec.workers.machineDeployments[w].rollout.strategy.rollingUpdate: Invalid value: "maxUnavailable: 0, maxSurge: 0": maxUnavailable and maxSurge cannot both be 0`,
		`spec.workers.machinePools[p].metadata.labels: Invalid value: "bad key!"`,
	)
}

func TestTopologyShape(t *testing.T) {
	cc := baseClass()
	cc.Spec.ControlPlane.MachineInfrastructure = clusterv1.ControlPlaneClassMachineInfrastructureTemplate{}
	topo := &clusterv1.Topology{}
	topo.ControlPlane.HealthCheck.Checks.NodeStartupTimeoutSeconds = ptr.To(int32(0))
	topo.ControlPlane.Metadata.Annotations = map[string]string{"/nope": "x"}
	topo.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{{Name: "md", Class: "w",
		HealthCheck: clusterv1.MachineDeploymentTopologyHealthCheck{Checks: clusterv1.MachineDeploymentTopologyHealthCheckChecks{NodeStartupTimeoutSeconds: ptr.To(int32(29))}}}}
	topo.Workers.MachineDeployments[0].Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("lots"))
	checkErrors(t, texts(topologyShape(topo, cc)),
		"spec.topology.controlPlane.metadata.annotations: Invalid value: \"/nope\"",
		"spec.topology.controlPlane.healthCheck: Forbidden: ClusterClass /",
		"spec.topology.workers.machineDeployments[md].healthCheck.checks.nodeStartupTimeoutSeconds: Invalid value: 29",
		`spec.topology.workers.machineDeployments[md].rollout.strategy.rollingUpdate.maxSurge: Invalid value: "lots": must be a number or a percentage`,
	)
	// Without the class, only what the topology alone decides.
	checkErrors(t, texts(topologyShape(topo, nil)), "metadata.annotations", "nodeStartupTimeoutSeconds", "maxSurge")
}
