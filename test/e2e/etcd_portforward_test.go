package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/etcdclient"
	"capstan.dev/capstan/internal/portforward"
	"capstan.dev/capstan/test/fixture"
)

// TestLocalEtcdThroughPortForward checks that a local cluster's etcd is
// reached the way KubeadmControlPlane reaches it, and the only way it
// would be reachable on a cloud: a port-forward to the member's static Pod
// kube-system/etcd-<node> through the workload cluster's API server, which
// asks the machine's kubelet to join the stream to the member. The control
// plane reports its members healthy that way, grows from one to three
// members, and shrinks back to one (leadership moved and members removed
// through the same path).
func TestLocalEtcdThroughPortForward(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a workload cluster of three control-plane machines")
	}
	p := newPlane(t)
	ctx := context.Background()
	out, code := capstan(t, "up", "--state-dir", p.dir, "--cluster", "pf", "--worker-machine-count", "0", "--cluster-timeout", "4m")
	if code != 0 {
		t.Fatalf("capstan up --cluster exited %d:\n%s\nlog:\n%s", code, out, tail(p.log(), 60))
	}
	mc := p.client()
	wcfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dir, "pf.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	wl := kubernetes.NewForConfigOrDie(wcfg)

	// The etcd Pod is kubeadm's: etcd-<node> in kube-system, labelled as
	// kubeadm labels it, on a Node whose kubelet serves its API on a port
	// of its own (machines share the host's loopback).
	nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("nodes: %v, %v", nodes, err)
	}
	node := nodes.Items[0]
	if port := node.Status.DaemonEndpoints.KubeletEndpoint.Port; port == 0 || port == 10250 {
		t.Errorf("Node %s reports kubelet port %d, not the port its kubelet API listens on", node.Name, port)
	}
	// The kubelet creates the static Pod's mirror after its Node is Ready,
	// a moment later on a loaded host.
	pod := &corev1.Pod{}
	fixture.Eventually(t, "the etcd Pod's mirror", time.Minute, func(ctx context.Context) string {
		p, err := wl.CoreV1().Pods("kube-system").Get(ctx, "etcd-"+node.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		pod = p
		return ""
	})
	if pod.Labels["component"] != "etcd" || pod.Labels["tier"] != "control-plane" || pod.Spec.NodeName != node.Name {
		t.Errorf("etcd Pod labels %v node %q", pod.Labels, pod.Spec.NodeName)
	}

	waitEtcdMembers(t, mc, "pf-control-plane", 1)

	// A client outside the machines reaches the member the same way, with
	// a certificate from the cluster's etcd CA.
	cc, err := certs.Lookup(ctx, mc, client.ObjectKey{Namespace: "default", Name: "pf"})
	if err != nil {
		t.Fatal(err)
	}
	dialer, err := portforward.NewDialer(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	if names := etcdMembersThroughAPIServer(t, dialer, cc, pod.Name); len(names) != 1 || names[0] != node.Name {
		t.Errorf("etcd members through the port-forward: %v, want [%s]", names, node.Name)
	}

	scaleControlPlane(t, mc, "pf-control-plane", 3)
	waitReadyNodes(t, wl, 3, 5*time.Minute)
	waitEtcdMembers(t, mc, "pf-control-plane", 3)

	scaleControlPlane(t, mc, "pf-control-plane", 1)
	waitReadyNodes(t, wl, 1, 5*time.Minute)
	kcp := waitEtcdMembers(t, mc, "pf-control-plane", 1)
	for _, cond := range kcp.Status.Conditions {
		if cond.Type == controlplanev1.KubeadmControlPlaneAvailableCondition && cond.Status != metav1.ConditionTrue {
			t.Errorf("control plane not Available after scaling back to one: %s", cond.Message)
		}
	}

	if err := mc.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pf"}}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the cluster deleted", 3*time.Minute, func(context.Context) string {
		err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "pf"}, &clusterv1.Cluster{})
		if client.IgnoreNotFound(err) != nil {
			return err.Error()
		}
		if err == nil {
			return "Cluster pf still there"
		}
		return ""
	})
}

// etcdMembersThroughAPIServer lists etcd's members through a port-forward
// to the etcd Pod pod.
func etcdMembersThroughAPIServer(t *testing.T, d *portforward.Dialer, cc *certs.ClusterCertificates, pod string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := etcdclient.ForPod(ctx, etcdclient.PodConfig{Dialer: d, Namespace: "kube-system", Pod: pod, CA: cc.EtcdCA,
		CommonName: "e2e", DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	list, err := m.MemberList(ctx)
	if err != nil {
		t.Fatalf("listing etcd members through a port-forward to %s: %v", pod, err)
	}
	var names []string
	for _, member := range list.Members {
		names = append(names, member.Name)
	}
	return names
}

func scaleControlPlane(t *testing.T, c client.Client, name string, n int) {
	t.Helper()
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	if err := c.Patch(context.Background(), kcp, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}
