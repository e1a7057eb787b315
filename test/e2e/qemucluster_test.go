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
// `capstan generate cluster --infrastructure qemu` applied to a plane,
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
	p.up("--qemu-image-cache", fixture.QEMUImageCache(t))
	ctx := context.Background()
	mc := p.client()

	sizes := filepath.Join(t.TempDir(), "sizes.yaml")
	if err := os.WriteFile(sizes, []byte("CONTROL_PLANE_MACHINE_CPUS: 1\nCONTROL_PLANE_MACHINE_MEMORY_MIB: 2048\nWORKER_MACHINE_CPUS: 1\nWORKER_MACHINE_MEMORY_MIB: 1024\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest, code := capstan(t, "generate", "cluster", "vms", "--infrastructure", "qemu", "--config", sizes)
	if code != 0 {
		t.Fatalf("generate exited %d:\n%s", code, manifest)
	}
	started := time.Now()
	if err := apply(mc, manifest); err != nil {
		t.Fatal(err)
	}
	// The first machine waits for the guest image; later runs use the
	// cache under the plane's state directory.
	fixture.Eventually(t, "both VMs running", 20*time.Minute, func(ctx context.Context) string {
		say, running, broken := qemuMachinesSay(ctx, mc)
		if broken {
			// Waiting longer would not help: fail now, not after 20 minutes.
			t.Fatalf("a QEMUMachine cannot get going: %s", say)
		}
		return fixture.Unless(running == 2, say)
	})
	t.Logf("both VMs running %.0fs after the manifest was applied", time.Since(started).Seconds())
	kubeconfig, code := capstan(t, "get", "kubeconfig", "vms", "--kubeconfig", filepath.Join(p.dir, "kubeconfig"))
	if code != 0 {
		t.Fatalf("get kubeconfig exited %d:\n%s", code, kubeconfig)
	}
	path := filepath.Join(t.TempDir(), "vms.kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
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
		t.Logf("2 Ready nodes %.0fs after the manifest was applied", time.Since(started).Seconds())
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

// qemuMachinesSay sums up what the QEMUMachines' VMProvisioned conditions
// say, for a test waiting on them: how many VMs run, and whether one says
// what waiting does not mend (the image build or a VM's start failed, a VM
// exited).
func qemuMachinesSay(ctx context.Context, c client.Client) (say string, running int, broken bool) {
	list := &qemuv1.QEMUMachineList{}
	if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
		return err.Error(), 0, false
	}
	var says []string
	for _, qm := range list.Items {
		for _, cond := range qm.Status.Conditions {
			if cond.Type != qemuv1.VMProvisionedCondition {
				continue
			}
			says = append(says, fmt.Sprintf("%s: %s %s", qm.Name, cond.Reason, cond.Message))
			switch {
			case cond.Status == metav1.ConditionTrue:
				running++
			case cond.Reason == qemuv1.ImageFailedReason, cond.Reason == qemuv1.StartFailedReason, cond.Reason == qemuv1.VMExitedReason:
				broken = true
			}
		}
	}
	return fmt.Sprintf("%d QEMUMachines [%s]", len(list.Items), strings.Join(says, "; ")), running, broken
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
