package templates

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/topology/patches"
	"capstan.dev/capstan/internal/topology/variables"
)

// topologyFlavor renders a provider's topology flavor with the variables
// that have no default and returns its ClusterClass and Cluster.
func topologyFlavor(t *testing.T, infrastructure string) (*clusterv1.ClusterClass, *clusterv1.Cluster) {
	t.Helper()
	tmpl, err := Builtin(infrastructure, "topology")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(tmpl, lookupFrom(map[string]string{"CLUSTER_NAME": "demo", "NAMESPACE": "ns", "KUBERNETES_VERSION": "v1.35.8"}))
	if err != nil {
		t.Fatal(err)
	}
	var class *clusterv1.ClusterClass
	var cluster *clusterv1.Cluster
	for _, doc := range strings.Split(out, "\n---\n") {
		var kind struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			t.Fatalf("rendered document does not parse: %v\n%s", err, doc)
		}
		switch kind.Kind {
		case clusterv1.ClusterClassKind:
			class = &clusterv1.ClusterClass{}
			if err := yaml.UnmarshalStrict([]byte(doc), class); err != nil {
				t.Fatalf("the ClusterClass does not decode: %v", err)
			}
		case clusterv1.ClusterKind:
			cluster = &clusterv1.Cluster{}
			if err := yaml.UnmarshalStrict([]byte(doc), cluster); err != nil {
				t.Fatalf("the Cluster does not decode: %v", err)
			}
		}
	}
	if class == nil || cluster == nil {
		t.Fatalf("the %s topology flavor lacks a ClusterClass or a Cluster:\n%s", infrastructure, out)
	}
	return class, cluster
}

// The built-in classes pass the checks the ClusterClass webhook and
// controller make (variable schemas, patches against the class), and the
// generated Cluster's variables pass the Cluster's.
func TestTopologyClassesAreValid(t *testing.T) {
	for infrastructure, className := range map[string]string{"local": "capstan-local", "in-memory": "capstan-in-memory"} {
		t.Run(infrastructure, func(t *testing.T) {
			class, cluster := topologyFlavor(t, infrastructure)
			if class.Name != className || cluster.Spec.Topology.ClassRef.Name != className {
				t.Errorf("class %q referenced as %q, want both %q (a fixed name, so that applying it again changes nothing)",
					class.Name, cluster.Spec.Topology.ClassRef.Name, className)
			}
			defs, errs := variables.Definitions(class)
			if len(errs) > 0 {
				t.Fatalf("variables.Definitions refuses the class: %v", errs.ToAggregate())
			}
			if errs := patches.ValidateClass(class); len(errs) > 0 {
				t.Errorf("patches.ValidateClass refuses the class: %v", errs.ToAggregate())
			}
			if errs := variables.ValidateCluster(defs, cluster, nil); len(errs) > 0 {
				t.Errorf("the generated Cluster's variables are refused: %v", errs.ToAggregate())
			}
			if n := len(class.Spec.Workers.MachineDeployments); n != 2 {
				t.Errorf("%d worker classes, want default-worker and dedicated-worker", n)
			}
		})
	}
}

// Bad values of the classes' variables are refused, naming the variable.
func TestTopologyClassesRefuseBadVariables(t *testing.T) {
	for _, tc := range []struct {
		infrastructure, variable, value, want string
	}{
		{"local", "kubeadmControlPlaneMaxSurge", `2`, "kubeadmControlPlaneMaxSurge"},
		{"local", "apiServerProfiling", `"yes"`, "apiServerProfiling"},
		{"local", "workerNodeLabels", `{"not a key": "x"}`, "must be a label key"},
		{"local", "workerNodeLabels", `{"role": 3}`, "workerNodeLabels"},
		{"in-memory", "machineBootDelay", `"soon"`, "machineBootDelay"},
		{"in-memory", "machineBootDelay", `10`, "machineBootDelay"},
	} {
		t.Run(tc.variable+"="+tc.value, func(t *testing.T) {
			class, cluster := topologyFlavor(t, tc.infrastructure)
			defs, errs := variables.Definitions(class)
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			set := false
			for i, v := range cluster.Spec.Topology.Variables {
				if v.Name == tc.variable {
					cluster.Spec.Topology.Variables[i].Value = apiextensionsv1.JSON{Raw: []byte(tc.value)}
					set = true
				}
			}
			if !set {
				t.Fatalf("the generated Cluster does not set %s", tc.variable)
			}
			errs = variables.ValidateCluster(defs, cluster, nil)
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Errorf("errors %v, want one containing %q", errs.ToAggregate(), tc.want)
			}
		})
	}
}
