package interop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TestClusterctlOnALocalCluster drives upstream clusterctl against a cluster
// that Capstan brought up on its local provider: describe in every mode the
// book documents, get kubeconfig, and alpha rollout restart, pause and
// resume of the MachineDeployment and the KubeadmControlPlane. Each restart
// must settle with every Machine replaced and UpToDate.
func TestClusterctlOnALocalCluster(t *testing.T) {
	p := newPlane(t)
	p.up("--cluster", "demo", "--worker-machine-count", "2", "--cluster-timeout", "5m")
	kc := p.kubeconfig()
	c := p.client()
	ctx := context.Background()

	out := mustClusterctl(t, "describe", "cluster", "demo", "--kubeconfig", kc)
	for _, want := range []string{"Cluster default/demo", "LocalCluster default/demo", "KubeadmControlPlane default/demo-control-plane", "Workers", "MachineDeployment default/demo-md-0"} {
		if !strings.Contains(out, want) {
			t.Errorf("clusterctl describe cluster lacks %q:\n%s", want, out)
		}
	}
	t.Logf("clusterctl describe cluster demo:\n%s", out)
	machines := clusterMachines(t, c, "demo")
	out = mustClusterctl(t, "describe", "cluster", "demo", "--kubeconfig", kc, "--grouping=false")
	for _, m := range machines {
		if !strings.Contains(out, "Machine default/"+m.Name) {
			t.Errorf("clusterctl describe --grouping=false does not list Machine %s:\n%s", m.Name, out)
		}
	}
	out = mustClusterctl(t, "describe", "cluster", "demo", "--kubeconfig", kc, "--show-conditions", "all")
	for _, want := range []string{"Available", "ControlPlaneAvailable", "InfrastructureReady", "RemoteConnectionProbe", "WorkersAvailable"} {
		if !strings.Contains(out, want) {
			t.Errorf("clusterctl describe --show-conditions all lacks condition %s:\n%s", want, out)
		}
	}
	out = mustClusterctl(t, "describe", "cluster", "demo", "--kubeconfig", kc, "--echo")
	for _, want := range []string{"LocalMachine default/", "KubeadmConfig default/"} {
		if !strings.Contains(out, want) {
			t.Errorf("clusterctl describe --echo lacks %s rows:\n%s", want, out)
		}
	}

	// get kubeconfig prints the Secret Capstan's control plane wrote, and it
	// reaches the workload cluster.
	out = mustClusterctl(t, "get", "kubeconfig", "demo", "--kubeconfig", kc)
	wcfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(out))
	if err != nil {
		t.Fatalf("clusterctl get kubeconfig printed no kubeconfig: %v\n%s", err, out)
	}
	nodes, err := kubernetes.NewForConfigOrDie(wcfg).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 3 {
		t.Fatalf("the workload cluster through clusterctl's kubeconfig: %d nodes, %v; want 3", len(nodes.Items), err)
	}

	// Pause and resume, then restart, the workers.
	mustClusterctl(t, "alpha", "rollout", "pause", "machinedeployment/demo-md-0", "--kubeconfig", kc)
	md := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-md-0"}, md); err != nil || !ptr.Deref(md.Spec.Paused, false) {
		t.Fatalf("after rollout pause the MachineDeployment's spec.paused is %v (%v)", md.Spec.Paused, err)
	}
	if out, code := clusterctl(t, "alpha", "rollout", "restart", "machinedeployment/demo-md-0", "--kubeconfig", kc); code == 0 {
		t.Errorf("clusterctl restarted a paused MachineDeployment:\n%s", out)
	}
	mustClusterctl(t, "alpha", "rollout", "resume", "machinedeployment/demo-md-0", "--kubeconfig", kc)
	restart := time.Now().Add(-time.Second)
	mustClusterctl(t, "alpha", "rollout", "restart", "machinedeployment/demo-md-0", "--kubeconfig", kc)
	settled(t, c, "demo", clusterv1.MachineDeploymentNameLabel, "demo-md-0", 2, restart)

	// The same for the control plane (one machine: a new one joins, the old
	// one leaves etcd and goes).
	mustClusterctl(t, "alpha", "rollout", "pause", "kubeadmcontrolplane/demo-control-plane", "--kubeconfig", kc)
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-control-plane"}, kcp); err != nil || kcp.Annotations[clusterv1.PausedAnnotation] == "" {
		t.Fatalf("after rollout pause the KubeadmControlPlane's annotations are %v (%v)", kcp.Annotations, err)
	}
	eventually(t, "the paused KubeadmControlPlane reports Paused", time.Minute, func() string {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-control-plane"}, kcp); err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(kcp.Status.Conditions, clusterv1.PausedCondition) {
			return fmt.Sprintf("conditions %v", kcp.Status.Conditions)
		}
		return ""
	})
	mustClusterctl(t, "alpha", "rollout", "resume", "kubeadmcontrolplane/demo-control-plane", "--kubeconfig", kc)
	restart = time.Now().Add(-time.Second)
	mustClusterctl(t, "alpha", "rollout", "restart", "kubeadmcontrolplane/demo-control-plane", "--kubeconfig", kc)
	settled(t, c, "demo", clusterv1.MachineControlPlaneNameLabel, "demo-control-plane", 1, restart)

	// The owners' counters come to agree with their Machines.
	eventually(t, "the control plane and the workers count their Machines", time.Minute, func() string {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-control-plane"}, kcp); err != nil {
			return err.Error()
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-md-0"}, md); err != nil {
			return err.Error()
		}
		k, d := kcp.Status, md.Status
		if ptr.Deref(k.Replicas, 0) != 1 || ptr.Deref(k.UpToDateReplicas, 0) != 1 || ptr.Deref(k.AvailableReplicas, 0) != 1 ||
			ptr.Deref(d.Replicas, 0) != 2 || ptr.Deref(d.UpToDateReplicas, 0) != 2 || ptr.Deref(d.AvailableReplicas, 0) != 2 {
			return fmt.Sprintf("control plane replicas/upToDate/available %v/%v/%v, workers %v/%v/%v; want 1/1/1 and 2/2/2",
				ptr.Deref(k.Replicas, -1), ptr.Deref(k.UpToDateReplicas, -1), ptr.Deref(k.AvailableReplicas, -1),
				ptr.Deref(d.Replicas, -1), ptr.Deref(d.UpToDateReplicas, -1), ptr.Deref(d.AvailableReplicas, -1))
		}
		return ""
	})
	out = mustClusterctl(t, "describe", "cluster", "demo", "--kubeconfig", kc)
	t.Logf("clusterctl describe cluster demo after both restarts:\n%s", out)
	if !strings.Contains(out, "KubeadmControlPlane default/demo-control-plane, v1.35.8  1/1") {
		t.Errorf("clusterctl describe does not show the control plane as 1/1:\n%s", out)
	}
}

// clusterMachines lists the cluster's Machines.
func clusterMachines(t testing.TB, c client.Client, cluster string) []clusterv1.Machine {
	t.Helper()
	list := &clusterv1.MachineList{}
	if err := c.List(context.Background(), list, client.InNamespace("default"), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// settled waits until the owner's Machines (selected by label=value) are
// exactly want, all made after since, with their nodes Ready and every Machine
// of the cluster UpToDate.
func settled(t testing.TB, c client.Client, cluster, label, value string, want int, since time.Time) {
	t.Helper()
	eventually(t, "the restart of "+value+" settles", 6*time.Minute, func() string {
		list := &clusterv1.MachineList{}
		if err := c.List(context.Background(), list, client.InNamespace("default"), client.MatchingLabels{label: value}); err != nil {
			return err.Error()
		}
		if len(list.Items) != want {
			return fmt.Sprintf("%d Machines, want %d", len(list.Items), want)
		}
		for _, m := range list.Items {
			if !m.CreationTimestamp.After(since) {
				return fmt.Sprintf("Machine %s was made before the restart", m.Name)
			}
			if !meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineNodeReadyCondition) {
				return fmt.Sprintf("Machine %s: node not Ready yet", m.Name)
			}
		}
		for _, m := range clusterMachines(t, c, cluster) {
			if !m.DeletionTimestamp.IsZero() {
				return fmt.Sprintf("Machine %s is still being deleted", m.Name)
			}
			if !meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition) {
				return fmt.Sprintf("Machine %s is not UpToDate: %v", m.Name, meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpToDateCondition))
			}
		}
		return ""
	})
}
