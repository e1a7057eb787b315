package move

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

func k(kind, name string) Key {
	g := "cluster.x-k8s.io"
	switch kind {
	case "Secret", "ConfigMap":
		g = ""
	case "LocalMachine", "LocalCluster":
		g = "infrastructure.cluster.x-k8s.io"
	case "KubeadmConfig":
		g = "bootstrap.cluster.x-k8s.io"
	case "KubeadmControlPlane":
		g = "controlplane.cluster.x-k8s.io"
	}
	return Key{Group: g, Kind: kind, Namespace: "ns", Name: name}
}

func n(key Key, owners ...Key) Node { return Node{Key: key, Owners: owners} }

func names(batches [][]Key) [][]string {
	var out [][]string
	for _, b := range batches {
		var s []string
		for _, key := range b {
			s = append(s, key.Kind+"/"+key.Name)
		}
		out = append(out, s)
	}
	return out
}

func TestOrder(t *testing.T) {
	cluster, kcp, lc := k("Cluster", "c"), k("KubeadmControlPlane", "c-cp"), k("LocalCluster", "c")
	m1, lm1, kc1, data1 := k("Machine", "m1"), k("LocalMachine", "m1"), k("KubeadmConfig", "m1"), k("Secret", "m1")
	md, ms, m2 := k("MachineDeployment", "md"), k("MachineSet", "ms"), k("Machine", "m2")
	ca, cm := k("Secret", "c-ca"), k("ConfigMap", "extra")
	global := Key{Group: "infrastructure.cluster.x-k8s.io", Kind: "TestIdentity", Name: "id"}
	globalChild := Key{Group: "infrastructure.cluster.x-k8s.io", Kind: "TestIdentity", Name: "id-child"}
	identitySecret := k("Secret", "id-creds")
	tests := []struct {
		name    string
		nodes   []Node
		present []Key
		want    [][]string
		wantErr string
	}{
		{name: "empty", nodes: nil, want: nil},
		{
			name: "a cluster graph in owner order",
			nodes: []Node{
				n(data1, kc1), n(kc1, m1), n(lm1, m1), n(m1, kcp), n(kcp, cluster), n(lc, cluster), n(cluster),
				n(ca, kcp), n(cm), n(m2, ms), n(ms, md), n(md, cluster),
			},
			want: [][]string{
				{"Cluster/c", "ConfigMap/extra"},
				{"KubeadmControlPlane/c-cp", "LocalCluster/c", "MachineDeployment/md"},
				{"Machine/m1", "MachineSet/ms", "Secret/c-ca"},
				{"KubeadmConfig/m1", "LocalMachine/m1", "Machine/m2"},
				{"Secret/m1"},
			},
		},
		{
			name:  "an object with two owners waits for the later one",
			nodes: []Node{n(data1, kc1, cluster), n(kc1, m1), n(m1, cluster), n(cluster)},
			want:  [][]string{{"Cluster/c"}, {"Machine/m1"}, {"KubeadmConfig/m1"}, {"Secret/m1"}},
		},
		{
			name:  "a repeated owner reference counts once",
			nodes: []Node{n(m1, cluster, cluster), n(cluster)},
			want:  [][]string{{"Cluster/c"}, {"Machine/m1"}},
		},
		{
			name:    "owners already in the target are accepted",
			nodes:   []Node{n(m1, kcp), n(lm1, m1)},
			present: []Key{kcp},
			want:    [][]string{{"Machine/m1"}, {"LocalMachine/m1"}},
		},
		{
			name:    "a missing owner is named",
			nodes:   []Node{n(m1, kcp), n(cluster)},
			wantErr: "KubeadmControlPlane.controlplane.cluster.x-k8s.io ns/c-cp",
		},
		{
			name:    "a self-owned object is a cycle",
			nodes:   []Node{n(m1, m1)},
			wantErr: "cycle (Machine ns/m1 is owned by Machine ns/m1)",
		},
		{
			name:    "a cycle of three is named in full",
			nodes:   []Node{n(cluster), n(m1, m2, cluster), n(m2, ms), n(ms, m1), n(lm1, m1)},
			wantErr: "cycle (Machine ns/m1 is owned by Machine ns/m2 is owned by MachineSet ns/ms is owned by Machine ns/m1)",
		},
		{
			name: "cluster-scoped objects come first in their batch, in owner order",
			nodes: []Node{
				n(m1, cluster), n(cluster), n(globalChild, global), n(global), n(identitySecret, global),
			},
			want: [][]string{
				{"TestIdentity/id", "Cluster/c"},
				{"TestIdentity/id-child", "Machine/m1", "Secret/id-creds"},
			},
		},
		{
			name:    "a cluster-scoped object owned by a namespaced one is refused",
			nodes:   []Node{n(cluster), n(global, cluster)},
			wantErr: "TestIdentity.infrastructure.cluster.x-k8s.io id is cluster-scoped but owned by Cluster ns/c",
		},
		{
			name:    "a duplicate is refused",
			nodes:   []Node{n(cluster), n(cluster)},
			wantErr: "listed twice",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			present := func(key Key) bool {
				for _, p := range tt.present {
					if p == key {
						return true
					}
				}
				return false
			}
			got, err := Order(tt.nodes, present)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(names(got), tt.want) {
				t.Fatalf("got  %v\nwant %v", names(got), tt.want)
			}
		})
	}
}

func TestOrderErrorTypes(t *testing.T) {
	_, err := Order([]Node{n(k("Machine", "m"), k("Cluster", "gone"))}, nil)
	var missing *MissingOwnerError
	if !errors.As(err, &missing) || len(missing.Missing) != 1 {
		t.Fatalf("got %v, want a MissingOwnerError", err)
	}
	_, err = Order([]Node{n(k("Machine", "a"), k("Machine", "b")), n(k("Machine", "b"), k("Machine", "a"))}, nil)
	var cycle *CycleError
	if !errors.As(err, &cycle) || len(cycle.Cycle) != 3 || cycle.Cycle[0] != cycle.Cycle[2] {
		t.Fatalf("got %v, want a CycleError of two objects", err)
	}
}

func TestDeletionOrderReversesCreation(t *testing.T) {
	batches := [][]Key{{k("Cluster", "c")}, {k("Machine", "a"), k("Machine", "b")}, {k("Secret", "s")}}
	got := DeletionOrder(batches)
	want := []Key{k("Secret", "s"), k("Machine", "b"), k("Machine", "a"), k("Cluster", "c")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestOrderProperties checks, on random forests of owner references, that
// every object comes exactly once and after all its owners, and that
// deletion puts every object before its owners; and that adding a back
// edge always yields a cycle error.
func TestOrderProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 300; round++ {
		count := 1 + rng.Intn(40)
		nodes := make([]Node, count)
		for i := range nodes {
			nodes[i].Key = k("Machine", fmt.Sprintf("o%02d", i))
			// Owners only among earlier objects: acyclic by construction.
			for j := 0; j < i && len(nodes[i].Owners) < 3; j++ {
				if rng.Intn(i+1) == 0 {
					nodes[i].Owners = append(nodes[i].Owners, nodes[j].Key)
				}
			}
		}
		rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		batches, err := Order(nodes, nil)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		pos := map[Key]int{}
		for b, batch := range batches {
			for _, key := range batch {
				if _, dup := pos[key]; dup {
					t.Fatalf("round %d: %s twice", round, key)
				}
				pos[key] = b
			}
		}
		if len(pos) != count {
			t.Fatalf("round %d: %d objects ordered, want %d", round, len(pos), count)
		}
		for _, node := range nodes {
			for _, o := range node.Owners {
				if pos[o] >= pos[node.Key] {
					t.Fatalf("round %d: %s in batch %d, its owner %s in batch %d", round, node.Key, pos[node.Key], o, pos[o])
				}
			}
		}
		del := map[Key]int{}
		for i, key := range DeletionOrder(batches) {
			del[key] = i
		}
		for _, node := range nodes {
			for _, o := range node.Owners {
				if del[o] <= del[node.Key] {
					t.Fatalf("round %d: owner %s deleted before %s", round, o, node.Key)
				}
			}
		}

		// A back edge from some owner to one of its (transitive) children.
		for i := range nodes {
			if len(nodes[i].Owners) == 0 {
				continue
			}
			owner := nodes[i].Owners[0]
			for j := range nodes {
				if nodes[j].Key == owner {
					nodes[j].Owners = append(nodes[j].Owners, nodes[i].Key)
				}
			}
			var cycle *CycleError
			if _, err := Order(nodes, nil); !errors.As(err, &cycle) {
				t.Fatalf("round %d: back edge %s -> %s: got %v, want a cycle", round, owner, nodes[i].Key, err)
			}
			break
		}
	}
}

func TestKeptInSource(t *testing.T) {
	global := Key{Group: "infrastructure.cluster.x-k8s.io", Kind: "TestIdentity", Name: "id"}
	globalChild := Key{Group: "infrastructure.cluster.x-k8s.io", Kind: "TestIdentity", Name: "id-child"}
	secret, cluster, machine := k("Secret", "id-creds"), k("Cluster", "c"), k("Machine", "m")
	nodes := []Node{n(secret, global), n(machine, cluster), n(globalChild, global), n(cluster), n(global)}
	batches, err := Order(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := keptInSource(nodes, batches)
	want := map[Key]bool{global: true, globalChild: true, secret: true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
}
