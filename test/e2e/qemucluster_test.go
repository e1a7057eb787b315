package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
// It needs QEMU on the host (KVM makes it far faster) and builds the guest
// image on its first run.
func TestQEMUClusterLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("boots virtual machines")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is not installed")
	}
	p := newPlane(t)
	p.up()
	ctx := context.Background()
	mc := p.client()

	manifest, code := capstan(t, "generate", "cluster", "vms", "--infrastructure", "qemu")
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
			qm := &qemuv1.QEMUMachine{}
			if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: n.Name}, qm); err != nil {
				// The QEMUMachine is named after the infrastructure
				// template; match by provider ID instead.
				qm = qemuMachineByProviderID(ctx, t, mc, n.Spec.ProviderID)
			}
			if n.Spec.ProviderID != "qemu://default/"+qm.Name || qm.Spec.ProviderID != n.Spec.ProviderID {
				t.Errorf("Node %s has provider ID %q, its QEMUMachine %s %q", n.Name, n.Spec.ProviderID, qm.Name, qm.Spec.ProviderID)
			}
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
