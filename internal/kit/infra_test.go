package kit_test

import (
	"context"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"capstan.dev/capstan/internal/scheme"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/kit"
)

func TestToInfrastructure(t *testing.T) {
	const group = "infrastructure.cluster.x-k8s.io"
	ref := func(g, kind, name string) clusterv1.ContractVersionedObjectReference {
		return clusterv1.ContractVersionedObjectReference{APIGroup: g, Kind: kind, Name: name}
	}
	cluster := func(r clusterv1.ContractVersionedObjectReference) client.Object {
		return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Spec: clusterv1.ClusterSpec{InfrastructureRef: r}}
	}
	machine := func(r clusterv1.ContractVersionedObjectReference) client.Object {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}, Spec: clusterv1.MachineSpec{InfrastructureRef: r}}
	}
	tests := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"cluster of the kind", cluster(ref(group, "QEMUCluster", "x")), "ns/x"},
		{"machine of the kind", machine(ref(group, "QEMUCluster", "y")), "ns/y"},
		{"other kind", cluster(ref(group, "LocalCluster", "x")), ""},
		{"other group", cluster(ref("example.com", "QEMUCluster", "x")), ""},
		{"no name", cluster(ref(group, "QEMUCluster", "")), ""},
		{"not a core object", &clusterv1.MachineSet{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reqs := kit.ToInfrastructure(group, "QEMUCluster")(context.Background(), tc.obj)
			got := ""
			if len(reqs) == 1 {
				got = reqs[0].String()
			}
			if got != tc.want || len(reqs) > 1 {
				t.Errorf("got %v, want %q", reqs, tc.want)
			}
		})
	}
}

func TestCoreOwnerName(t *testing.T) {
	obj := &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "example.com/v1", Kind: "Cluster", Name: "not-core"},
		{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Machine", Name: "old-version"},
		{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c"},
	}}
	for kind, want := range map[string]string{"Cluster": "c", "Machine": "old-version", "MachineSet": ""} {
		if got := kit.CoreOwnerName(obj, kind); got != want {
			t.Errorf("CoreOwnerName(%s) = %q, want %q", kind, got, want)
		}
	}
}

// A Cluster and the object it owns both map to the members labelled with
// the Cluster's name, in its namespace only; an object no Cluster owns maps
// to nothing.
func TestToClusterMembers(t *testing.T) {
	member := func(ns, name, cluster string) *clusterv1.Machine {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		member("a", "m1", "demo"), member("a", "m2", "demo"), member("a", "other", "else"), member("b", "m3", "demo"),
	).Build()
	toMembers := kit.ToClusterMembers(c, func() client.ObjectList { return &clusterv1.MachineList{} })
	owned := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "infra",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: clusterv1.ClusterKind, Name: "demo"}}}}
	for name, tc := range map[string]struct {
		obj  client.Object
		want []string
	}{
		"the Cluster":         {&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "demo"}}, []string{"m1", "m2"}},
		"an object it owns":   {owned, []string{"m1", "m2"}},
		"an object not owned": {&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "loose"}}, nil},
	} {
		var got []string
		for _, r := range toMembers(context.Background(), tc.obj) {
			got = append(got, r.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestProviderOptions(t *testing.T) {
	for workers, want := range map[int]int{-1: 10, 0: 10, 1: 1, 25: 25} {
		if got := kit.ProviderOptions(workers).MaxConcurrentReconciles; got != want {
			t.Errorf("ProviderOptions(%d) runs %d reconciles at once, want %d", workers, got, want)
		}
	}
}
