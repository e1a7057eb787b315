package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
	"capstan.dev/capstan/test/fixture"
)

// TestQEMUClusterLifecycle brings up a cluster of QEMU virtual machines (1
// control plane + 1 worker) with the real binary the way a user does:
// `capstan up --cluster vms --infrastructure qemu`,
// kubectl through the endpoint, a killed worker VM reported and replaced by
// a MachineHealthCheck, and deletion leaving no QEMU process, disk or port.
// It needs QEMU and the image tools on the host (under CI=true their
// absence fails it) and builds the guest image on its first run, into the
// cache the QEMU tests share (fixture.QEMUImageCache). The VMs get one vCPU
// each: the guests are emulated (TCG) and CI hosts have few cores.
func TestQEMUClusterLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("boots virtual machines")
	}
	fixture.RequireQEMU(t)
	p := newPlane(t)
	ctx := context.Background()
	sizes := filepath.Join(t.TempDir(), "sizes.yaml")
	if err := os.WriteFile(sizes, []byte("CONTROL_PLANE_MACHINE_CPUS: 1\nCONTROL_PLANE_MACHINE_MEMORY_MIB: 2048\nWORKER_MACHINE_CPUS: 1\nWORKER_MACHINE_MEMORY_MIB: 1024\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The first machine waits for the guest image: built on the cache's
	// first run (each step then shows in the output), reused after.
	started := time.Now()
	// Within --cluster-timeout's default for QEMU (30 minutes) and the
	// plane's start.
	out, code := capstanWithin(t, 35*time.Minute, "up", "--state-dir", p.dir, "--qemu-image-cache", fixture.QEMUImageCache(t),
		"--cluster", "vms", "--infrastructure", "qemu", "--config", sizes)
	t.Logf("capstan up --cluster vms --infrastructure qemu (1 control plane + 1 worker) took %.0fs:\n%s", time.Since(started).Seconds(), out)
	if code != 0 {
		t.Fatalf("capstan up --cluster exited %d; log:\n%s", code, tail(p.log(), 60))
	}
	if !strings.Contains(out, "Cluster vms is ready") || strings.Count(out, " Ready ") != 2 {
		t.Fatalf("up did not report two Ready nodes:\n%s", out)
	}
	mc := p.client()
	path := filepath.Join(p.dir, "vms.kubeconfig")
	wcfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	wl := kubernetes.NewForConfigOrDie(wcfg)

	t.Run("kubectl through the endpoint sees both nodes Ready with their provider IDs", func(t *testing.T) {
		qc := &qemuv1.QEMUCluster{}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "vms"}, qc); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(wcfg.Host, ":"+strconv.Itoa(int(qc.Spec.ControlPlaneEndpoint.Port))) {
			t.Errorf("kubeconfig server %s is not the QEMUCluster's endpoint %s", wcfg.Host, qc.Spec.ControlPlaneEndpoint)
		}
		waitReadyNodes(t, wl, 2, 15*time.Minute)
		t.Logf("2 Ready nodes %.0fs after capstan up started", time.Since(started).Seconds())
		nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			qm := qemuMachineByProviderID(ctx, t, mc, n.Spec.ProviderID)
			if n.Spec.ProviderID != "qemu://default/"+qm.Name || qm.Spec.ProviderID != n.Spec.ProviderID {
				t.Errorf("Node %s has provider ID %q, its QEMUMachine %s %q", n.Name, n.Spec.ProviderID, qm.Name, qm.Spec.ProviderID)
			}
			logVMFigures(t, qm, &n)
		}
	})

	t.Run("a killed worker VM is reported and replaced", func(t *testing.T) {
		mhc := &clusterv1.MachineHealthCheck{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vms-workers"},
			Spec: clusterv1.MachineHealthCheckSpec{
				ClusterName: "vms",
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: "vms-md-0"}},
				Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
					{Type: "Ready", Status: "Unknown", TimeoutSeconds: ptr.To(int32(5))},
					{Type: "Ready", Status: "False", TimeoutSeconds: ptr.To(int32(5))},
				}},
				Remediation: clusterv1.MachineHealthCheckRemediation{TriggerIf: clusterv1.MachineHealthCheckRemediationTriggerIf{
					UnhealthyLessThanOrEqualTo: ptr.To(intstr.FromString("100%")),
				}},
			},
		}
		if err := mc.Create(ctx, mhc); err != nil {
			t.Fatal(err)
		}
		list := &qemuv1.QEMUMachineList{}
		if err := mc.List(ctx, list, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "vms-md-0"}); err != nil || len(list.Items) != 1 {
			t.Fatalf("worker QEMUMachines: %d (%v)", len(list.Items), err)
		}
		victim := list.Items[0]
		if victim.Status.VM.PID == 0 {
			t.Fatalf("worker %s reports no QEMU process: %+v", victim.Name, victim.Status.VM)
		}
		if err := syscall.Kill(int(victim.Status.VM.PID), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		fixture.Eventually(t, "the dead VM reported", time.Minute, func(ctx context.Context) string {
			qm := &qemuv1.QEMUMachine{}
			if err := mc.Get(ctx, client.ObjectKeyFromObject(&victim), qm); err != nil {
				return "" // already replaced
			}
			return fixture.Condition(qm.Status.Conditions, qemuv1.VMProvisionedCondition, metav1.ConditionFalse)
		})
		machine := ownerMachine(victim.OwnerReferences)
		waitReplaced(t, mc, wl, machine, 2, 15*time.Minute)
		t.Logf("worker %s: %.0fs from kill to a Ready replacement", machine, time.Since(killed).Seconds())
		if _, err := os.Stat(victim.Status.VM.Dir); !os.IsNotExist(err) {
			t.Errorf("the replaced VM's directory %s is left (%v)", victim.Status.VM.Dir, err)
		}
	})

	t.Run("deleting the cluster leaves no process, disk or port", func(t *testing.T) {
		var ports []int32
		var dirs []string
		list := &qemuv1.QEMUMachineList{}
		if err := mc.List(ctx, list, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		for _, qm := range list.Items {
			ports = append(ports, qm.Status.Ports.SSH, qm.Status.Ports.APIServer)
			dirs = append(dirs, qm.Status.VM.Dir)
		}
		qc := &qemuv1.QEMUCluster{}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "vms"}, qc); err != nil {
			t.Fatal(err)
		}
		ports = append(ports, qc.Spec.ControlPlaneEndpoint.Port)
		dirs = append(dirs, qc.Status.LoadBalancer.Dir)
		if err := mc.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vms"}}); err != nil {
			t.Fatal(err)
		}
		qemuDir := filepath.Join(p.dir, "qemu")
		fixture.Eventually(t, "everything of the cluster gone", 5*time.Minute, func(ctx context.Context) string {
			var left []string
			for _, list := range []client.ObjectList{&clusterv1.ClusterList{}, &qemuv1.QEMUMachineList{}, &qemuv1.QEMUClusterList{}} {
				if err := mc.List(ctx, list, client.InNamespace("default")); err != nil {
					return err.Error()
				}
				if n := meta.LenList(list); n > 0 {
					left = append(left, fmt.Sprintf("%d %T", n, list))
				}
			}
			for _, d := range dirs {
				if _, err := os.Stat(d); err == nil {
					left = append(left, "directory "+d)
				}
			}
			for _, port := range ports {
				if port == 0 {
					continue
				}
				if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), time.Second); err == nil {
					c.Close()
					left = append(left, fmt.Sprintf("a listener on port %d", port))
				}
			}
			if pids := processesUnder(qemuDir); len(pids) > 0 {
				left = append(left, fmt.Sprintf("processes %v", pids))
			}
			return strings.Join(left, ", ")
		})
	})
}

// logVMFigures logs how long a VM took from its start to its Node's
// registration and readiness, and its QEMU's resident memory.
func logVMFigures(t *testing.T, qm *qemuv1.QEMUMachine, n *corev1.Node) {
	t.Helper()
	var startedAt, readyAt time.Time
	for _, c := range qm.Status.Conditions {
		if c.Type == qemuv1.VMProvisionedCondition && c.Status == metav1.ConditionTrue {
			startedAt = c.LastTransitionTime.Time
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			readyAt = c.LastTransitionTime.Time
		}
	}
	rss := "unknown"
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", qm.Status.VM.PID)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				rss = strings.TrimSpace(v)
			}
		}
	}
	t.Logf("FIGURE vm %s: running to Node registered %.0fs, to Ready %.0fs; QEMU RSS %s",
		n.Name, n.CreationTimestamp.Sub(startedAt).Seconds(), readyAt.Sub(startedAt).Seconds(), rss)
}

func qemuMachineByProviderID(ctx context.Context, t *testing.T, c client.Client, id string) *qemuv1.QEMUMachine {
	t.Helper()
	list := &qemuv1.QEMUMachineList{}
	if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].Spec.ProviderID == id {
			return &list.Items[i]
		}
	}
	t.Fatalf("no QEMUMachine has provider ID %q", id)
	return nil
}

func ownerMachine(refs []metav1.OwnerReference) string {
	for _, r := range refs {
		if r.Kind == "Machine" {
			return r.Name
		}
	}
	return ""
}
