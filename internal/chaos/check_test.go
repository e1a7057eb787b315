package chaos

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

const v1 = "v1.35.8"

func ptr[T any](v T) *T { return &v }

func owned(kind, name string, controls bool) metav1.OwnerReference {
	return metav1.OwnerReference{Kind: kind, Name: name, UID: types.UID(kind + "/" + name), Controller: ptr(controls)}
}

func om(kind, name, cluster string, owners ...metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(kind + "/" + name), Generation: 1,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}, OwnerReferences: owners}
}

// healthy is cluster c0 at rest: one control-plane machine and one worker,
// each with its InMemoryMachine and KubeadmConfig.
func healthy() Snapshot {
	s := Snapshot{
		Clusters: []clusterv1.Cluster{{ObjectMeta: om("Cluster", "c0", "c0"),
			Spec:   clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{Kind: "KubeadmControlPlane", Name: "c0-cp"}},
			Status: clusterv1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1.AvailableCondition, Status: metav1.ConditionTrue}}}}},
		ControlPlanes: []controlplanev1.KubeadmControlPlane{{ObjectMeta: om("KubeadmControlPlane", "c0-cp", "c0", owned("Cluster", "c0", false)),
			Spec:   controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr(int32(1)), Version: v1},
			Status: controlplanev1.KubeadmControlPlaneStatus{ObservedGeneration: 1, Replicas: ptr(int32(1)), ReadyReplicas: ptr(int32(1)), UpToDateReplicas: ptr(int32(1)), Version: v1}}},
		Deployments: []clusterv1.MachineDeployment{{ObjectMeta: om("MachineDeployment", "c0-md", "c0", owned("Cluster", "c0", false)),
			Spec:   clusterv1.MachineDeploymentSpec{ClusterName: "c0", Replicas: ptr(int32(1)), Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{Version: v1}}},
			Status: clusterv1.MachineDeploymentStatus{ObservedGeneration: 1, Replicas: ptr(int32(1)), ReadyReplicas: ptr(int32(1)), UpToDateReplicas: ptr(int32(1))}}},
		Sets: []clusterv1.MachineSet{{ObjectMeta: om("MachineSet", "c0-md-a", "c0", owned("MachineDeployment", "c0-md", true)),
			Spec: clusterv1.MachineSetSpec{ClusterName: "c0", Replicas: ptr(int32(1))}}},
	}
	for _, m := range []struct{ name, owner string }{{"c0-cp-x", "KubeadmControlPlane/c0-cp"}, {"c0-md-a-y", "MachineSet/c0-md-a"}} {
		kind, name, _ := strings.Cut(m.owner, "/")
		s.Machines = append(s.Machines, clusterv1.Machine{ObjectMeta: om("Machine", m.name, "c0", owned(kind, name, true)),
			Spec:   clusterv1.MachineSpec{ClusterName: "c0", Version: v1},
			Status: clusterv1.MachineStatus{Phase: string(clusterv1.MachinePhaseRunning)}})
		s.Others = append(s.Others, other("InMemoryMachine", m.name, "c0", owned("Machine", m.name, true)), other("KubeadmConfig", m.name, "c0", owned("Machine", m.name, true)))
	}
	s.Others = append(s.Others, other("InMemoryCluster", "c0", "c0", owned("Cluster", "c0", true)), other("Secret", "c0-kubeconfig", "c0", owned("KubeadmControlPlane", "c0-cp", true)))
	return s
}

func other(kind, name, cluster string, owners ...metav1.OwnerReference) metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: kind}, ObjectMeta: om(kind, name, cluster, owners...)}
}

func wantC0() Want {
	return Want{Clusters: map[string]ClusterWant{"c0": {ControlPlane: 1, Workers: 1, Version: v1}}, Deleted: map[string]bool{}}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Snapshot, *Want)
		// want are the findings as "kind: first object", in order.
		want []string
	}{
		{name: "at rest", change: func(*Snapshot, *Want) {}},
		{name: "a second worker Machine of one MachineSet", change: func(s *Snapshot, _ *Want) {
			m := s.Machines[1].DeepCopy()
			m.Name, m.UID = "c0-md-a-z", "Machine/c0-md-a-z"
			s.Machines = append(s.Machines, *m)
		}, want: []string{"duplicate: MachineSet/c0-md-a", "duplicate: MachineDeployment/c0-md", "not-converged: Cluster/c0"}},
		{name: "a Machine nobody owns", change: func(s *Snapshot, _ *Want) {
			m := s.Machines[1].DeepCopy()
			m.Name, m.UID, m.OwnerReferences = "stray", "Machine/stray", nil
			s.Machines = append(s.Machines, *m)
		}, want: []string{"duplicate: Machine/stray", "not-converged: Cluster/c0"}},
		{name: "two InMemoryMachines for one Machine", change: func(s *Snapshot, _ *Want) {
			s.Others = append(s.Others, other("InMemoryMachine", "c0-cp-x-2", "c0", owned("Machine", "c0-cp-x", true)))
		}, want: []string{"duplicate: InMemoryMachine/c0-cp-x"}},
		{name: "an InMemoryMachine whose Machine is gone", change: func(s *Snapshot, _ *Want) {
			s.Others = append(s.Others, other("InMemoryMachine", "gone", "c0", owned("Machine", "gone", true)))
		}, want: []string{"orphan: InMemoryMachine/gone"}},
		{name: "a KubeadmConfig no Machine owns", change: func(s *Snapshot, _ *Want) {
			s.Others = append(s.Others, other("KubeadmConfig", "lone", "c0", owned("KubeadmControlPlane", "c0-cp", false)))
		}, want: []string{"orphan: KubeadmConfig/lone"}},
		{name: "a stuck finalizer", change: func(s *Snapshot, _ *Want) {
			s.Others[0].DeletionTimestamp = &metav1.Time{}
			s.Others[0].Finalizers = []string{"inmemorymachine.infrastructure.cluster.x-k8s.io"}
		}, want: []string{"stuck-finalizer: InMemoryMachine/c0-cp-x"}},
		{name: "a deleted cluster gone but for a Secret", change: func(s *Snapshot, w *Want) {
			*s = Snapshot{Others: []metav1.PartialObjectMetadata{other("Secret", "c0-ca", "c0")}}
			*w = Want{Deleted: map[string]bool{"c0": true}}
		}, want: []string{"orphan: Secret/c0-ca"}},
		{name: "a deleted cluster still deleting", change: func(s *Snapshot, w *Want) {
			*s = Snapshot{Clusters: s.Clusters}
			s.Clusters[0].DeletionTimestamp = &metav1.Time{}
			*w = Want{Deleted: map[string]bool{"c0": true}}
		}, want: []string{"stuck-finalizer: Cluster/c0"}},
		{name: "a control plane not yet upgraded", change: func(_ *Snapshot, w *Want) {
			w.Clusters["c0"] = ClusterWant{ControlPlane: 1, Workers: 1, Version: "v1.35.9"}
		}, want: []string{"not-converged: KubeadmControlPlane/c0-cp", "not-converged: MachineDeployment/c0-md", "not-converged: Machine/c0-cp-x", "not-converged: Machine/c0-md-a-y"}},
		{name: "a cluster not Available", change: func(s *Snapshot, _ *Want) {
			s.Clusters[0].Status.Conditions[0].Status = metav1.ConditionFalse
		}, want: []string{"not-converged: Cluster/c0"}},
		{name: "a worker not Running", change: func(s *Snapshot, _ *Want) {
			s.Machines[1].Status.Phase = "Provisioned"
		}, want: []string{"not-converged: Machine/c0-md-a-y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, w := healthy(), wantC0()
			tt.change(&s, &w)
			var got []string
			for _, f := range Check(s, w) {
				got = append(got, string(f.Kind)+": "+f.Objects[0])
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("findings\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}
