package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/test/fixture"
)

// TestLocalMachinePool runs a MachinePool of local machines with the real
// binary: `capstan up --cluster`, then a pool of two machines joined from
// one KubeadmConfig, scaled 2 → 4 → 1, rolled to a new Kubernetes version
// one machine at a time, shown by `capstan describe cluster`, and deleted
// with nothing left running.
func TestLocalMachinePool(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a workload cluster of several machines")
	}
	p := newPlane(t)
	ctx := context.Background()
	out, code := capstan(t, "up", "--state-dir", p.dir, "--cluster", "demo", "--cluster-timeout", "4m")
	if code != 0 {
		t.Fatalf("capstan up --cluster exited %d:\n%s\nlog:\n%s", code, out, tail(p.log(), 60))
	}
	mc := p.client()
	wcfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dir, "demo.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	wl := kubernetes.NewForConfigOrDie(wcfg)
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-control-plane"}, kcp); err != nil {
		t.Fatal(err)
	}
	version := kcp.Spec.Version

	cfg := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-pool"},
		Spec: bootstrapv1.KubeadmConfigSpec{JoinConfiguration: bootstrapv1.JoinConfiguration{
			NodeRegistration: bootstrapv1.NodeRegistrationOptions{Name: "{{ ds.meta_data.local_hostname }}"},
		}},
	}
	lmp := &localv1.LocalMachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-pool"},
		Spec:       localv1.LocalMachinePoolSpec{Strategy: localv1.LocalMachinePoolStrategy{MaxSurge: ptr.To[int32](1)}},
	}
	mp := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-pool"},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: "demo",
			Replicas:    ptr.To[int32](2),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName:       "demo",
				Version:           version,
				Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: cfg.Name}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: localv1.GroupVersion.Group, Kind: "LocalMachinePool", Name: lmp.Name},
			}},
		},
	}
	for _, obj := range []client.Object{cfg, lmp, mp} {
		if err := mc.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	// settled says why the pool is not yet n Ready Nodes of version, each a
	// Machine of the pool listed in status.nodeRefs.
	settled := func(n int, version string) func(context.Context) string {
		return func(context.Context) string {
			if err := mc.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
				return err.Error()
			}
			st := mp.Status
			if ptr.Deref(st.Replicas, 0) != int32(n) || ptr.Deref(st.ReadyReplicas, 0) != int32(n) || ptr.Deref(st.UpToDateReplicas, 0) != int32(n) || len(st.NodeRefs) != n {
				return fmt.Sprintf("MachinePool replicas %d, ready %d, up to date %d, nodeRefs %d, phase %s",
					ptr.Deref(st.Replicas, 0), ptr.Deref(st.ReadyReplicas, 0), ptr.Deref(st.UpToDateReplicas, 0), len(st.NodeRefs), st.Phase)
			}
			machines := &clusterv1.MachineList{}
			if err := mc.List(ctx, machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachinePoolNameLabel: mp.Name}); err != nil {
				return err.Error()
			}
			var names []string
			for _, m := range machines.Items {
				if m.Spec.Version != version || m.Status.NodeRef.Name == "" {
					return fmt.Sprintf("Machine %s: version %s, node %q", m.Name, m.Spec.Version, m.Status.NodeRef.Name)
				}
				names = append(names, m.Name)
			}
			nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err.Error()
			}
			var poolNodes []string
			for i := range nodes.Items {
				node := &nodes.Items[i]
				if !strings.HasPrefix(node.Name, mp.Name+"-") {
					continue
				}
				if !nodeIsReady(node) || node.Status.NodeInfo.KubeletVersion != version {
					return fmt.Sprintf("Node %s: ready %v, kubelet %s", node.Name, nodeIsReady(node), node.Status.NodeInfo.KubeletVersion)
				}
				poolNodes = append(poolNodes, node.Name)
			}
			sort.Strings(names)
			sort.Strings(poolNodes)
			if strings.Join(names, ",") != strings.Join(poolNodes, ",") {
				return fmt.Sprintf("Machines %v, pool Nodes %v", names, poolNodes)
			}
			return ""
		}
	}
	fixture.Eventually(t, "two pool machines joined", 4*time.Minute, settled(2, version))

	patch := func(body string) {
		t.Helper()
		if err := mc.Patch(ctx, mp, client.RawPatch("application/merge-patch+json", []byte(body))); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"spec":{"replicas":4}}`)
	fixture.Eventually(t, "scaled up to four", 4*time.Minute, settled(4, version))
	patch(`{"spec":{"replicas":1}}`)
	fixture.Eventually(t, "scaled down to one", 3*time.Minute, settled(1, version))

	const next = "v1.35.9"
	patch(`{"spec":{"template":{"spec":{"version":"` + next + `"}}}}`)
	fixture.Eventually(t, "rolled to "+next, 4*time.Minute, settled(1, next))

	out, code = capstan(t, "describe", "cluster", "demo", "--kubeconfig", filepath.Join(p.dir, "kubeconfig"), "--grouping=false")
	if code != 0 {
		t.Fatalf("capstan describe cluster exited %d:\n%s", code, out)
	}
	machines := &clusterv1.MachineList{}
	if err := mc.List(ctx, machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachinePoolNameLabel: mp.Name}); err != nil || len(machines.Items) != 1 {
		t.Fatalf("pool Machines %v, %v", machines.Items, err)
	}
	for _, want := range []string{"MachinePool/demo-pool", "1/1", "Machine/" + machines.Items[0].Name} {
		if !strings.Contains(out, want) {
			t.Errorf("describe does not show %q:\n%s", want, out)
		}
	}
	t.Logf("capstan describe cluster demo:\n%s", out)

	// Deleting the pool stops its machines and leaves nothing of it.
	lms := &localv1.LocalMachineList{}
	if err := mc.List(ctx, lms, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachinePoolNameLabel: mp.Name}); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, lm := range lms.Items {
		if lm.Status.Process.PID != 0 {
			pids = append(pids, int(lm.Status.Process.PID))
		}
	}
	if len(pids) != 1 {
		t.Fatalf("pool machine processes %v, want one", pids)
	}
	if err := mc.Delete(ctx, mp); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the pool gone with its machines", 3*time.Minute, func(context.Context) string {
		var left []string
		for _, obj := range []client.Object{mp, lmp, cfg} {
			if err := mc.Get(ctx, client.ObjectKeyFromObject(obj), obj); err == nil {
				left = append(left, fmt.Sprintf("%T %s", obj, obj.GetName()))
			}
		}
		for _, list := range []client.ObjectList{&localv1.LocalMachineList{}, &clusterv1.MachineList{}} {
			if err := mc.List(ctx, list, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachinePoolNameLabel: mp.Name}); err != nil {
				return err.Error()
			}
			if n := itemCount(list); n > 0 {
				left = append(left, fmt.Sprintf("%d %T", n, list))
			}
		}
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				left = append(left, fmt.Sprintf("process %d", pid))
			}
		}
		nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, n := range nodes.Items {
			if strings.HasPrefix(n.Name, mp.Name+"-") {
				left = append(left, "Node "+n.Name)
			}
		}
		return strings.Join(left, ", ")
	})
}
