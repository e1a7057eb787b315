package inmemory_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
	"capstan.dev/capstan/internal/bench"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/etcdclient"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/portforward"
	"capstan.dev/capstan/internal/providers/inmemory"
	"capstan.dev/capstan/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// TestSimulatedClusterLifecycle runs the real controllers against one
// simulated cluster of 1 control plane + 1 worker: the Machines get their
// Nodes through the cluster's kubeconfig, KubeadmControlPlane sees the etcd
// member, a scale-up and a scale-down reach the simulated cluster, and
// deleting the Cluster closes its endpoint.
func TestSimulatedClusterLifecycle(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(t)
	mgr, err := manager.New(env.Config, manager.Options{MetricsAddr: "0", ProbeAddr: "0", AllowRestartInProcess: true,
		Namespace: ns, InMemory: &inmemory.Options{Delays: inmemory.NoDelays()}})
	if err != nil {
		t.Fatal(err)
	}
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mgrCtx) }()
	defer func() { stop(); <-done }()

	objs, err := bench.Manifests(ns, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs[1:] { // the namespace exists
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	c := env.Client
	machines := waitMachines(ctx, t, c, ns, 2)

	// The kubeconfig KubeadmControlPlane wrote reaches the simulated API
	// server, which lists a Ready Node per Machine with its providerID.
	secret := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "c0-kubeconfig"}, secret); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		t.Fatal(err)
	}
	wl, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	checkNodes(ctx, t, wl, machines)
	kubectlListsNodes(t, secret.Data["value"], machines)
	refusesClientsWithoutCertificate(ctx, t, cfg)

	// KubeadmControlPlane is initialized and etcd answers with one member,
	// named after the control-plane Machine.
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "c0-cp"}, kcp); err != nil {
		t.Fatal(err)
	}
	if kcp.Status.Initialization.ControlPlaneInitialized == nil || !*kcp.Status.Initialization.ControlPlaneInitialized {
		t.Errorf("KubeadmControlPlane not initialized: %+v", kcp.Status)
	}
	pods := &corev1.PodList{}
	if err := wl.List(ctx, pods, client.InNamespace("kube-system"), client.MatchingLabels{"component": "etcd"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("etcd Pods: %v, %v", pods.Items, err)
	}
	cc, err := certs.Lookup(ctx, c, types.NamespacedName{Namespace: ns, Name: "c0"})
	if err != nil {
		t.Fatal(err)
	}
	// etcd is reached as KubeadmControlPlane reaches it: a port-forward
	// to the member's Pod through the simulated API server.
	etcd, err := podEtcd(ctx, cfg, cc, pods.Items[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	members, err := etcd.MemberList(ctx)
	etcd.Close()
	if err != nil || len(members.Members) != 1 || !strings.HasPrefix(members.Members[0].Name, "c0-cp-") {
		t.Fatalf("etcd members: %v, %v", members, err)
	}
	// The API server's serving certificate is read the same way, through a
	// port-forward to its Pod, and recorded on the Machine.
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		m := &clusterv1.Machine{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: members.Members[0].Name}, m); err != nil {
			return false, nil
		}
		return m.Annotations[clusterv1.MachineCertificatesExpiryDateAnnotation] != "", nil
	})
	if err != nil {
		t.Errorf("the control-plane Machine has no %s annotation: %v", clusterv1.MachineCertificatesExpiryDateAnnotation, err)
	}

	// Scaling the workers up and down reaches the simulated cluster.
	md := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "c0-md"}, md); err != nil {
		t.Fatal(err)
	}
	scale := func(n int32) {
		t.Helper()
		before := md.DeepCopy()
		md.Spec.Replicas = &n
		if err := c.Patch(ctx, md, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	scale(2)
	checkNodes(ctx, t, wl, waitMachines(ctx, t, c, ns, 3))
	scale(0)
	checkNodes(ctx, t, wl, waitMachines(ctx, t, c, ns, 1))

	// Three control-plane machines make three etcd members; back to one,
	// KubeadmControlPlane moves leadership and removes the leaving
	// members through the simulated etcd.
	scaleCP := func(n int32) {
		t.Helper()
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "c0-cp"}, kcp); err != nil {
			t.Fatal(err)
		}
		before := kcp.DeepCopy()
		kcp.Spec.Replicas = &n
		if err := c.Patch(ctx, kcp, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	scaleCP(3)
	checkNodes(ctx, t, wl, waitMachines(ctx, t, c, ns, 3))
	waitEtcdMembers(ctx, t, wl, cfg, cc, 3)
	scaleCP(1)
	checkNodes(ctx, t, wl, waitMachines(ctx, t, c, ns, 1))
	waitEtcdMembers(ctx, t, wl, cfg, cc, 1)

	// Deleting the Cluster removes the InMemory objects and closes the
	// simulated API server's port.
	endpoint := fmt.Sprintf("127.0.0.1:%d", mustIMC(ctx, t, c, ns).Spec.ControlPlaneEndpoint.Port)
	cl := &clusterv1.Cluster{}
	cl.Namespace, cl.Name = ns, "c0"
	if err := c.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		imcs := &inmemoryv1.InMemoryClusterList{}
		imms := &inmemoryv1.InMemoryMachineList{}
		if err := c.List(ctx, imcs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if err := c.List(ctx, imms, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(imcs.Items) == 0 && len(imms.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("InMemory objects still there after the Cluster's deletion: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", endpoint, time.Second); err == nil {
		conn.Close()
		t.Errorf("the deleted cluster's API server still listens on %s", endpoint)
	}
}

// waitMachines waits until exactly n Machines exist, all Running with a
// nodeRef, and returns them.
func waitMachines(ctx context.Context, t *testing.T, c client.Client, ns string, n int) []clusterv1.Machine {
	t.Helper()
	var got []clusterv1.Machine
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list := &clusterv1.MachineList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		got = list.Items
		if len(got) != n {
			return false, nil
		}
		for _, m := range got {
			if m.Status.Phase != string(clusterv1.MachinePhaseRunning) || m.Status.NodeRef.Name == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var states []string
		for _, m := range got {
			state := m.Name + "=" + m.Status.Phase
			for _, c := range m.Status.Conditions {
				if c.Type == clusterv1.DeletingCondition {
					state += " (" + c.Reason + ": " + c.Message + ")"
				}
			}
			states = append(states, state)
		}
		t.Fatalf("want %d Running Machines with a nodeRef, have %v: %v", n, states, err)
	}
	return got
}

// checkNodes wants exactly one Ready Node per Machine, with its providerID.
func checkNodes(ctx context.Context, t *testing.T, wl client.Client, machines []clusterv1.Machine) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		nodes := &corev1.NodeList{}
		if err := wl.List(ctx, nodes); err != nil {
			return false, err
		}
		if len(nodes.Items) != len(machines) {
			return false, nil
		}
		byName := map[string]corev1.Node{}
		for _, n := range nodes.Items {
			byName[n.Name] = n
		}
		for _, m := range machines {
			n, ok := byName[m.Status.NodeRef.Name]
			if !ok || n.Spec.ProviderID != m.Spec.ProviderID || !strings.HasPrefix(n.Spec.ProviderID, "inmemory://") {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the simulated cluster's Nodes do not match its %d Machines: %v", len(machines), err)
	}
}

func mustIMC(ctx context.Context, t *testing.T, c client.Client, ns string) *inmemoryv1.InMemoryCluster {
	t.Helper()
	imc := &inmemoryv1.InMemoryCluster{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "c0"}, imc); err != nil {
		t.Fatal(err)
	}
	return imc
}

// kubectlListsNodes runs `kubectl get nodes` with the cluster's kubeconfig,
// as a user would, when kubectl is installed.
func kubectlListsNodes(t *testing.T, kubeconfig []byte, machines []clusterv1.Machine) {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl is not installed; not checking it")
		return
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "--kubeconfig", path, "get", "nodes").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, out)
	}
	for _, m := range machines {
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			found = found || len(f) >= 2 && f[0] == m.Status.NodeRef.Name && f[1] == "Ready"
		}
		if !found {
			t.Errorf("kubectl get nodes does not list %s as Ready:\n%s", m.Status.NodeRef.Name, out)
		}
	}
	t.Logf("kubectl get nodes:\n%s", out)
}

// podEtcd is a client of the etcd member behind Pod kube-system/pod of
// the cluster cfg reaches.
func podEtcd(ctx context.Context, cfg *rest.Config, cc *certs.ClusterCertificates, pod string) (*etcdclient.Member, error) {
	dialer, err := portforward.NewDialer(cfg)
	if err != nil {
		return nil, err
	}
	return etcdclient.ForPod(ctx, etcdclient.PodConfig{Dialer: dialer, Namespace: "kube-system", Pod: pod,
		CA: cc.EtcdCA, CommonName: "test", DialTimeout: 3 * time.Second})
}

// waitEtcdMembers waits until the simulated etcd lists n members, asking
// the member of the first etcd Pod as KubeadmControlPlane does.
func waitEtcdMembers(ctx context.Context, t *testing.T, wl client.Client, cfg *rest.Config, cc *certs.ClusterCertificates, n int) {
	t.Helper()
	var last string
	err := wait.PollUntilContextCancel(ctx, 300*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := wl.List(ctx, pods, client.InNamespace("kube-system"), client.MatchingLabels{"component": "etcd"}); err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		cli, err := podEtcd(ctx, cfg, cc, pods.Items[0].Name)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer cli.Close()
		list, err := cli.MemberList(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprint(len(list.Members), " members")
		return len(list.Members) == n, nil
	})
	if err != nil {
		t.Fatalf("want %d etcd members, last saw %s: %v", n, last, err)
	}
}

// refusesClientsWithoutCertificate: a client that trusts the simulated API
// server but brings no client certificate is Unauthorized, even one that
// knows its address and CA; only the public health endpoint answers it.
func refusesClientsWithoutCertificate(ctx context.Context, t *testing.T, admin *rest.Config) {
	t.Helper()
	anonymous := rest.AnonymousClientConfig(admin)
	c, err := kubernetes.NewForConfig(anonymous)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("a client without a certificate listing Nodes: %v; want 401 Unauthorized", err)
	}
	if _, err := c.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("a client without a certificate created a Secret: %v; want 401 Unauthorized", err)
	}
	if body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil || string(body) != "ok" {
		t.Errorf("/readyz without a certificate: %q, %v; want ok", body, err)
	}
}
