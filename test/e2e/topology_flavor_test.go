package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/test/fixture"
)

// The local provider's topology flavor, as a user runs it, through the whole
// life of a managed topology (issue 17), on one cluster whose steps follow
// each other: `capstan up --cluster --flavor topology` brings it up from the
// built-in class capstan-local through Capstan's webhooks and controllers
// (the API server runs with the class's --profiling patch), and a
// MachineDeployment of the dedicated-worker class is added beside md-0 (one
// control-plane machine, two MachineDeployments of one worker each: the
// smallest cluster that shows every step). Then:
//   - topology.version rises: the control plane rolls first while a probe
//     through the cluster's endpoint sees no failed request, then the workers;
//   - a variable a patch puts in the workers' bootstrap templates changes:
//     the templates rotate and every worker is replaced;
//   - md-0 scales through the topology; the dedicated MachineDeployment is
//     removed from it and goes with its Machine, Node and templates;
//   - the Cluster is rebased onto a compatible copy of capstan-local whose
//     node-label patch differs: the workers roll to its templates;
//   - deleting the Cluster leaves nothing: objects, the templates the
//     topology made, the kubeconfig, machine processes and directories.
func TestLocalTopologyFlavor(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a workload cluster of several machines")
	}
	p := newPlane(t)
	ctx := context.Background()
	started := time.Now()
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
	topo := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "topo"}}
	patch := func(t *testing.T, jsonPatch string) {
		t.Helper()
		if err := mc.Patch(ctx, topo.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(jsonPatch))); err != nil {
			t.Fatal(err)
		}
	}
	step := func(name string, f func(t *testing.T)) {
		began := time.Now()
		ok := t.Run(name, f)
		t.Logf("%s: %.0fs", name, time.Since(began).Seconds())
		if !ok {
			t.FailNow()
		}
	}
	defer func() { t.Logf("the whole scenario took %.0fs", time.Since(started).Seconds()) }()

	step("up with md-0 and a dedicated MachineDeployment", func(t *testing.T) {
		if why := nodesLabelled(ctx, wl, map[string]int{"": 1, "default-worker": 1}); why != "" {
			t.Errorf("after up: %s", why)
		}
		// A dedicated worker with labels of its own, added through the
		// topology.
		patch(t, `[{"op":"add","path":"/spec/topology/workers/machineDeployments/-","value":{"class":"dedicated-worker","name":"db","replicas":1,`+
			`"variables":{"overrides":[{"name":"workerNodeLabels","value":{"tier":"db"}}]}}}]`)
		waitReadyNodes(t, wl, 3, 4*time.Minute)
		fixture.Eventually(t, "the dedicated worker's Node labelled and tainted", time.Minute, func(ctx context.Context) string {
			if why := nodesLabelled(ctx, wl, map[string]int{"": 1, "default-worker": 1, "dedicated-worker": 1}); why != "" {
				return why
			}
			n, why := dedicatedNode(ctx, wl)
			if why != "" {
				return why
			}
			return fixture.Unless(n.Labels["tier"] == "db", fmt.Sprintf("Node %s labels %v, want tier=db", n.Name, n.Labels))
		})
	})

	step("upgrade: the control plane without a failed request, then the workers", func(t *testing.T) {
		const next = "v1.35.9"
		// One control-plane machine is enough: the class's maxSurge 1 starts
		// the new machine before the old one goes, and the load balancer
		// sends new connections only to API servers that answer /readyz.
		probe := startAPIProbe(wcfg)
		patch(t, `[{"op":"replace","path":"/spec/topology/version","value":"`+next+`"}]`)
		fixture.Eventually(t, "the control plane at "+next, 5*time.Minute, func(ctx context.Context) string {
			if why := fixture.UpgradedControlPlaneFirst(ctx, t, mc, "default", next); why == "" {
				return ""
			}
			kcp := &controlplanev1.KubeadmControlPlane{}
			if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: topologyControlPlane(ctx, t, mc)}, kcp); err != nil {
				return err.Error()
			}
			st := kcp.Status
			return fixture.Unless(st.Version == next && ptr.Deref(st.Replicas, 0) == 1 && ptr.Deref(st.UpToDateReplicas, 0) == 1 && ptr.Deref(st.ReadyReplicas, 0) == 1,
				fmt.Sprintf("control plane at %q: replicas %d, up to date %d, ready %d", st.Version, ptr.Deref(st.Replicas, 0), ptr.Deref(st.UpToDateReplicas, 0), ptr.Deref(st.ReadyReplicas, 0)))
		})
		ok, failed, lastErr := probe.stop()
		t.Logf("API probe through the endpoint while the control plane rolled: %d requests answered, %d failed", ok, failed)
		if failed > 0 {
			t.Errorf("%d probe requests failed while the control plane rolled; last: %v", failed, lastErr)
			logMachines(t, filepath.Join(p.dir, "local", "default", "topo"), "etcd", "load balancer", "API server")
		}
		fixture.Eventually(t, "every Machine at "+next+", the control plane first", 5*time.Minute, func(ctx context.Context) string {
			if why := fixture.UpgradedControlPlaneFirst(ctx, t, mc, "default", next); why != "" {
				return why
			}
			return fixture.RunningMachines(ctx, mc, "default", 3)
		})
		waitReadyNodes(t, wl, 3, 2*time.Minute)
	})

	step("a variable change rolls the workers", func(t *testing.T) {
		before := workerMachines(ctx, t, mc)
		// The Cluster's workerNodeLabels and db's override of it, in one
		// write: both MachineDeployments' bootstrap templates change.
		patch(t, `[{"op":"test","path":"/spec/topology/variables/2/name","value":"workerNodeLabels"},`+
			`{"op":"replace","path":"/spec/topology/variables/2/value","value":{"wave":"2"}},`+
			`{"op":"test","path":"/spec/topology/workers/machineDeployments/1/name","value":"db"},`+
			`{"op":"replace","path":"/spec/topology/workers/machineDeployments/1/variables/overrides/0/value","value":{"tier":"db","wave":"2"}}]`)
		waitWorkersReplaced(t, mc, wl, before, "wave", "2", 2)
	})

	step("scale md-0 through the topology", func(t *testing.T) {
		patch(t, `[{"op":"test","path":"/spec/topology/workers/machineDeployments/0/name","value":"md-0"},`+
			`{"op":"replace","path":"/spec/topology/workers/machineDeployments/0/replicas","value":2}]`)
		waitReadyNodes(t, wl, 4, 4*time.Minute)
		fixture.Eventually(t, "md-0's MachineDeployment at 2", time.Minute, func(ctx context.Context) string {
			if why := nodesLabelled(ctx, wl, map[string]int{"": 1, "default-worker": 2, "dedicated-worker": 1}); why != "" {
				return why
			}
			return fixture.RunningMachines(ctx, mc, "default", 4)
		})
	})

	step("remove the dedicated MachineDeployment", func(t *testing.T) {
		patch(t, `[{"op":"test","path":"/spec/topology/workers/machineDeployments/1/name","value":"db"},`+
			`{"op":"remove","path":"/spec/topology/workers/machineDeployments/1"}]`)
		db := client.MatchingLabels{clusterv1.ClusterTopologyMachineDeploymentNameLabel: "db"}
		fixture.Eventually(t, "db gone with its Machine, Node and templates", 3*time.Minute, func(ctx context.Context) string {
			var left []string
			for _, list := range []client.ObjectList{&clusterv1.MachineDeploymentList{}, &clusterv1.MachineList{}, &localv1.LocalMachineTemplateList{}, &bootstrapv1.KubeadmConfigTemplateList{}} {
				if err := mc.List(ctx, list, client.InNamespace("default"), db); err != nil {
					return err.Error()
				}
				if n := meta.LenList(list); n > 0 {
					left = append(left, fmt.Sprintf("%d %T", n, list))
				}
			}
			if len(left) > 0 {
				return "left of db: " + strings.Join(left, ", ")
			}
			if why := nodesLabelled(ctx, wl, map[string]int{"": 1, "default-worker": 2}); why != "" {
				return why
			}
			return fixture.RunningMachines(ctx, mc, "default", 3)
		})
	})

	step("rebase onto a compatible class", func(t *testing.T) {
		// capstan-local-b is capstan-local whose node-label patch adds one
		// label: the same kinds, worker classes and variables.
		class := &clusterv1.ClusterClass{}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "capstan-local"}, class); err != nil {
			t.Fatal(err)
		}
		b := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "capstan-local-b"}, Spec: *class.Spec.DeepCopy()}
		const from = `list (printf "capstan.dev/worker-class=%s" .builtin.machineDeployment.class)`
		changed := 0
		for i := range b.Spec.Patches {
			for j := range b.Spec.Patches[i].Definitions {
				for k := range b.Spec.Patches[i].Definitions[j].JSONPatches {
					vf := b.Spec.Patches[i].Definitions[j].JSONPatches[k].ValueFrom
					if vf != nil && strings.Contains(vf.Template, from) {
						vf.Template = strings.Replace(vf.Template, from, from+` "capstan.dev/class=b"`, 1)
						changed++
					}
				}
			}
		}
		if changed != 1 {
			t.Fatalf("capstan-local's node-label patch not found (%d templates matched %q)", changed, from)
		}
		if err := mc.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		classReconciled(t, mc, "default", b.Name)
		controlPlane := controlPlaneMachines(ctx, t, mc)
		before := workerMachines(ctx, t, mc)
		patch(t, `[{"op":"replace","path":"/spec/topology/classRef/name","value":"capstan-local-b"}]`)
		waitWorkersReplaced(t, mc, wl, before, "capstan.dev/class", "b", 2)
		fixture.Eventually(t, "TopologyReconciled True on capstan-local-b", time.Minute, func(ctx context.Context) string {
			c := &clusterv1.Cluster{}
			if err := mc.Get(ctx, client.ObjectKeyFromObject(topo), c); err != nil {
				return err.Error()
			}
			cond := conditions.Get(c, clusterv1.ClusterTopologyReconciledCondition)
			return fixture.Unless(cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == c.Generation,
				fmt.Sprintf("TopologyReconciled %+v", cond))
		})
		// The control plane's templates are the same in both classes: it
		// does not roll.
		if got := controlPlaneMachines(ctx, t, mc); !slices.Equal(got, controlPlane) {
			t.Errorf("control-plane Machines %v after the rebase, were %v", got, controlPlane)
		}
	})

	step("deleting the cluster leaves nothing", func(t *testing.T) {
		pids := localProcesses(ctx, t, mc, "topo")
		if err := mc.Delete(ctx, topo.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		owned := client.MatchingLabels{clusterv1.ClusterTopologyOwnedLabel: ""}
		fixture.Eventually(t, "everything of the cluster gone", 4*time.Minute, func(ctx context.Context) string {
			if why := leftOfLocalCluster(ctx, mc, p.dir, "topo", pids); why != "" {
				return why
			}
			for _, list := range []client.ObjectList{&localv1.LocalMachineTemplateList{}, &bootstrapv1.KubeadmConfigTemplateList{}} {
				if err := mc.List(ctx, list, client.InNamespace("default"), owned); err != nil {
					return err.Error()
				}
				if n := meta.LenList(list); n > 0 {
					return fmt.Sprintf("%d %T of the topology left", n, list)
				}
			}
			return ""
		})
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

// dedicatedNode is the one Node of the dedicated-worker class, with the
// taint naming its MachineDeployment topology (db); why says what is not
// so yet.
func dedicatedNode(ctx context.Context, wl kubernetes.Interface) (n corev1.Node, why string) {
	nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "capstan.dev/worker-class=dedicated-worker"})
	if err != nil {
		return n, err.Error()
	}
	if len(nodes.Items) != 1 {
		return n, fmt.Sprintf("%d dedicated-worker Nodes", len(nodes.Items))
	}
	n = nodes.Items[0]
	want := corev1.Taint{Key: "capstan.dev/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	for _, taint := range n.Spec.Taints {
		if taint.Key == want.Key && taint.Value == want.Value && taint.Effect == want.Effect {
			return n, ""
		}
	}
	return n, fmt.Sprintf("Node %s taints %v, want %v", n.Name, n.Spec.Taints, want)
}

// waitWorkersReplaced waits until none of the worker Machines in before is
// left, n new ones run, every worker Node carries label=value and the
// cluster has its control plane's Node and n worker Nodes, all Ready.
func waitWorkersReplaced(t *testing.T, mc client.Client, wl kubernetes.Interface, before []string, label, value string, n int) {
	t.Helper()
	fixture.Eventually(t, fmt.Sprintf("%d new workers whose Nodes carry %s=%s", n, label, value), 6*time.Minute, func(ctx context.Context) string {
		now := workerMachines(ctx, t, mc)
		for _, name := range now {
			if slices.Contains(before, name) {
				return fmt.Sprintf("worker Machine %s is still there (workers %v)", name, now)
			}
		}
		if why := fixture.RunningMachines(ctx, mc, "default", n+1); why != "" {
			return why
		}
		nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "capstan.dev/worker-class"})
		if err != nil {
			return err.Error()
		}
		for _, node := range nodes.Items {
			if node.Labels[label] != value {
				return fmt.Sprintf("Node %s labels %v, want %s=%s", node.Name, node.Labels, label, value)
			}
		}
		return fixture.Unless(len(nodes.Items) == n, fmt.Sprintf("%d worker Nodes, want %d", len(nodes.Items), n))
	})
	waitReadyNodes(t, wl, n+1, 2*time.Minute)
}

// workerMachines and controlPlaneMachines list the names of the Cluster's
// Machines of either kind, sorted.
func workerMachines(ctx context.Context, t *testing.T, mc client.Client) []string {
	t.Helper()
	return machineNames(ctx, t, mc, false)
}

func controlPlaneMachines(ctx context.Context, t *testing.T, mc client.Client) []string {
	t.Helper()
	return machineNames(ctx, t, mc, true)
}

func machineNames(ctx context.Context, t *testing.T, mc client.Client, controlPlane bool) []string {
	t.Helper()
	machines := &clusterv1.MachineList{}
	if err := mc.List(ctx, machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.ClusterNameLabel: "topo"}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range machines.Items {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp == controlPlane {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// topologyControlPlane is the name of the control plane the topology made.
func topologyControlPlane(ctx context.Context, t *testing.T, mc client.Client) string {
	t.Helper()
	c := &clusterv1.Cluster{}
	if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "topo"}, c); err != nil {
		t.Fatal(err)
	}
	return c.Spec.ControlPlaneRef.Name
}

// logMachines logs the lines of the cluster's machine and load balancer logs
// that mention one of words: what a failed step needs to be understood.
func logMachines(t *testing.T, clusterDir string, words ...string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(clusterDir, "*", "*", "node.log"))
	lb, _ := filepath.Glob(filepath.Join(clusterDir, "*", "lb.log"))
	for _, path := range append(logs, lb...) {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var lines []string
		for _, line := range strings.Split(string(data), "\n") {
			for _, w := range words {
				if strings.Contains(line, w) {
					lines = append(lines, line)
					break
				}
			}
		}
		t.Logf("%s:\n%s", path, strings.Join(lines, "\n"))
	}
}
