package kubelet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/node/kubelet"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	env = e
	code := m.Run()
	if workload != nil {
		workload.Stop()
	}
	if workloadDir != "" {
		_ = os.RemoveAll(workloadDir)
	}
	e.Stop()
	os.Exit(code)
}

const interval = 300 * time.Millisecond

// admin is a typed client with the plane's administrator credentials.
func admin(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	fixture.BindNodesRole(t, env)
	return c
}

// planeCA is the plane's CA, which its API server trusts for client
// certificates.
func planeCA(t *testing.T) *certs.KeyPair {
	t.Helper()
	return fixture.PlaneCA(t, env)
}

// nodeCredentials is a client configuration for system:node:<name>.
func nodeCredentials(t *testing.T, name string) *rest.Config {
	t.Helper()
	return fixture.NodeCredentials(t, env, name)
}

func testLog(t *testing.T) logr.Logger {
	return funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{})
}

// node is a running simulated kubelet.
type node struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error
}

func (n *node) stop(t *testing.T) {
	t.Helper()
	n.cancel()
	select {
	case <-n.done:
		if n.err != nil {
			t.Errorf("Run returned %v", n.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func start(t *testing.T, o kubelet.Options) *node {
	t.Helper()
	c := admin(t)
	if o.Config == nil {
		o.Config = nodeCredentials(t, o.NodeName)
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = interval
	}
	o.Log = testLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{name: o.NodeName, cancel: cancel, done: make(chan struct{})}
	go func() { n.err = kubelet.Run(ctx, o); close(n.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-n.done:
		case <-time.After(20 * time.Second):
		}
		_ = c.CoreV1().Nodes().Delete(context.Background(), o.NodeName, metav1.DeleteOptions{})
		for _, sp := range o.StaticPods {
			_ = c.CoreV1().Pods(kubelet.MirrorPodNamespace).Delete(context.Background(), sp.Component+"-"+o.NodeName, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		_ = c.CoordinationV1().Leases(kubelet.NodeLeaseNamespace).Delete(context.Background(), o.NodeName, metav1.DeleteOptions{})
	})
	return n
}

func ensureServiceAccount(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// ownTaints leaves out the not-ready taint the API server adds to every new
// Node (the node lifecycle controller, absent from the test plane, removes
// it once the Node is Ready).
func ownTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady {
			out = append(out, t)
		}
	}
	return out
}

func TestNodeLifecycle(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	ns := env.Namespace(t)
	ensureServiceAccount(t, c, ns)
	name := "n-" + ns

	var etcdHealthy atomic.Bool
	etcdHealthy.Store(true)
	left := make(chan struct{}, 10)
	controlPlaneTaint := corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	n := start(t, kubelet.Options{
		NodeName: name, ProviderID: "local://" + ns + "/" + name, KubeletVersion: "v1.34.2", Address: "127.0.0.1",
		LabelsClient: env.Config,
		Labels:       map[string]string{"node-role.kubernetes.io/control-plane": "", "example.com/pool": "a"},
		Taints:       []corev1.Taint{controlPlaneTaint},
		StaticPods: []kubelet.StaticPod{
			{Component: "etcd", Annotations: map[string]string{"kubeadm.kubernetes.io/etcd.advertise-client-urls": "https://127.0.0.1:2379"},
				Healthy: func(context.Context) error {
					if etcdHealthy.Load() {
						return nil
					}
					return errors.New("etcd is down")
				}},
			{Component: "kube-apiserver"},
		},
		OnLeave: func(context.Context) error { left <- struct{}{}; return nil },
	})

	// Registration.
	var registered *corev1.Node
	fixture.Eventually(t, "Node registered and Ready", 20*time.Second, func(ctx context.Context) string {
		nd, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		registered = nd
		ready := nodeCondition(nd, corev1.NodeReady)
		if ready == nil || ready.Status != corev1.ConditionTrue {
			return fmt.Sprintf("Ready %+v", ready)
		}
		if _, ok := nd.Labels["node-role.kubernetes.io/control-plane"]; !ok {
			return fmt.Sprintf("labels %v", nd.Labels)
		}
		return ""
	})
	if registered.Spec.ProviderID != "local://"+ns+"/"+name || registered.Status.NodeInfo.KubeletVersion != "v1.34.2" {
		t.Errorf("providerID %q kubeletVersion %q", registered.Spec.ProviderID, registered.Status.NodeInfo.KubeletVersion)
	}
	if registered.Labels["kubernetes.io/hostname"] != name || registered.Labels["example.com/pool"] != "a" || registered.Labels["kubernetes.io/os"] == "" {
		t.Errorf("labels %v", registered.Labels)
	}
	if taints := ownTaints(registered); len(taints) != 1 || !taints[0].MatchTaint(&controlPlaneTaint) {
		t.Errorf("taints %v", registered.Spec.Taints)
	}
	if len(registered.Status.Addresses) != 2 || registered.Status.Addresses[0].Address != "127.0.0.1" || registered.Status.Allocatable.Pods().Value() != 110 {
		t.Errorf("addresses %v allocatable %v", registered.Status.Addresses, registered.Status.Allocatable)
	}
	for _, ct := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if cond := nodeCondition(registered, ct); cond == nil || cond.Status != corev1.ConditionFalse {
			t.Errorf("%s: %+v", ct, cond)
		}
	}

	// Lease renewals.
	renewals := func(ctx context.Context) *coordinationv1.Lease {
		l, err := c.CoordinationV1().Leases(kubelet.NodeLeaseNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return l
	}
	var first *coordinationv1.Lease
	fixture.Eventually(t, "Lease created", 10*time.Second, func(ctx context.Context) string {
		first = renewals(ctx)
		return fixture.Unless(first != nil, "no lease")
	})
	if *first.Spec.HolderIdentity != name || len(first.OwnerReferences) != 1 || first.OwnerReferences[0].UID != registered.UID {
		t.Errorf("lease %+v", first)
	}
	fixture.Eventually(t, "Lease renewed", 10*time.Second, func(ctx context.Context) string {
		l := renewals(ctx)
		return fixture.Unless(l != nil && l.Spec.RenewTime.After(first.Spec.RenewTime.Time), "not renewed")
	})

	// Status writes are rare: the Node's status is not rewritten every
	// heartbeat (every 4 intervals at most when nothing changes).
	nd, _ := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	writes := 0
	rv := nd.ResourceVersion
	for i := 0; i < 8; i++ {
		time.Sleep(interval)
		nd, _ = c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if nd.ResourceVersion != rv {
			writes++
			rv = nd.ResourceVersion
		}
	}
	if writes > 3 || writes == 0 {
		t.Errorf("%d Node writes in 8 heartbeats; want 1 to 3 (a heartbeat every 4)", writes)
	}

	// Pods bound to the node run.
	mkPod := func(podName string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName},
			Spec: corev1.PodSpec{
				NodeName:                      name,
				TerminationGracePeriodSeconds: ptr.To[int64](30),
				InitContainers:                []corev1.Container{{Name: "init", Image: "registry.invalid/init:1"}},
				Containers:                    []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
			},
		}
		created, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	running := func(podName string) *corev1.Pod {
		var pod *corev1.Pod
		fixture.Eventually(t, "pod "+podName+" Running and Ready", 10*time.Second, func(ctx context.Context) string {
			p, err := c.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			pod = p
			return fixture.Unless(p.Status.Phase == corev1.PodRunning && condition(p, corev1.PodReady) == corev1.ConditionTrue, fmt.Sprintf("status %+v", p.Status))
		})
		return pod
	}
	mkPod("p1")
	mkPod("p2")
	p1, p2 := running("p1"), running("p2")
	ip1, err1 := netip.ParseAddr(p1.Status.PodIP)
	ip2, err2 := netip.ParseAddr(p2.Status.PodIP)
	if err1 != nil || err2 != nil || ip1 == ip2 || !strings.HasPrefix(ip1.String(), "10.244.") || ip1.As4()[2] != ip2.As4()[2] {
		t.Errorf("pod IPs %q and %q: want distinct addresses of one 10.244.x.0/24", p1.Status.PodIP, p2.Status.PodIP)
	}
	if p1.Status.HostIP != "127.0.0.1" || len(p1.Status.PodIPs) != 1 || p1.Status.StartTime == nil {
		t.Errorf("pod status %+v", p1.Status)
	}
	if cs := p1.Status.ContainerStatuses; len(cs) != 1 || !cs[0].Ready || cs[0].State.Running == nil || cs[0].Image != "registry.invalid/app:1" || !strings.HasPrefix(cs[0].ContainerID, "capstan://") {
		t.Errorf("container statuses %+v", cs)
	}
	if ics := p1.Status.InitContainerStatuses; len(ics) != 1 || ics[0].State.Terminated == nil || ics[0].State.Terminated.ExitCode != 0 {
		t.Errorf("init container statuses %+v", ics)
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady} {
		if condition(p1, ct) != corev1.ConditionTrue {
			t.Errorf("condition %s of p1: %s", ct, condition(p1, ct))
		}
	}
	// No write that changes nothing.
	time.Sleep(3 * interval)
	if again, _ := c.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{}); again.ResourceVersion != p1.ResourceVersion {
		t.Errorf("running pod rewritten: resourceVersion %s then %s", p1.ResourceVersion, again.ResourceVersion)
	}

	// Deletion with a grace period completes long before it ends.
	gone := func(podName string) {
		fixture.Eventually(t, "pod "+podName+" gone", 10*time.Second, func(ctx context.Context) string {
			_, err := c.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
			return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err))
		})
	}
	if err := c.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
		t.Fatal(err)
	}
	gone("p1")
	if err := c.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p2"}}); err != nil {
		t.Fatalf("evicting p2: %v", err)
	}
	gone("p2")

	// Mirror pods.
	mirror := func(ctx context.Context, component string) (*corev1.Pod, error) {
		return c.CoreV1().Pods(kubelet.MirrorPodNamespace).Get(ctx, component+"-"+name, metav1.GetOptions{})
	}
	mirrorReady := func(component string, want corev1.ConditionStatus) *corev1.Pod {
		var pod *corev1.Pod
		fixture.Eventually(t, fmt.Sprintf("mirror pod %s Running with Ready=%s", component, want), 10*time.Second, func(ctx context.Context) string {
			p, err := mirror(ctx, component)
			if err != nil {
				return err.Error()
			}
			pod = p
			return fixture.Unless(p.Status.Phase == corev1.PodRunning && condition(p, corev1.PodReady) == want, fmt.Sprintf("phase %s Ready %s", p.Status.Phase, condition(p, corev1.PodReady)))
		})
		return pod
	}
	etcd := mirrorReady("etcd", corev1.ConditionTrue)
	mirrorReady("kube-apiserver", corev1.ConditionTrue)
	if etcd.Labels["component"] != "etcd" || etcd.Labels["tier"] != "control-plane" ||
		etcd.Annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] != "https://127.0.0.1:2379" ||
		etcd.Annotations["kubernetes.io/config.mirror"] == "" || etcd.Annotations["kubernetes.io/config.source"] != "file" ||
		etcd.Spec.NodeName != name || etcd.Spec.PriorityClassName != "system-node-critical" ||
		len(etcd.Spec.Containers) != 1 || etcd.Spec.Containers[0].Name != "etcd" || etcd.Status.PodIP != "127.0.0.1" {
		t.Errorf("etcd mirror pod %+v", etcd)
	}
	if refs := etcd.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].UID != registered.UID || !ptr.Deref(refs[0].Controller, false) {
		t.Errorf("etcd mirror pod owners %+v", refs)
	}
	etcdHealthy.Store(false)
	mirrorReady("etcd", corev1.ConditionFalse)
	etcdHealthy.Store(true)
	stable := mirrorReady("etcd", corev1.ConditionTrue)
	time.Sleep(3 * interval)
	if again, _ := mirror(ctx, "etcd"); again.ResourceVersion != stable.ResourceVersion {
		t.Errorf("healthy mirror pod rewritten: resourceVersion %s then %s", stable.ResourceVersion, again.ResourceVersion)
	}
	if err := c.CoreV1().Pods(kubelet.MirrorPodNamespace).Delete(ctx, "etcd-"+name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "etcd mirror pod re-created", 10*time.Second, func(ctx context.Context) string {
		p, err := mirror(ctx, "etcd")
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(p.UID != etcd.UID && p.DeletionTimestamp == nil && condition(p, corev1.PodReady) == corev1.ConditionTrue, "old one still there or not ready")
	})

	// Leaving the load balancer.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{controlplanev1.LeaveLoadBalancerAnnotation: "true"}}})
	if _, err := c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "leave answered", 10*time.Second, func(ctx context.Context) string {
		nd, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(nd.Annotations[controlplanev1.LeftLoadBalancerAnnotation] == "true", fmt.Sprintf("annotations %v", nd.Annotations))
	})
	time.Sleep(3 * interval)
	if len(left) != 1 {
		t.Errorf("OnLeave called %d times, want 1", len(left))
	}

	// Stopping ends the heartbeats and leaves the Node.
	n.stop(t)
	last := renewals(ctx)
	time.Sleep(4 * interval)
	if now := renewals(ctx); now == nil || !now.Spec.RenewTime.Equal(last.Spec.RenewTime) {
		t.Errorf("Lease renewed after Run ended: %v then %v", last.Spec.RenewTime, now.Spec.RenewTime)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("Node after Run ended: %v", err)
	}
}

func TestAdoptExistingNode(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	ns := env.Namespace(t)
	name := "n-" + ns
	existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"example.com/keep": "yes"}}}
	if _, err := c.CoreV1().Nodes().Create(ctx, existing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start(t, kubelet.Options{
		NodeName: name, ProviderID: "local://" + ns + "/" + name, KubeletVersion: "v1.33.0",
		Labels: map[string]string{"example.com/pool": "a"},
		Taints: []corev1.Taint{{Key: "example.com/t", Effect: corev1.TaintEffectNoSchedule}},
	})
	fixture.Eventually(t, "Node adopted and Ready", 20*time.Second, func(ctx context.Context) string {
		nd, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		ready := nodeCondition(nd, corev1.NodeReady)
		return fixture.Unless(nd.Spec.ProviderID != "" && ready != nil && ready.Status == corev1.ConditionTrue,
			fmt.Sprintf("providerID %q Ready %+v", nd.Spec.ProviderID, ready))
	})
	nd, _ := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if nd.Spec.ProviderID != "local://"+ns+"/"+name || nd.Status.NodeInfo.KubeletVersion != "v1.33.0" {
		t.Errorf("providerID %q kubelet %q", nd.Spec.ProviderID, nd.Status.NodeInfo.KubeletVersion)
	}
	// Registration-time settings are not forced onto an existing Node.
	if nd.Labels["example.com/keep"] != "yes" || nd.Labels["example.com/pool"] != "" || len(ownTaints(nd)) != 0 || nd.Labels["kubernetes.io/hostname"] != name {
		t.Errorf("labels %v taints %v", nd.Labels, nd.Spec.Taints)
	}
}

func TestProviderIDConflict(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	ns := env.Namespace(t)
	name := "n-" + ns
	existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "local://elsewhere/other"}}
	if _, err := c.CoreV1().Nodes().Create(ctx, existing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	runCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := kubelet.Run(runCtx, kubelet.Options{Config: nodeCredentials(t, name), NodeName: name, ProviderID: "local://" + ns + "/" + name, Log: logr.Discard()})
	if err == nil || !strings.Contains(err.Error(), "local://elsewhere/other") || runCtx.Err() != nil {
		t.Fatalf("Run over another machine's Node: %v", err)
	}
}

// A restarted kubelet adopts its Node, keeps its pods as they are, never
// gives their addresses away, and removes mirror pods of static pods it no
// longer runs.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	ns := env.Namespace(t)
	ensureServiceAccount(t, c, ns)
	name := "n-" + ns
	o := kubelet.Options{NodeName: name, ProviderID: "local://" + ns + "/" + name, KubeletVersion: "v1.34.2",
		StaticPods: []kubelet.StaticPod{{Component: "kube-scheduler"}}}
	first := start(t, o)

	runningPod := func(podName string, hostNetwork bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName}, Spec: corev1.PodSpec{
			NodeName: name, HostNetwork: hostNetwork, Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
		}}
		if _, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var pod *corev1.Pod
		fixture.Eventually(t, podName+" Running", 20*time.Second, func(ctx context.Context) string {
			p, err := c.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			pod = p
			return fixture.Unless(condition(p, corev1.PodReady) == corev1.ConditionTrue, string(p.Status.Phase))
		})
		return pod
	}
	a := runningPod("a", false)
	host := runningPod("host", true)
	if host.Status.PodIP != "127.0.0.1" {
		t.Errorf("host-network pod IP %q, want the node's address", host.Status.PodIP)
	}
	fixture.Eventually(t, "scheduler mirror pod", 10*time.Second, func(ctx context.Context) string {
		_, err := c.CoreV1().Pods(kubelet.MirrorPodNamespace).Get(ctx, "kube-scheduler-"+name, metav1.GetOptions{})
		return fixture.Unless(err == nil, fmt.Sprint(err))
	})
	first.stop(t)
	before, _ := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})

	o.StaticPods = nil
	start(t, o)
	b := runningPod("b", false)
	if b.Status.PodIP == a.Status.PodIP {
		t.Errorf("pod b got a's address %s after a restart", a.Status.PodIP)
	}
	fixture.Eventually(t, "orphaned mirror pod deleted", 10*time.Second, func(ctx context.Context) string {
		_, err := c.CoreV1().Pods(kubelet.MirrorPodNamespace).Get(ctx, "kube-scheduler-"+name, metav1.GetOptions{})
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprint(err))
	})
	if again, _ := c.CoreV1().Pods(ns).Get(ctx, "a", metav1.GetOptions{}); again.ResourceVersion != a.ResourceVersion {
		t.Errorf("pod a rewritten after a restart: %+v", again.Status)
	}
	after, _ := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if after.UID != before.UID {
		t.Error("the Node was re-created")
	}
	if r0, r1 := nodeCondition(before, corev1.NodeReady), nodeCondition(after, corev1.NodeReady); !r0.LastTransitionTime.Equal(&r1.LastTransitionTime) {
		t.Errorf("Ready transition time moved across a restart: %v then %v", r0.LastTransitionTime, r1.LastTransitionTime)
	}
}

// A deleted Node is not re-registered, nor its Lease re-created: the
// machine is being removed.
func TestNodeDeleted(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	name := "n-" + env.Namespace(t)
	start(t, kubelet.Options{NodeName: name, KubeletVersion: "v1.34.2"})
	fixture.Eventually(t, "Lease", 20*time.Second, func(ctx context.Context) string {
		_, err := c.CoordinationV1().Leases(kubelet.NodeLeaseNamespace).Get(ctx, name, metav1.GetOptions{})
		return fixture.Unless(err == nil, fmt.Sprint(err))
	})
	if err := c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The plane's garbage collector removes the Lease the Node owns; a
	// kubelet that kept renewing would bring it back.
	fixture.Eventually(t, "Lease collected", 20*time.Second, func(ctx context.Context) string {
		_, err := c.CoordinationV1().Leases(kubelet.NodeLeaseNamespace).Get(ctx, name, metav1.GetOptions{})
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprint(err))
	})
	time.Sleep(4 * interval)
	if _, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node after deletion: %v", err)
	}
	if _, err := c.CoordinationV1().Leases(kubelet.NodeLeaseNamespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Lease after the Node's deletion: %v", err)
	}
}
