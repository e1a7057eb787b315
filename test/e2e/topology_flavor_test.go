package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/test/fixture"
)

// The local provider's topology flavor, as a user runs it: `capstan up
// --cluster --flavor topology` brings the Cluster up from the built-in class
// capstan-local through Capstan's webhooks and controllers (the control
// plane's API server runs with the class's --profiling patch); the workers'
// Nodes carry the label the class's patch gives them; a MachineDeployment of
// the dedicated-worker class, added through the topology with its own
// labels, registers its Node with the class's taint; deleting the Cluster
// removes its Machines.
func TestLocalTopologyFlavor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a workload cluster of several machines")
	}
	p := newPlane(t)
	ctx := context.Background()
	out, code := capstan(t, "up", "--state-dir", p.dir, "--cluster", "topo", "--flavor", "topology", "--worker-machine-count", "1", "--cluster-timeout", "4m")
	if code != 0 {
		t.Fatalf("capstan up --cluster --flavor topology exited %d:\n%s\nlog:\n%s", code, out, tail(p.log(), 60))
	}
	if !strings.Contains(out, "Cluster topo is ready") {
		t.Fatalf("up did not report the cluster ready:\n%s", out)
	}
	mc := p.client()
	wcfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dir, "topo.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	wl := kubernetes.NewForConfigOrDie(wcfg)

	// One Node per class label: the control plane has none, md-0's worker
	// has default-worker.
	if why := nodesLabelled(ctx, wl, map[string]int{"": 1, "default-worker": 1}); why != "" {
		t.Errorf("after up: %s", why)
	}

	// A dedicated worker with labels of its own, added through the topology.
	add := `[{"op":"add","path":"/spec/topology/workers/machineDeployments/-","value":{"class":"dedicated-worker","name":"db","replicas":1,` +
		`"variables":{"overrides":[{"name":"workerNodeLabels","value":{"tier":"db"}}]}}}]`
	if err := mc.Patch(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "topo"}}, client.RawPatch(types.JSONPatchType, []byte(add))); err != nil {
		t.Fatal(err)
	}
	waitReadyNodes(t, wl, 3, 4*time.Minute)
	fixture.Eventually(t, "the dedicated worker's Node labelled and tainted", time.Minute, func(ctx context.Context) string {
		if why := nodesLabelled(ctx, wl, map[string]int{"": 1, "default-worker": 1, "dedicated-worker": 1}); why != "" {
			return why
		}
		nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "capstan.dev/worker-class=dedicated-worker"})
		if err != nil {
			return err.Error()
		}
		n := nodes.Items[0]
		want := corev1.Taint{Key: "capstan.dev/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
		for _, taint := range n.Spec.Taints {
			if taint.Key == want.Key && taint.Value == want.Value && taint.Effect == want.Effect {
				return fixture.Unless(n.Labels["tier"] == "db", fmt.Sprintf("Node %s labels %v, want tier=db", n.Name, n.Labels))
			}
		}
		return fmt.Sprintf("Node %s taints %v, want %v", n.Name, n.Spec.Taints, want)
	})

	if err := mc.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "topo"}}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the Cluster's Machines gone", 3*time.Minute, func(ctx context.Context) string {
		machines := &clusterv1.MachineList{}
		if err := mc.List(ctx, machines, client.InNamespace("default")); err != nil {
			return err.Error()
		}
		return fixture.Unless(len(machines.Items) == 0, fmt.Sprintf("%d Machines left", len(machines.Items)))
	})
}

// nodesLabelled is the "why not yet" of a workload cluster whose Nodes
// should count, by their capstan.dev/worker-class label ("" for none), as
// want says.
func nodesLabelled(ctx context.Context, wl kubernetes.Interface, want map[string]int) string {
	nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	got := map[string]int{}
	for _, n := range nodes.Items {
		got[n.Labels["capstan.dev/worker-class"]]++
	}
	return fixture.Unless(fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("Nodes by worker class %v, want %v", got, want))
}
