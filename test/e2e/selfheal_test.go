package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/test/fixture"
)

// TestLocalClusterSelfHealing kills machines' processes, as a failing VM
// would stop, and checks that MachineHealthChecks have them replaced: a
// worker, a control-plane machine (etcd back to three healthy members while
// the API keeps answering through the endpoint), and two of three workers,
// which the health check's 40% limit refuses to remediate, saying why.
func TestLocalClusterSelfHealing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a workload cluster of six machines")
	}
	p := newPlane(t)
	ctx := context.Background()
	out, code := capstan(t, "up", "--state-dir", p.dir, "--cluster", "heal",
		"--control-plane-machine-count", "3", "--worker-machine-count", "3", "--cluster-timeout", "4m")
	if code != 0 {
		t.Fatalf("capstan up --cluster exited %d:\n%s\nlog:\n%s", code, out, tail(p.log(), 60))
	}
	mc := p.client()
	wcfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dir, "heal.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	wl := kubernetes.NewForConfigOrDie(wcfg)

	nodeUnhealthy := []clusterv1.UnhealthyNodeCondition{
		{Type: "Ready", Status: "Unknown", TimeoutSeconds: ptr.To(int32(5))},
		{Type: "Ready", Status: "False", TimeoutSeconds: ptr.To(int32(5))},
	}
	for _, mhc := range []*clusterv1.MachineHealthCheck{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "heal-workers"},
			Spec: clusterv1.MachineHealthCheckSpec{
				ClusterName: "heal",
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: "heal-md-0"}},
				Checks:      clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: nodeUnhealthy},
				Remediation: clusterv1.MachineHealthCheckRemediation{TriggerIf: clusterv1.MachineHealthCheckRemediationTriggerIf{
					UnhealthyLessThanOrEqualTo: ptr.To(intstr.FromString("40%")),
				}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "heal-control-plane"},
			Spec: clusterv1.MachineHealthCheckSpec{
				ClusterName: "heal",
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineControlPlaneNameLabel: "heal-control-plane"}},
				Checks:      clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: nodeUnhealthy},
			},
		},
	} {
		if err := mc.Create(ctx, mhc); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a killed worker is replaced", func(t *testing.T) {
		victim := killMachine(t, mc, clusterv1.MachineDeploymentNameLabel, "heal-md-0")
		start := time.Now()
		waitReplaced(t, mc, wl, victim, 6, 4*time.Minute)
		t.Logf("worker %s: %.0fs from kill to a Ready replacement (the Node goes NotReady after the node monitor's 40s grace period, then the 5s check timeout)", victim, time.Since(start).Seconds())
	})

	t.Run("a killed control-plane machine is replaced", func(t *testing.T) {
		probe := startAPIProbe(wcfg)
		victim := killMachine(t, mc, clusterv1.MachineControlPlaneNameLabel, "heal-control-plane")
		start := time.Now()
		waitReplaced(t, mc, wl, victim, 6, 5*time.Minute)
		kcp := waitEtcdMembers(t, mc, "heal-control-plane", 3)
		ok, failed, _ := probe.stop()
		t.Logf("control-plane machine %s: %.0fs from kill to a healthy 3-member control plane; API probe through the endpoint meanwhile: %d answered, %d failed; lastRemediation names %s",
			victim, time.Since(start).Seconds(), ok, failed, kcp.Status.LastRemediation.Machine)
		if kcp.Status.LastRemediation.Machine != victim {
			t.Errorf("status.lastRemediation names %q, want %s", kcp.Status.LastRemediation.Machine, victim)
		}
		// Only requests already on their way to the killed API server may
		// fail: the load balancer stops choosing it within its check period.
		if failed > 5 {
			t.Errorf("%d probe requests failed; only the killed member's own in-flight requests may", failed)
		}
	})

	t.Run("two of three workers dead is more than 40 percent: nothing is remediated", func(t *testing.T) {
		// A health check counts a Machine as unhealthy only once its
		// condition outlasted the timeout; two nodes failing a few seconds
		// apart would be judged one at a time. Pausing the check while both
		// go NotReady makes it see them together, as it would two machines
		// that failed at the same moment.
		mhc := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "heal-workers"}}
		setPaused := func(paused bool) {
			body := `{"metadata":{"annotations":{"` + clusterv1.PausedAnnotation + `":null}}}`
			if paused {
				body = `{"metadata":{"annotations":{"` + clusterv1.PausedAnnotation + `":""}}}`
			}
			if err := mc.Patch(ctx, mhc, client.RawPatch("application/merge-patch+json", []byte(body))); err != nil {
				t.Fatal(err)
			}
		}
		setPaused(true)
		a := killMachine(t, mc, clusterv1.MachineDeploymentNameLabel, "heal-md-0")
		b := killMachine(t, mc, clusterv1.MachineDeploymentNameLabel, "heal-md-0", a)
		for _, name := range []string{a, b} {
			fixture.Eventually(t, "Node "+name+" NotReady", 3*time.Minute, func(context.Context) string {
				n, err := wl.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err.Error()
				}
				if nodeIsReady(n) {
					return "still Ready"
				}
				return ""
			})
		}
		time.Sleep(6 * time.Second) // past the check's 5s timeout
		setPaused(false)
		fixture.Eventually(t, "the health check refuses to remediate", 3*time.Minute, func(context.Context) string {
			if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "heal-workers"}, mhc); err != nil {
				return err.Error()
			}
			for _, c := range mhc.Status.Conditions {
				if c.Type == clusterv1.RemediationAllowedCondition && c.Status == metav1.ConditionFalse {
					if strings.Contains(c.Message, "2 of 3") {
						return ""
					}
					return c.Message
				}
			}
			return fmt.Sprintf("remediation still allowed (%d healthy of %d)", ptr.Deref(mhc.Status.CurrentHealthy, 0), ptr.Deref(mhc.Status.ExpectedMachines, 0))
		})
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
			for _, name := range []string{a, b} {
				m := &clusterv1.Machine{}
				if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, m); err != nil || !m.DeletionTimestamp.IsZero() {
					t.Fatalf("Machine %s was remediated although 2 of 3 are unhealthy (%v)", name, err)
				}
			}
		}
	})
}

// killMachine SIGKILLs the processes of one running machine matching the
// label (not one of skip) and returns its Machine's name.
func killMachine(t *testing.T, c client.Client, label, value string, skip ...string) string {
	t.Helper()
	list := &localv1.LocalMachineList{}
	if err := c.List(context.Background(), list, client.InNamespace("default"), client.MatchingLabels{label: value}); err != nil {
		t.Fatal(err)
	}
	for _, lm := range list.Items {
		pid := int(lm.Status.Process.PID)
		if pid == 0 || lm.Status.Process.Phase != localv1.LocalMachinePhase("Running") || contains(skip, lm.Name) {
			continue
		}
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("killed machine %s (pid %d)", lm.Name, pid)
		return lm.Name
	}
	t.Fatalf("no running machine with %s=%s", label, value)
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// waitReplaced waits until the Machine is gone and the workload cluster is
// back to n Ready nodes.
func waitReplaced(t *testing.T, c client.Client, wl kubernetes.Interface, machine string, n int, timeout time.Duration) {
	t.Helper()
	fixture.Eventually(t, "Machine "+machine+" replaced", timeout, func(context.Context) string {
		m := &clusterv1.Machine{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: machine}, m); err == nil {
			return "Machine " + machine + " still there"
		}
		return ""
	})
	waitReadyNodes(t, wl, n, timeout)
}
