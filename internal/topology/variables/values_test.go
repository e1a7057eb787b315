package variables

import (
	"encoding/json"
	"strings"
	"testing"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestValues(t *testing.T) {
	cluster := []clusterv1.ClusterVariable{value("region", `"us-east-1"`), value("image", `{"name":"ubuntu"}`), value("empty", "")}
	tests := []struct {
		name      string
		overrides []clusterv1.ClusterVariable
		builtins  Builtins
		want      map[string]string
		err       string
	}{
		{
			name:     "the Cluster's values and the builtins",
			builtins: Builtins{Cluster: &ClusterBuiltins{Name: "c1"}},
			want: map[string]string{"region": `"us-east-1"`, "image": `{"name":"ubuntu"}`, "empty": ``,
				"builtin": `{"cluster":{"name":"c1"}}`},
		},
		{
			name:      "an override replaces the value of its name only; an override may add a variable the Cluster leaves out",
			overrides: []clusterv1.ClusterVariable{value("image", `{"name":"flatcar"}`), value("extra", `1`)},
			want: map[string]string{"region": `"us-east-1"`, "image": `{"name":"flatcar"}`, "empty": ``, "extra": `1`,
				"builtin": `{}`},
		},
		{
			name:      "an override named builtin is refused",
			overrides: []clusterv1.ClusterVariable{value("builtin", `{}`)},
			err:       `the overrides set variable "builtin", the name reserved`,
		},
		{
			name:      "an override set twice is refused",
			overrides: []clusterv1.ClusterVariable{value("image", `{}`), value("image", `{}`)},
			err:       `the overrides set variable "image" twice`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, overrides := clone(cluster), clone(tt.overrides)
			got, err := Values(in, overrides, tt.builtins)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Values error %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotText := map[string]string{}
			for name, v := range got {
				gotText[name] = string(v.Raw)
			}
			if len(gotText) != len(tt.want) {
				t.Errorf("Values:\n got %v\nwant %v", gotText, tt.want)
			}
			for name, w := range tt.want {
				if gotText[name] != w {
					t.Errorf("Values[%s] = %q, want %q", name, gotText[name], w)
				}
			}
			// The map must not alias the Cluster's bytes: a patch that
			// edits what it sees would otherwise edit the Cluster.
			got["region"].Raw[1] = 'X'
			if string(in[0].Value.Raw) != `"us-east-1"` {
				t.Error("Values shares bytes with the Cluster's values")
			}
		})
	}

	_, err := Values([]clusterv1.ClusterVariable{value("a", `1`), value("a", `2`)}, nil, Builtins{})
	if err == nil || !strings.Contains(err.Error(), `spec.topology.variables set variable "a" twice`) {
		t.Errorf("a Cluster value set twice: error %v", err)
	}
}

// TestBuiltinsJSON pins the JSON keys of the builtin variables: patches
// written for upstream address them by these names.
func TestBuiltinsJSON(t *testing.T) {
	domain := "cluster.local"
	cpReplicas, mdReplicas, mpReplicas := int32(3), int64(2), int64(0)
	meta := &BuiltinMetadata{Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "2"}}
	tests := []struct {
		name string
		in   Builtins
		want string
	}{
		{name: "nothing known: an empty object", in: Builtins{}, want: `{}`},
		{
			name: "cluster",
			in: Builtins{Cluster: &ClusterBuiltins{
				Name: "c1", Namespace: "ns", UID: "u-1", Metadata: meta,
				Topology: &ClusterTopologyBuiltins{
					Version:  "v1.34.0",
					ClassRef: ClusterClassRefBuiltins{Name: "quick-start", Namespace: "ns"},
					Class:    "quick-start", ClassNamespace: "ns",
				},
				Network: &ClusterNetworkBuiltins{ServiceDomain: &domain, Services: []string{"10.96.0.0/12"}, Pods: []string{"192.168.0.0/16"}},
			}},
			want: `{"cluster":{"name":"c1","namespace":"ns","uid":"u-1","metadata":{"labels":{"l":"1"},"annotations":{"a":"2"}},` +
				`"topology":{"version":"v1.34.0","classRef":{"name":"quick-start","namespace":"ns"},"class":"quick-start","classNamespace":"ns"},` +
				`"network":{"serviceDomain":"cluster.local","services":["10.96.0.0/12"],"pods":["192.168.0.0/16"]}}}`,
		},
		{
			name: "cluster topology: classRef is always there, the rest omitted when unknown",
			in:   Builtins{Cluster: &ClusterBuiltins{Topology: &ClusterTopologyBuiltins{}, Network: &ClusterNetworkBuiltins{}}},
			want: `{"cluster":{"topology":{"classRef":{"name":"","namespace":""}},"network":{}}}`,
		},
		{
			name: "controlPlane",
			in: Builtins{ControlPlane: &ControlPlaneBuiltins{
				Version: "v1.34.0", Metadata: meta, Name: "c1-cp", Replicas: &cpReplicas,
				MachineTemplate: &ControlPlaneMachineTemplateBuiltins{InfrastructureRef: ControlPlaneMachineInfrastructureRefBuiltins{Name: "c1-cp-infra"}},
			}},
			want: `{"controlPlane":{"version":"v1.34.0","metadata":{"labels":{"l":"1"},"annotations":{"a":"2"}},"name":"c1-cp","replicas":3,` +
				`"machineTemplate":{"infrastructureRef":{"name":"c1-cp-infra"}}}}`,
		},
		{
			name: "machineDeployment",
			in: Builtins{MachineDeployment: &MachineDeploymentBuiltins{
				Version: "v1.33.0", Metadata: meta, Class: "default-worker", Name: "c1-md-0-x7k", TopologyName: "md-0", Replicas: &mdReplicas,
				Bootstrap:         &MachineBootstrapBuiltins{ConfigRef: &MachineBootstrapConfigRefBuiltins{Name: "c1-md-0-boot"}},
				InfrastructureRef: &MachineInfrastructureRefBuiltins{Name: "c1-md-0-infra"},
			}},
			want: `{"machineDeployment":{"version":"v1.33.0","metadata":{"labels":{"l":"1"},"annotations":{"a":"2"}},"class":"default-worker",` +
				`"name":"c1-md-0-x7k","topologyName":"md-0","replicas":2,"bootstrap":{"configRef":{"name":"c1-md-0-boot"}},"infrastructureRef":{"name":"c1-md-0-infra"}}}`,
		},
		{
			name: "machinePool: zero replicas is known and kept",
			in: Builtins{MachinePool: &MachinePoolBuiltins{
				Version: "v1.33.0", Class: "pool", Name: "c1-mp-0", TopologyName: "mp-0", Replicas: &mpReplicas,
				Bootstrap:         &MachineBootstrapBuiltins{ConfigRef: &MachineBootstrapConfigRefBuiltins{Name: "c1-mp-0-boot"}},
				InfrastructureRef: &MachineInfrastructureRefBuiltins{Name: "c1-mp-0-infra"},
			}},
			want: `{"machinePool":{"version":"v1.33.0","class":"pool","name":"c1-mp-0","topologyName":"mp-0","replicas":0,` +
				`"bootstrap":{"configRef":{"name":"c1-mp-0-boot"}},"infrastructureRef":{"name":"c1-mp-0-infra"}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("JSON:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}
