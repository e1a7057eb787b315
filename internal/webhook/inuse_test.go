package webhook

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func autoscaled() clusterv1.ObjectMeta {
	return clusterv1.ObjectMeta{Annotations: map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "5"}}
}

func TestAutoscalerConflicts(t *testing.T) {
	cc := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cc"}}
	cc.Spec.Workers.MachineDeployments = []clusterv1.MachineDeploymentClass{{Class: "plain"}, {Class: "scaled", Metadata: autoscaled()}}
	for _, tc := range []struct {
		name  string
		md    clusterv1.MachineDeploymentTopology
		class *clusterv1.ClusterClass
		want  []string
	}{
		{name: "replicas without annotations", md: clusterv1.MachineDeploymentTopology{Name: "a", Class: "plain", Replicas: ptr.To(int32(3))}, class: cc},
		{name: "annotations without replicas", md: clusterv1.MachineDeploymentTopology{Name: "a", Class: "scaled", Metadata: autoscaled()}, class: cc},
		{name: "replicas and the topology's annotation",
			md: clusterv1.MachineDeploymentTopology{Name: "a", Class: "plain", Replicas: ptr.To(int32(3)), Metadata: autoscaled()}, class: cc,
			want: []string{`spec.topology.workers.machineDeployments[a].replicas: Invalid value: 3: cannot be set while the topology's metadata carries the annotation cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size`}},
		{name: "replicas and the class's annotation",
			md: clusterv1.MachineDeploymentTopology{Name: "a", Class: "scaled", Replicas: ptr.To(int32(3))}, class: cc,
			want: []string{`spec.topology.workers.machineDeployments[a].replicas: Invalid value: 3: cannot be set: machineDeployments class "scaled" of ClusterClass ns/cc carries the annotation`}},
		{name: "both", md: clusterv1.MachineDeploymentTopology{Name: "a", Class: "scaled", Replicas: ptr.To(int32(0)), Metadata: autoscaled()}, class: cc,
			want: []string{"the topology's metadata", `class "scaled"`}},
		{name: "class unknown: only the topology is checked",
			md: clusterv1.MachineDeploymentTopology{Name: "a", Class: "scaled", Replicas: ptr.To(int32(3))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clusterv1.Cluster{}
			c.Spec.Topology.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{tc.md}
			checkErrors(t, texts(autoscalerConflicts(c, tc.class)), tc.want...)
		})
	}
}

func topologyOf(ns, name string, edit func(*clusterv1.Topology)) clusterv1.Cluster {
	c := clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	edit(&c.Spec.Topology)
	return c
}

func TestAutoscalerInUse(t *testing.T) {
	cc := &clusterv1.ClusterClass{}
	cc.Spec.Workers.MachineDeployments = []clusterv1.MachineDeploymentClass{{Class: "plain"}, {Class: "scaled", Metadata: autoscaled()}}
	fixed := topologyOf("ns", "fixed", func(t *clusterv1.Topology) {
		t.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{{Name: "a", Class: "scaled", Replicas: ptr.To(int32(2))}}
	})
	free := topologyOf("ns", "free", func(t *clusterv1.Topology) {
		t.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{{Name: "a", Class: "scaled"}, {Name: "b", Class: "plain", Replicas: ptr.To(int32(2))}}
	})
	errs := autoscalerInUse(cc, []clusterv1.Cluster{fixed, free})
	want := `spec.workers.machineDeployments[scaled].metadata.annotations[cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size]: Forbidden: cannot be set while Cluster(s) ns/fixed set the replicas`
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
		t.Errorf("errors %v, want one starting %q", errs, want)
	}
	if errs := autoscalerInUse(cc, []clusterv1.Cluster{free}); len(errs) != 0 {
		t.Errorf("no Cluster sets replicas of the autoscaled class: %v", errs)
	}
}

func TestHealthChecksInUse(t *testing.T) {
	check := clusterv1.MachineDeploymentClassHealthCheck{Checks: clusterv1.MachineDeploymentTopologyHealthCheckChecks{NodeStartupTimeoutSeconds: ptr.To(int32(600))}}
	old := &clusterv1.ClusterClass{}
	old.Spec.ControlPlane.HealthCheck.Checks.NodeStartupTimeoutSeconds = ptr.To(int32(600))
	old.Spec.Workers.MachineDeployments = []clusterv1.MachineDeploymentClass{{Class: "a", HealthCheck: check}, {Class: "b", HealthCheck: check}}
	stripped := old.DeepCopy()
	stripped.Spec.ControlPlane.HealthCheck = clusterv1.ControlPlaneClassHealthCheck{}
	for i := range stripped.Spec.Workers.MachineDeployments {
		stripped.Spec.Workers.MachineDeployments[i].HealthCheck = clusterv1.MachineDeploymentClassHealthCheck{}
	}
	changed := old.DeepCopy()
	changed.Spec.ControlPlane.HealthCheck.Checks.NodeStartupTimeoutSeconds = ptr.To(int32(900))
	changed.Spec.Workers.MachineDeployments[0].HealthCheck.Checks.NodeStartupTimeoutSeconds = ptr.To(int32(900))

	relies := topologyOf("ns", "relies", func(t *clusterv1.Topology) {
		t.ControlPlane.HealthCheck.Enabled = ptr.To(true)
		t.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{
			{Name: "x", Class: "a", HealthCheck: clusterv1.MachineDeploymentTopologyHealthCheck{Enabled: ptr.To(true)}},
		}
	})
	own := topologyOf("ns", "own", func(t *clusterv1.Topology) {
		t.ControlPlane.HealthCheck.Enabled = ptr.To(true)
		t.ControlPlane.HealthCheck.Checks.NodeStartupTimeoutSeconds = ptr.To(int32(300))
		t.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{
			{Name: "x", Class: "b", HealthCheck: clusterv1.MachineDeploymentTopologyHealthCheck{Enabled: ptr.To(true)}},
			{Name: "y", Class: "a", HealthCheck: clusterv1.MachineDeploymentTopologyHealthCheck{Enabled: ptr.To(true),
				Checks: clusterv1.MachineDeploymentTopologyHealthCheckChecks{NodeStartupTimeoutSeconds: ptr.To(int32(300))}}},
		}
	})
	unset := topologyOf("ns", "unset", func(t *clusterv1.Topology) {
		t.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{{Name: "x", Class: "a"}}
	})

	checkErrors(t, texts(healthChecksInUse(old, stripped, []clusterv1.Cluster{relies, own, unset})),
		"spec.controlPlane.healthCheck: Forbidden: cannot be removed: Cluster(s) ns/relies turn the control plane health check on",
		"spec.workers.machineDeployments[a].healthCheck: Forbidden: cannot be removed: Cluster(s) ns/relies turn it on",
		"spec.workers.machineDeployments[b].healthCheck: Forbidden: cannot be removed: Cluster(s) ns/own turn it on",
	)
	if errs := healthChecksInUse(old, changed, []clusterv1.Cluster{relies, own}); len(errs) != 0 {
		t.Errorf("a changed health check was refused: %v", errs)
	}
	if errs := healthChecksInUse(old, stripped, []clusterv1.Cluster{unset}); len(errs) != 0 {
		t.Errorf("health checks nobody turns on were refused: %v", errs)
	}
}
