package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/etcdclient"
	"capstan.dev/capstan/internal/portforward"
	"capstan.dev/capstan/test/fixture"
)

// checkEtcdThroughPortForward checks that the etcd members of the local
// cluster's control plane are reached the way KubeadmControlPlane reaches
// them, and the only way they would be reachable on a cloud: a port-forward
// to the member's static Pod kube-system/etcd-<node> through the workload
// cluster's API server, which asks the machine's kubelet to join the
// stream to the member. A client outside the machines, with a certificate
// of the cluster's etcd CA, lists every control-plane node as a member.
func checkEtcdThroughPortForward(t *testing.T, mc client.Client, wcfg *rest.Config, wl kubernetes.Interface, cluster string) {
	t.Helper()
	ctx := context.Background()
	nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("control-plane nodes: %v, %v", nodes, err)
	}
	var want []string
	for _, n := range nodes.Items {
		want = append(want, n.Name)
	}
	node := nodes.Items[0]
	if port := node.Status.DaemonEndpoints.KubeletEndpoint.Port; port == 0 || port == 10250 {
		t.Errorf("Node %s reports kubelet port %d, not the port its kubelet API listens on", node.Name, port)
	}
	// The etcd Pod is kubeadm's: etcd-<node> in kube-system, labelled as
	// kubeadm labels it. The kubelet creates the static Pod's mirror after
	// its Node is Ready, a moment later on a loaded host.
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
	cc, err := certs.Lookup(ctx, mc, client.ObjectKey{Namespace: "default", Name: cluster})
	if err != nil {
		t.Fatal(err)
	}
	dialer, err := portforward.NewDialer(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	got := etcdMembersThroughAPIServer(t, dialer, cc, pod.Name)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("etcd members through the port-forward to %s: %v, want the control-plane nodes %v", pod.Name, got, want)
	}
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
