package kubelet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/node/controlplane"
	"capstan.dev/capstan/internal/node/kubelet"
	"capstan.dev/capstan/test/fixture"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
)

// The workload control plane of a local machine: Node and RBAC
// authorization, NodeRestriction admission, and kube-controller-manager
// (CSR approval and signing, node lifecycle, garbage collection). It checks
// that the kubelet does nothing a real cluster refuses to a node. Started
// on first use, stopped and removed by TestMain.
var (
	workloadOnce sync.Once
	workload     *controlplane.ControlPlane
	workloadDir  string
	workloadErr  error
)

const (
	tokenID     = "kubelt"
	tokenSecret = "0123456789abcdef"
)

func workloadPlane(t *testing.T) kubernetes.Interface {
	t.Helper()
	workloadOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kubelet-test-workload-")
		if err != nil {
			workloadErr = err
			return
		}
		workloadDir = dir
		pki := filepath.Join(dir, "pki")
		now := time.Now()
		for _, name := range []string{"ca", "etcd/ca", "front-proxy-ca"} {
			ca, err := certs.NewCA(strings.ReplaceAll(name, "/", "-"), certs.DefaultKeyAlgorithm, now, 24*time.Hour)
			if err == nil {
				err = ca.Write(filepath.Join(pki, name+".crt"), filepath.Join(pki, name+".key"))
			}
			if err != nil {
				workloadErr = err
				return
			}
		}
		key, pub, err := certs.NewServiceAccountKey(certs.DefaultKeyAlgorithm)
		if err == nil {
			err = atomicfile.WriteFile(filepath.Join(pki, "sa.key"), key, 0o600)
		}
		if err == nil {
			err = atomicfile.WriteFile(filepath.Join(pki, "sa.pub"), pub, 0o644)
		}
		if err != nil {
			workloadErr = err
			return
		}
		var ports [3]int
		var listeners []net.Listener
		closeAll := func() {
			for _, l := range listeners {
				l.Close()
			}
			listeners = nil
		}
		for i := range ports {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				closeAll()
				workloadErr = err
				return
			}
			listeners = append(listeners, l)
			ports[i] = l.Addr().(*net.TCPAddr).Port
		}
		closeAll()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		workload, workloadErr = controlplane.Start(ctx, controlplane.Config{
			NodeName: "cp-0", ClusterName: "kubelet-test", PKIDir: pki,
			KubeconfigDir: filepath.Join(dir, "kubernetes"), EtcdDataDir: filepath.Join(dir, "etcd"),
			Ports:                controlplane.Ports{APIServer: ports[0], EtcdClient: ports[1], EtcdPeer: ports[2]},
			ControlPlaneEndpoint: fmt.Sprintf("127.0.0.1:%d", ports[0]),
			// Node monitoring fast enough to see a stopped node go NotReady.
			ControllerManagerExtraArgs: map[string]string{"node-monitor-grace-period": "5s", "node-monitor-period": "1s"},
		})
		if workloadErr != nil {
			return
		}
		workloadErr = kubeadmJoinSetup(workload.AdminConfig())
	})
	if workloadErr != nil {
		t.Fatalf("workload control plane: %v", workloadErr)
	}
	c, err := kubernetes.NewForConfig(workload.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// kubeadmJoinSetup is what kubeadm init leaves for joining nodes: a
// bootstrap token whose group may create CSRs that are auto-approved.
func kubeadmJoinSetup(cfg *rest.Config) error {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	_, err = c.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + tokenID},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": tokenID, "token-secret": tokenSecret,
			"expiration":                     time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
			"auth-extra-groups":              "system:bootstrappers:kubeadm:default-node-token",
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	group := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:bootstrappers:kubeadm:default-node-token"}
	for name, role := range map[string]string{
		"kubeadm:kubelet-bootstrap":          "system:node-bootstrapper",
		"kubeadm:node-autoapprove-bootstrap": "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
	} {
		_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{group},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
	}
	return nil
}

// TestOnKubeadmControlPlane runs the whole node life against a control plane
// that treats the node as a real cluster does.
func TestOnKubeadmControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full control plane")
	}
	c := workloadPlane(t)
	ctx := context.Background()
	name := "w-1"

	// TLS bootstrap with the token; kube-controller-manager approves and
	// signs.
	bootstrap := rest.AnonymousClientConfig(workload.AdminConfig())
	bootstrap.BearerToken = tokenID + "." + tokenSecret
	bctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	nodeCfg, err := kubelet.Bootstrap(bctx, bootstrap, name, t.TempDir())
	if err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}

	var leaves int
	var mu sync.Mutex
	n := startOn(t, c, kubelet.Options{
		Config: nodeCfg, LabelsClient: workload.AdminConfig(),
		NodeName: name, ProviderID: "local://default/" + name, KubeletVersion: "v1.35.8",
		Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "node.kubernetes.io/exclude-from-external-load-balancers": "", "example.com/a": "b"},
		Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}},
		StaticPods: []kubelet.StaticPod{{Component: "etcd", Annotations: map[string]string{"kubeadm.kubernetes.io/etcd.advertise-client-urls": "https://127.0.0.1:2379"}},
			{Component: "kube-apiserver"}},
		OnLeave: func(context.Context) error { mu.Lock(); leaves++; mu.Unlock(); return nil },
	})

	fixture.Eventually(t, "Node Ready, labelled, and its not-ready taint lifted by the node lifecycle controller", time.Minute, func(ctx context.Context) string {
		nd, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		ready := nodeCondition(nd, corev1.NodeReady)
		_, role := nd.Labels["node-role.kubernetes.io/control-plane"]
		return fixture.Unless(ready != nil && ready.Status == corev1.ConditionTrue && role && len(nd.Spec.Taints) == 1 && nd.Labels["example.com/a"] == "b",
			fmt.Sprintf("Ready %+v labels %v taints %v", ready, nd.Labels, nd.Spec.Taints))
	})
	for _, component := range []string{"etcd", "kube-apiserver"} {
		fixture.Eventually(t, "mirror pod "+component, 30*time.Second, func(ctx context.Context) string {
			p, err := c.CoreV1().Pods("kube-system").Get(ctx, component+"-"+name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			return fixture.Unless(condition(p, corev1.PodReady) == corev1.ConditionTrue, fmt.Sprintf("%+v", p.Status))
		})
	}

	// A pod the node runs, then evicts.
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubelet-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "pod created (the service account controller makes the default account)", 30*time.Second, func(ctx context.Context) string {
		_, err := c.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		}, metav1.CreateOptions{})
		return fixture.Unless(err == nil, fmt.Sprint(err))
	})
	fixture.Eventually(t, "pod Running and Ready", 30*time.Second, func(ctx context.Context) string {
		p, err := c.CoreV1().Pods(ns.Name).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(condition(p, corev1.PodReady) == corev1.ConditionTrue && p.Status.PodIP != "", fmt.Sprintf("%+v", p.Status))
	})
	if err := c.CoreV1().Pods(ns.Name).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "p"}}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "evicted pod gone", 30*time.Second, func(ctx context.Context) string {
		_, err := c.CoreV1().Pods(ns.Name).Get(ctx, "p", metav1.GetOptions{})
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprint(err))
	})

	// Leaving the load balancer, answered with the node's own credentials.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{controlplanev1.LeaveLoadBalancerAnnotation: "true"}}})
	if _, err := c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "leave answered", 30*time.Second, func(ctx context.Context) string {
		nd, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(nd.Annotations[controlplanev1.LeftLoadBalancerAnnotation] == "true", fmt.Sprint(nd.Annotations))
	})
	mu.Lock()
	if leaves != 1 {
		t.Errorf("OnLeave ran %d times", leaves)
	}
	mu.Unlock()

	// Stopped, the node goes NotReady through the node lifecycle controller.
	n.stop(t)
	fixture.Eventually(t, "stopped node NotReady", time.Minute, func(ctx context.Context) string {
		nd, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		ready := nodeCondition(nd, corev1.NodeReady)
		return fixture.Unless(ready != nil && ready.Status == corev1.ConditionUnknown, fmt.Sprintf("Ready %+v", ready))
	})

	// Restarted, it is Ready again at once.
	startOn(t, c, kubelet.Options{Config: nodeCfg, NodeName: name, ProviderID: "local://default/" + name, KubeletVersion: "v1.35.8"})
	fixture.Eventually(t, "restarted node Ready", 30*time.Second, func(ctx context.Context) string {
		nd, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		ready := nodeCondition(nd, corev1.NodeReady)
		return fixture.Unless(ready != nil && ready.Status == corev1.ConditionTrue, fmt.Sprintf("Ready %+v", ready))
	})
}

// Without LabelsClient, a restricted label is refused to the node; the node
// registers without it.
func TestOnKubeadmControlPlaneRestrictedLabelWithoutLabelsClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full control plane")
	}
	c := workloadPlane(t)
	name := "w-2"
	ca, err := certs.Load(filepath.Join(workloadDir, "pki", "ca.crt"), filepath.Join(workloadDir, "pki", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(certs.Request{CommonName: kubelet.NodeUser(name), Organization: []string{kubelet.NodesGroup}, Client: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := kp.KeyPEM()
	cfg := rest.AnonymousClientConfig(workload.AdminConfig())
	cfg.CertData, cfg.KeyData = kp.CertPEM(), keyPEM
	startOn(t, c, kubelet.Options{Config: cfg, NodeName: name, KubeletVersion: "v1.35.8",
		Labels: map[string]string{"node-role.kubernetes.io/worker": "", "example.com/b": "c"}})
	fixture.Eventually(t, "Node Ready", 30*time.Second, func(ctx context.Context) string {
		nd, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		ready := nodeCondition(nd, corev1.NodeReady)
		return fixture.Unless(ready != nil && ready.Status == corev1.ConditionTrue && nd.Labels["example.com/b"] == "c", fmt.Sprintf("Ready %+v labels %v", ready, nd.Labels))
	})
	time.Sleep(2 * interval)
	nd, _ := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if _, ok := nd.Labels["node-role.kubernetes.io/worker"]; ok {
		t.Error("NodeRestriction let the node set node-role.kubernetes.io/worker")
	}
}

// startOn runs a kubelet against the workload plane.
func startOn(t *testing.T, c kubernetes.Interface, o kubelet.Options) *node {
	t.Helper()
	o.HeartbeatInterval = interval
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
		_ = c.CoreV1().Nodes().Delete(context.Background(), o.NodeName, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	return n
}
