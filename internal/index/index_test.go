package index

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestClusterNameOf(t *testing.T) {
	labelled := metav1.ObjectMeta{Labels: map[string]string{clusterv1.ClusterNameLabel: "from-label"}}
	for _, tc := range []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"machine by spec, not label", &clusterv1.Machine{ObjectMeta: labelled, Spec: clusterv1.MachineSpec{ClusterName: "c1"}}, []string{"c1"}},
		{"machine set", &clusterv1.MachineSet{Spec: clusterv1.MachineSetSpec{ClusterName: "c2"}}, []string{"c2"}},
		{"machine deployment", &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c3"}}, []string{"c3"}},
		{"bootstrap config by label", &bootstrapv1.KubeadmConfig{ObjectMeta: labelled}, []string{"from-label"}},
		{"no cluster", &bootstrapv1.KubeadmConfig{}, nil},
	} {
		if got := clusterNameOf(tc.obj); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// countingIndexer refuses a second index of the same kind, as a cache does.
type countingIndexer struct{ indexed map[string]int }

func (c *countingIndexer) IndexField(_ context.Context, obj client.Object, field string, _ client.IndexerFunc) error {
	key := field + "/" + typeName(obj)
	c.indexed[key]++
	if c.indexed[key] > 1 {
		return errors.New("indexer conflict")
	}
	return nil
}

func typeName(obj client.Object) string {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o.GroupVersionKind().Kind
	case *clusterv1.Machine:
		return "Machine"
	case *clusterv1.MachineSet:
		return "MachineSet"
	}
	return "other"
}

func TestByClusterNameIndexesEachKindOncePerCache(t *testing.T) {
	ctx := context.Background()
	a, b := &countingIndexer{indexed: map[string]int{}}, &countingIndexer{indexed: map[string]int{}}
	for _, idx := range []*countingIndexer{a, a, b} {
		if err := ByClusterName(ctx, idx, &clusterv1.Machine{}, &clusterv1.MachineSet{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, idx := range map[string]*countingIndexer{"a": a, "b": b} {
		if idx.indexed[ClusterName+"/Machine"] != 1 || idx.indexed[ClusterName+"/MachineSet"] != 1 {
			t.Errorf("cache %s indexed %v, want each kind once", name, idx.indexed)
		}
	}
}

// Each provider kind met as an unstructured object gets its own index, once.
func TestByMachineSetNameIndexesEachUnstructuredKindOnce(t *testing.T) {
	ctx := context.Background()
	idx := &countingIndexer{indexed: map[string]int{}}
	of := func(kind string) client.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: kind})
		return u
	}
	for _, kind := range []string{"LocalMachine", "LocalMachine", "InMemoryMachine"} {
		if err := ByMachineSetName(ctx, idx, of(kind)); err != nil {
			t.Fatal(err)
		}
	}
	if idx.indexed[MachineSetName+"/LocalMachine"] != 1 || idx.indexed[MachineSetName+"/InMemoryMachine"] != 1 {
		t.Errorf("indexed %v, want each kind once", idx.indexed)
	}
}
