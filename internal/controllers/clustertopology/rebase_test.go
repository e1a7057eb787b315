package clustertopology_test

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	fx "capstan.dev/capstan/test/fixture"
)

// topologyRefs are the templates a topology's control plane and its one
// MachineDeployment use.
type topologyRefs struct {
	controlPlaneMachine, workerMachine, workerBootstrap string
}

func readRefs(ctx context.Context, ns, controlPlane, deployment string) (topologyRefs, error) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: controlPlane}, kcp); err != nil {
		return topologyRefs{}, err
	}
	md := &clusterv1.MachineDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: deployment}, md); err != nil {
		return topologyRefs{}, err
	}
	return topologyRefs{
		controlPlaneMachine: kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name,
		workerMachine:       md.Spec.Template.Spec.InfrastructureRef.Name,
		workerBootstrap:     md.Spec.Template.Spec.Bootstrap.ConfigRef.Name,
	}, nil
}

// TestRebase: with desired.Compute and Capstan's own kinds, a Cluster moved
// to a compatible ClusterClass (spec.topology.classRef) gets templates
// cloned from the new class for its control plane and MachineDeployment,
// the former ones are deleted, and TopologyReconciled is True; a move to a
// class whose infrastructure cluster is of another kind is refused by name
// and changes nothing.
func TestRebase(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	objs := fx.ReadObjects(t, "testdata/rebase.yaml", ns)
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		markReconciled(t, &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	f := &fixture{ns: ns, cluster: &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef:     clusterv1.ClusterClassRef{Name: "a"},
			Version:      "v1.35.8",
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
				{Class: "default-worker", Name: "md", Replicas: ptr.To[int32](1)},
			}},
		}},
	}}
	fx.Create(t, env.Client, f.cluster)
	c := f.reconciled(t)
	controlPlane := c.Spec.ControlPlaneRef.Name
	mds := &clusterv1.MachineDeploymentList{}
	if err := env.Client.List(ctx, mds, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md"}); err != nil || len(mds.Items) != 1 {
		t.Fatalf("MachineDeployments of topology md: %d, %v", len(mds.Items), err)
	}
	deployment := mds.Items[0].Name
	before, err := readRefs(ctx, ns, controlPlane, deployment)
	if err != nil {
		t.Fatal(err)
	}
	rebase := func(class string) {
		t.Helper()
		body := fmt.Sprintf(`{"spec":{"topology":{"classRef":{"name":%q}}}}`, class)
		if err := env.Client.Patch(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"}}, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
			t.Fatal(err)
		}
	}

	rebase("b")
	var after topologyRefs
	fx.Eventually(t, "the control plane and MachineDeployment on class b's templates", wait, func(ctx context.Context) string {
		var err error
		if after, err = readRefs(ctx, ns, controlPlane, deployment); err != nil {
			return err.Error()
		}
		for _, ref := range []struct{ what, old, now string }{
			{"control plane's machine template", before.controlPlaneMachine, after.controlPlaneMachine},
			{"MachineDeployment's machine template", before.workerMachine, after.workerMachine},
			{"MachineDeployment's bootstrap template", before.workerBootstrap, after.workerBootstrap},
		} {
			if ref.now == ref.old {
				return fmt.Sprintf("the %s is still %s", ref.what, ref.old)
			}
		}
		return ""
	})
	for _, name := range []string{after.controlPlaneMachine, after.workerMachine} {
		m := &localv1.LocalMachineTemplate{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			t.Fatal(err)
		}
		if m.Annotations[clusterv1.TemplateClonedFromNameAnnotation] != "machine-b" || m.Spec.Template.ObjectMeta.Labels["example.com/class"] != "b" {
			t.Errorf("LocalMachineTemplate %s: annotations %v, template labels %v; want a clone of class b's machine-b", name, m.Annotations, m.Spec.Template.ObjectMeta.Labels)
		}
	}
	boot := &bootstrapv1.KubeadmConfigTemplate{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: after.workerBootstrap}, boot); err != nil {
		t.Fatal(err)
	}
	if args := boot.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs; len(args) != 1 || args[0].Name != "v" || ptr.Deref(args[0].Value, "") != "4" {
		t.Errorf("KubeadmConfigTemplate %s kubelet args %+v; want class b's patch (v=4)", boot.Name, args)
	}
	fx.Eventually(t, "class a's templates deleted", wait, func(ctx context.Context) string {
		for _, old := range []client.Object{
			&localv1.LocalMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: before.controlPlaneMachine}},
			&localv1.LocalMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: before.workerMachine}},
			&bootstrapv1.KubeadmConfigTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: before.workerBootstrap}},
		} {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), old); !apierrors.IsNotFound(err) {
				return fmt.Sprintf("%T %s: %v", old, old.GetName(), err)
			}
		}
		return ""
	})
	f.reconciled(t)

	// Class c's infrastructure cluster is an InMemoryCluster: refused,
	// nothing of c applied.
	rebase("c")
	f.condition(t, metav1.ConditionFalse, clusterv1.ClusterTopologyReconciledFailedReason,
		"infrastructure cluster would change from LocalCluster.infrastructure.cluster.x-k8s.io to InMemoryCluster.infrastructure.cluster.x-k8s.io")
	if now, err := readRefs(ctx, ns, controlPlane, deployment); err != nil || now != after {
		t.Errorf("templates after the refused rebase %+v (%v), want %+v", now, err, after)
	}
	inMemory := &inmemoryv1.InMemoryClusterList{}
	if err := env.Client.List(ctx, inMemory, client.InNamespace(ns)); err != nil || len(inMemory.Items) != 0 {
		t.Errorf("InMemoryClusters made by a refused rebase: %d (%v)", len(inMemory.Items), err)
	}
}
