package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestVersionChange(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ceiling  bool
		want     string // part of the refusal; "" when allowed
	}{
		{from: "v1.33.1", to: "v1.33.1", ceiling: true},
		{from: "v1.33.1", to: "v1.33.4", ceiling: true},
		{from: "v1.33.1", to: "v1.34.0", ceiling: true},
		{from: "v1.33.1", to: "v1.34.0-rc.1", ceiling: true},
		{from: "v1.33.1", to: "v1.33.0", ceiling: true, want: "cannot be lowered from v1.33.1"},
		{from: "v1.33.1", to: "v1.32.9", ceiling: false, want: "cannot be lowered"},
		{from: "v1.33.1", to: "v1.35.0", ceiling: true, want: "upgrade to v1.34.x first"},
		{from: "v1.33.1", to: "v1.35.0", ceiling: false},
	} {
		newV, _ := parseVersion(tc.to)
		oldV, _ := parseVersion(tc.from)
		err := versionChange(newV, oldV, tc.to, tc.ceiling)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s -> %s (ceiling %v): refused: %v", tc.from, tc.to, tc.ceiling, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s -> %s (ceiling %v): got %v, want a refusal saying %q", tc.from, tc.to, tc.ceiling, err, tc.want)
		case err != nil && !strings.HasPrefix(err.Error(), "spec.topology.version"):
			t.Errorf("refusal does not name the field: %v", err)
		}
	}
}

func TestValidateAgainstClass(t *testing.T) {
	cc := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "quick-start"}}
	cc.Spec.Workers.MachineDeployments = []clusterv1.MachineDeploymentClass{{Class: "default-worker"}, {Class: "gpu"}}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	cluster.Spec.Topology.Version = "v1.33.1"
	cluster.Spec.Topology.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{
		{Name: "md-0", Class: "default-worker"},
		{Name: "md-1", Class: "missing", HealthCheck: clusterv1.MachineDeploymentTopologyHealthCheck{Enabled: ptr.To(true)}},
		{Name: "md-2", Class: "gpu", HealthCheck: clusterv1.MachineDeploymentTopologyHealthCheck{Enabled: ptr.To(true)}},
	}
	cluster.Spec.Topology.ControlPlane.HealthCheck.Enabled = ptr.To(true)
	errs := validateAgainstClass(cluster, cc)
	got := errs.ToAggregate().Error()
	for _, want := range []string{
		`spec.topology.workers.machineDeployments[md-1].class: Invalid value: "missing": ClusterClass ns/quick-start has no machineDeployments class of this name: use one of ["default-worker", "gpu"]`,
		`spec.topology.workers.machineDeployments[md-2].healthCheck.enabled: Forbidden: machineDeployments class "gpu" of ClusterClass ns/quick-start defines no healthCheck`,
		`spec.topology.controlPlane.healthCheck.enabled: Forbidden`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q\nlack %q", got, want)
		}
	}
	if len(errs) != 3 {
		t.Errorf("%d errors, want 3: %v", len(errs), got)
	}

	cc.Spec.KubernetesVersions = []string{"v1.32.0", "v1.34.0"}
	if got := validateAgainstClass(cluster, cc).ToAggregate().Error(); !strings.Contains(got, `spec.topology.version: Unsupported value: "v1.33.1": supported values: "v1.32.0", "v1.34.0"`) {
		t.Errorf("a version the class does not list: %s", got)
	}
}

func TestRemovalsInUse(t *testing.T) {
	old := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cc"}}
	old.Spec.Workers.MachineDeployments = []clusterv1.MachineDeploymentClass{{Class: "a"}, {Class: "b"}}
	old.Spec.Workers.MachinePools = []clusterv1.MachinePoolClass{{Class: "p"}}
	old.Spec.Variables = []clusterv1.ClusterClassVariable{{Name: "x"}, {Name: "y"}, {Name: "z"}}
	updated := old.DeepCopy()
	updated.Spec.Workers.MachineDeployments = updated.Spec.Workers.MachineDeployments[:1] // b removed
	updated.Spec.Workers.MachinePools = nil                                               // p removed
	updated.Spec.Variables = updated.Spec.Variables[:1]                                   // y, z removed

	value := apiextensionsv1.JSON{Raw: []byte(`1`)}
	c1 := clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "one"}}
	c1.Spec.Topology.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{{Name: "md", Class: "b",
		Variables: clusterv1.MachineDeploymentVariables{Overrides: []clusterv1.ClusterVariable{{Name: "y", Value: value}}}}}
	c1.Spec.Topology.Variables = []clusterv1.ClusterVariable{{Name: "y", Value: value}}
	c2 := clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "two"}}
	c2.Spec.Topology.Workers.MachinePools = []clusterv1.MachinePoolTopology{{Name: "mp", Class: "p"}}
	c2.Spec.Topology.Variables = []clusterv1.ClusterVariable{{Name: "y", Value: value}, {Name: "x", Value: value}}

	errs := removalsInUse(old, updated, []clusterv1.Cluster{c1, c2})
	got := errs.ToAggregate().Error()
	for _, want := range []string{
		`spec.workers.machineDeployments: Forbidden: machineDeployments class "b" cannot be removed: Cluster(s) ns/one use it`,
		`spec.workers.machinePools: Forbidden: machinePools class "p" cannot be removed: Cluster(s) other/two use it`,
		`spec.variables: Forbidden: variable "y" cannot be removed: Cluster(s) ns/one, other/two use it`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q\nlack %q", got, want)
		}
	}
	if len(errs) != 3 {
		t.Errorf("%d errors, want 3 (z is used by nobody): %s", len(errs), got)
	}
	if errs := removalsInUse(old, old, []clusterv1.Cluster{c1, c2}); len(errs) != 0 {
		t.Errorf("an unchanged class refused: %v", errs)
	}
}

func TestPatchTopologyTouchesOnlyDefaultedFields(t *testing.T) {
	raw := []byte(`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","metadata":{"name":"c","namespace":"ns"},
"spec":{"futureField":{"kept":true},"topology":{"classRef":{"name":"cc"},"version":"1.33.1",
"workers":{"machineDeployments":[{"name":"md-0","class":"w","variables":{"overrides":[{"name":"a","value":{}}]}}]}}}}`)
	cluster := &clusterv1.Cluster{}
	if err := json.Unmarshal(raw, cluster); err != nil {
		t.Fatal(err)
	}
	cluster.Spec.Topology.Version = "v1.33.1"
	cluster.Spec.Topology.Variables = []clusterv1.ClusterVariable{{Name: "b", Value: apiextensionsv1.JSON{Raw: []byte(`"x"`)}}}
	cluster.Spec.Topology.Workers.MachineDeployments[0].Variables.Overrides[0].Value = apiextensionsv1.JSON{Raw: []byte(`{"d":1}`)}
	out, err := patchTopology(raw, cluster)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	spec := got["spec"].(map[string]any)
	if _, ok := spec["futureField"]; !ok {
		t.Errorf("a field the webhook does not know was dropped: %s", out)
	}
	topo := spec["topology"].(map[string]any)
	if topo["version"] != "v1.33.1" {
		t.Errorf("version = %v, want v1.33.1", topo["version"])
	}
	if b, _ := json.Marshal(topo["variables"]); string(b) != `[{"name":"b","value":"x"}]` {
		t.Errorf("variables = %s", b)
	}
	md := topo["workers"].(map[string]any)["machineDeployments"].([]any)[0].(map[string]any)
	if b, _ := json.Marshal(md["variables"]); string(b) != `{"overrides":[{"name":"a","value":{"d":1}}]}` {
		t.Errorf("machineDeployment overrides = %s", b)
	}
}

func TestVersionsInUse(t *testing.T) {
	cc := &clusterv1.ClusterClass{}
	cc.Spec.KubernetesVersions = []string{"v1.33.1", "v1.34.0"}
	cluster := func(name, version string) clusterv1.Cluster {
		c := clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		c.Spec.Topology.Version = version
		return c
	}
	clusters := []clusterv1.Cluster{cluster("a", "v1.33.1"), cluster("b", "v1.32.4"), cluster("c", "v1.32.4")}
	errs := versionsInUse(cc, clusters)
	want := "spec.kubernetesVersions: Forbidden: must list v1.32.4: Cluster(s) ns/b, ns/c run it; add it, or upgrade those Clusters first"
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("errors %v, want one: %s", errs, want)
	}
	cc.Spec.KubernetesVersions = nil
	if errs := versionsInUse(cc, clusters); len(errs) != 0 {
		t.Errorf("a class that lists no versions: %v", errs)
	}
}
