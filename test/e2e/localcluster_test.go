package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	capstanpatch "capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/test/fixture"
)

// TestLocalClusterLifecycle drives a workload cluster on the local provider
// the way a user does, with the real binary: `capstan up --cluster`, then a
// Deployment in the workload cluster, scaling workers and the control
// plane (its etcd members reached through the API server's port-forward,
// as KubeadmControlPlane reaches them), a rolling upgrade of the control
// plane while a probe counts failed requests through the endpoint, the
// control plane back to one, a killed worker, and deletion with nothing
// left behind.
func TestLocalClusterLifecycle(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a workload cluster of several machines")
	}
	p := newPlane(t)
	ctx := context.Background()
	started := time.Now()
	out, code := capstan(t, "up", "--state-dir", p.dir, "--cluster", "demo", "--cluster-timeout", "4m")
	if code != 0 {
		t.Fatalf("capstan up --cluster exited %d:\n%s\nlog:\n%s", code, out, tail(p.log(), 60))
	}
	t.Logf("capstan up --cluster demo (1 control plane + 2 workers) took %.1fs:\n%s", time.Since(started).Seconds(), out)
	if !strings.Contains(out, "Cluster demo is ready") || strings.Count(out, " Ready ") < 3 {
		t.Fatalf("up did not report three Ready nodes:\n%s", out)
	}
	mc := p.client()
	wcfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dir, "demo.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	wl := kubernetes.NewForConfigOrDie(wcfg)

	t.Run("files with credentials are private", func(t *testing.T) {
		checkPrivateModes(t, p.dir)
	})

	t.Run("deployment pods run on the simulated nodes", func(t *testing.T) {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(3)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}},
				},
			},
		}
		if _, err := wl.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		fixture.Eventually(t, "3 web Pods Running with IPs", 2*time.Minute, func(context.Context) string {
			pods, err := wl.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return err.Error()
			}
			running := 0
			for _, pod := range pods.Items {
				if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" && pod.Spec.NodeName != "" {
					running++
				}
			}
			if running != 3 {
				return fmt.Sprintf("%d of %d Pods running", running, len(pods.Items))
			}
			return ""
		})
	})

	t.Run("scale workers 2 to 4", func(t *testing.T) {
		md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-md-0"}}
		if err := mc.Patch(ctx, md, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":4}}`))); err != nil {
			t.Fatal(err)
		}
		waitReadyNodes(t, wl, 5, 3*time.Minute)
	})

	t.Run("scale the control plane 1 to 3", func(t *testing.T) {
		scaleControlPlane(t, mc, "demo-control-plane", 3)
		waitReadyNodes(t, wl, 7, 5*time.Minute)
		waitEtcdMembers(t, mc, "demo-control-plane", 3)
		checkEtcdThroughPortForward(t, mc, wcfg, wl, "demo")
	})

	t.Run("rolling upgrade of the control plane keeps the API answering", func(t *testing.T) {
		probe := startAPIProbe(wcfg)
		kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-control-plane"}}
		const next = "v1.35.9"
		if err := mc.Patch(ctx, kcp, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"version":"`+next+`"}}`))); err != nil {
			t.Fatal(err)
		}
		fixture.Eventually(t, "every control-plane machine at "+next, 8*time.Minute, func(context.Context) string {
			if err := mc.Get(ctx, client.ObjectKeyFromObject(kcp), kcp); err != nil {
				return err.Error()
			}
			st := kcp.Status
			if ptr.Deref(st.Replicas, 0) != 3 || ptr.Deref(st.UpToDateReplicas, 0) != 3 || ptr.Deref(st.ReadyReplicas, 0) != 3 || st.Version != next {
				return fmt.Sprintf("replicas %d, up to date %d, ready %d, version %s", ptr.Deref(st.Replicas, 0), ptr.Deref(st.UpToDateReplicas, 0), ptr.Deref(st.ReadyReplicas, 0), st.Version)
			}
			return ""
		})
		ok, failed, lastErr := probe.stop()
		t.Logf("API probe through the endpoint during the upgrade: %d requests answered, %d failed", ok, failed)
		if failed > 0 {
			t.Errorf("%d probe requests failed during the rolling upgrade; last: %v", failed, lastErr)
		}
		waitReadyNodes(t, wl, 7, 2*time.Minute)
	})

	// Leadership moved and members removed through the port-forward too.
	t.Run("scale the control plane 3 to 1", func(t *testing.T) {
		scaleControlPlane(t, mc, "demo-control-plane", 1)
		waitReadyNodes(t, wl, 5, 5*time.Minute)
		kcp := waitEtcdMembers(t, mc, "demo-control-plane", 1)
		for _, cond := range kcp.Status.Conditions {
			if cond.Type == controlplanev1.KubeadmControlPlaneAvailableCondition && cond.Status != metav1.ConditionTrue {
				t.Errorf("control plane not Available after scaling back to one: %s", cond.Message)
			}
		}
	})

	t.Run("a killed worker's node goes NotReady", func(t *testing.T) {
		lms := &localv1.LocalMachineList{}
		if err := mc.List(ctx, lms, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "demo-md-0"}); err != nil {
			t.Fatal(err)
		}
		if len(lms.Items) == 0 {
			t.Fatal("no worker LocalMachines")
		}
		victim := lms.Items[0]
		pid := int(victim.Status.Process.PID)
		if pid == 0 {
			t.Fatalf("LocalMachine %s reports no pid", victim.Name)
		}
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		node := victim.Status.Process.NodeName
		if node == "" {
			node = victim.Name
		}
		fixture.Eventually(t, "Node "+node+" NotReady", 3*time.Minute, func(context.Context) string {
			n, err := wl.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if nodeIsReady(n) {
				return "still Ready"
			}
			return ""
		})
	})

	t.Run("deleting the cluster leaves nothing", func(t *testing.T) {
		pids := localProcesses(ctx, t, mc, "demo")
		if err := mc.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"}}); err != nil {
			t.Fatal(err)
		}
		fixture.Eventually(t, "everything of the cluster gone", 5*time.Minute, func(ctx context.Context) string {
			return leftOfLocalCluster(ctx, mc, p.dir, "demo", pids)
		})
	})
}

// localProcesses lists the processes of the local machines in namespace
// default and of Cluster cluster's load balancer, as their objects report
// them.
func localProcesses(ctx context.Context, t *testing.T, mc client.Client, cluster string) []int {
	t.Helper()
	var pids []int
	lms := &localv1.LocalMachineList{}
	if err := mc.List(ctx, lms, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, lm := range lms.Items {
		if lm.Status.Process.PID != 0 {
			pids = append(pids, int(lm.Status.Process.PID))
		}
	}
	c := &clusterv1.Cluster{}
	if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	lc := &localv1.LocalCluster{}
	if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: c.Spec.InfrastructureRef.Name}, lc); err != nil {
		t.Fatal(err)
	}
	if lc.Status.LoadBalancer.PID != 0 {
		pids = append(pids, int(lc.Status.LoadBalancer.PID))
	}
	return pids
}

// leftOfLocalCluster is the "why not yet" of a deleted local Cluster, the
// only one in namespace default: what is left of its objects, its Secrets
// (the kubeconfig among them), the processes pids and its directory under
// the plane's stateDir.
func leftOfLocalCluster(ctx context.Context, mc client.Client, stateDir, cluster string, pids []int) string {
	var left []string
	for _, list := range []client.ObjectList{&clusterv1.ClusterList{}, &clusterv1.MachineList{}, &clusterv1.MachineSetList{},
		&clusterv1.MachineDeploymentList{}, &controlplanev1.KubeadmControlPlaneList{}, &localv1.LocalMachineList{}, &localv1.LocalClusterList{}} {
		if err := mc.List(ctx, list, client.InNamespace("default")); err != nil {
			return err.Error()
		}
		if n := itemCount(list); n > 0 {
			left = append(left, fmt.Sprintf("%d %T", n, list))
		}
	}
	secrets := &corev1.SecretList{}
	if err := mc.List(ctx, secrets, client.InNamespace("default"), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return err.Error()
	}
	for _, s := range secrets.Items {
		left = append(left, "Secret "+s.Name)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			left = append(left, fmt.Sprintf("process %d", pid))
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, "local", "default", cluster)); err == nil {
		left = append(left, "directory local/default/"+cluster)
	}
	if _, err := os.Stat(filepath.Join(stateDir, cluster+".kubeconfig")); err == nil {
		left = append(left, "the cluster's kubeconfig file "+cluster+".kubeconfig")
	}
	return strings.Join(left, ", ")
}

func itemCount(list client.ObjectList) int {
	switch l := list.(type) {
	case *clusterv1.ClusterList:
		return len(l.Items)
	case *clusterv1.MachineList:
		return len(l.Items)
	case *clusterv1.MachineSetList:
		return len(l.Items)
	case *clusterv1.MachineDeploymentList:
		return len(l.Items)
	case *controlplanev1.KubeadmControlPlaneList:
		return len(l.Items)
	case *localv1.LocalMachineList:
		return len(l.Items)
	case *localv1.LocalClusterList:
		return len(l.Items)
	}
	return 0
}

func waitReadyNodes(t *testing.T, wl kubernetes.Interface, n int, timeout time.Duration) {
	t.Helper()
	fixture.Eventually(t, fmt.Sprintf("%d Ready nodes", n), timeout, func(context.Context) string {
		nodes, err := wl.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		ready := 0
		for i := range nodes.Items {
			if nodeIsReady(&nodes.Items[i]) {
				ready++
			}
		}
		if ready != n || len(nodes.Items) != n {
			return fmt.Sprintf("%d nodes, %d Ready", len(nodes.Items), ready)
		}
		return ""
	})
}

func nodeIsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// apiProbe asks a workload cluster's API, through its endpoint, for the
// default namespace every 100 ms and counts the answers and the failures.
type apiProbe struct {
	ok, failed atomic.Int64
	lastErr    atomic.Value
	quit, done chan struct{}
}

func startAPIProbe(cfg *rest.Config) *apiProbe {
	c := *cfg
	c.Timeout = 10 * time.Second
	cs := kubernetes.NewForConfigOrDie(&c)
	p := &apiProbe{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
				p.failed.Add(1)
				p.lastErr.Store(time.Now().UTC().Format("15:04:05.000") + " " + err.Error())
			} else {
				p.ok.Add(1)
			}
		}
	}()
	return p
}

// stop ends the probe and returns its counts and last error (with the time
// it came, UTC).
func (p *apiProbe) stop() (ok, failed int64, lastErr any) {
	close(p.quit)
	<-p.done
	return p.ok.Load(), p.failed.Load(), p.lastErr.Load()
}

// waitEtcdMembers waits until the control plane reports n healthy etcd
// members and returns it.
func waitEtcdMembers(t *testing.T, c client.Client, name string, n int) *controlplanev1.KubeadmControlPlane {
	t.Helper()
	kcp := &controlplanev1.KubeadmControlPlane{}
	want := fmt.Sprintf("%d healthy members", n)
	fixture.Eventually(t, want, 2*time.Minute, func(context.Context) string {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, kcp); err != nil {
			return err.Error()
		}
		for _, cond := range kcp.Status.Conditions {
			if cond.Type == controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition {
				if cond.Status == metav1.ConditionTrue && cond.Message == want {
					return ""
				}
				return cond.Message
			}
		}
		return "no EtcdClusterHealthy condition"
	})
	return kcp
}

// scaleControlPlane sets the replicas of KubeadmControlPlane name, as
// `kubectl scale kcp` does.
func scaleControlPlane(t *testing.T, c client.Client, name string, n int) {
	t.Helper()
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	if err := c.Patch(context.Background(), kcp, capstanpatch.Merge(map[string]any{"spec": map[string]any{"replicas": n}})); err != nil {
		t.Fatal(err)
	}
}
