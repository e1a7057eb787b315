package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/test/fixture"
)

// installCapstanInto brings a workload cluster of one control-plane and one
// worker machine up on the plane p (`capstan up --cluster`), writes its
// kubeconfig from the <cluster>-kubeconfig Secret, and installs Capstan
// into it with `capstan init --infrastructure local` (the manager runs the
// local provider on p's machine directory, as a real process on the
// worker). It returns the workload kubeconfig's path once the manager is
// available.
func installCapstanInto(t *testing.T, p *plane, cluster string) string {
	t.Helper()
	ctx := context.Background()
	out, code := capstan(t, "up", "--state-dir", p.dir, "--cluster", cluster, "--worker-machine-count", "1", "--cluster-timeout", "4m")
	if code != 0 {
		t.Fatalf("capstan up --cluster exited %d:\n%s\nlog:\n%s", code, out, tail(p.log(), 60))
	}
	secret := &corev1.Secret{}
	if err := p.client().Get(ctx, client.ObjectKey{Namespace: "default", Name: cluster + "-kubeconfig"}, secret); err != nil {
		t.Fatalf("reading the workload kubeconfig Secret: %v", err)
	}
	kubeconfig := filepath.Join(t.TempDir(), cluster+".kubeconfig")
	if err := os.WriteFile(kubeconfig, secret.Data["value"], 0o600); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	out, code = capstan(t, "init", "--state-dir", p.dir, "--kubeconfig", kubeconfig, "--infrastructure", "local", "--timeout", "3m")
	if code != 0 {
		t.Fatalf("capstan init exited %d:\n%s", code, out)
	}
	t.Logf("capstan init took %.1fs:\n%s", time.Since(started).Seconds(), out)
	if !strings.Contains(out, "manager Deployment available") || !strings.Contains(out, "manager is running") {
		t.Errorf("init did not say that the manager runs:\n%s", out)
	}
	return kubeconfig
}

// installedManagerPids are the processes running the installed manager of
// the plane's local machines: `capstan manager ... --local-dir=<dir>/local`.
func installedManagerPids(p *plane) []int {
	want := []byte("--local-dir=" + filepath.Join(p.dir, "local"))
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(cmdline, []byte{0})
		if len(args) > 1 && string(args[1]) == "manager" && bytes.Contains(cmdline, want) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestInstallIntoWorkloadCluster is the first half of the pivot: Capstan
// installed into a workload cluster of the local provider runs there for
// real (its manager is a process on the worker, holding its leader Lease),
// upgrade plan finds nothing to do, an installation of another version is
// refused by init and upgraded by upgrade apply, and delete takes it out.
func TestInstallIntoWorkloadCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a workload cluster")
	}
	ctx := context.Background()
	p := newPlane(t)
	kubeconfig := installCapstanInto(t, p, "self")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	wl := kubernetes.NewForConfigOrDie(cfg)

	d, err := wl.AppsV1().Deployments("capstan-system").Get(ctx, "capstan-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !deploymentAvailable(d) {
		t.Errorf("the manager Deployment is not Available after init: %+v", d.Status)
	}
	pods, err := wl.CoreV1().Pods("capstan-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=capstan-manager"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("manager pods: %v, %v", pods, err)
	}
	pod := pods.Items[0]
	logs, _ := filepath.Glob(filepath.Join(p.dir, "local", "*", "*", "machines", "*", "rootfs", "var", "lib", "kubelet", "pods", string(pod.UID), "manager.log"))
	if len(logs) != 1 {
		t.Fatalf("the manager's log file for pod %s on node %s was not found (%v)", pod.Name, pod.Spec.NodeName, logs)
	}
	t.Logf("manager pod %s on node %s logs to %s", pod.Name, pod.Spec.NodeName, logs[0])
	if pids := installedManagerPids(p); len(pids) != 1 {
		t.Errorf("manager processes %v, want one", pids)
	}

	// The manager holds and renews its leader Lease in the workload cluster.
	var first *metav1.MicroTime
	renewed := false
	defer func() {
		if !renewed {
			b, _ := os.ReadFile(logs[0])
			t.Logf("manager log:\n%s", tail(string(b), 40))
		}
	}()
	fixture.Eventually(t, "the manager to renew its leader Lease", 90*time.Second, func(context.Context) string {
		lease, err := wl.CoordinationV1().Leases("capstan-system").Get(ctx, "capstan-manager", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if lease.Spec.RenewTime == nil || lease.Spec.HolderIdentity == nil {
			return "no holder yet"
		}
		if first == nil {
			first = lease.Spec.RenewTime
			return "renewed once at " + first.String()
		}
		if !lease.Spec.RenewTime.After(first.Time) {
			return "not renewed since " + first.String()
		}
		return ""
	})
	renewed = true

	out, code := capstan(t, "upgrade", "plan", "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, "is up to date") {
		t.Errorf("capstan upgrade plan exited %d:\n%s\nwant up to date", code, out)
	}
	// An installation of another version: init refuses and points to
	// upgrade; upgrade plan and apply bring it to this binary's version,
	// rolling the manager over to a new process.
	out, _ = capstan(t, "version")
	version := strings.Fields(out)[1]
	old := "v0.0.1-e2e"
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"capstan.dev/version":%q}}}`, old)
	if _, err := wl.CoreV1().Namespaces().Patch(ctx, "capstan-system", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	patch = fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"manager","image":"ghcr.io/capstan-dev/capstan:%s"}]}}}}`, old)
	if _, err := wl.AppsV1().Deployments("capstan-system").Patch(ctx, "capstan-manager", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	out, code = capstan(t, "init", "--state-dir", p.dir, "--kubeconfig", kubeconfig, "--infrastructure", "local")
	if code == 0 || !strings.Contains(out, "capstan upgrade") || !strings.Contains(out, old) {
		t.Errorf("capstan init over %s exited %d:\n%s\nwant a refusal pointing to capstan upgrade", old, code, out)
	}
	out, code = capstan(t, "upgrade", "plan", "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, old+" → "+version) || !strings.Contains(out, "capstan:"+old+" → ghcr.io/capstan-dev/capstan:"+version) {
		t.Errorf("capstan upgrade plan exited %d:\n%s\nwant %s → %s and the image change", code, out, old, version)
	}
	out, code = capstan(t, "upgrade", "apply", "--kubeconfig", kubeconfig, "--timeout", "2m")
	t.Logf("capstan upgrade apply:\n%s", out)
	if code != 0 {
		t.Fatalf("capstan upgrade apply exited %d", code)
	}
	if out, code := capstan(t, "upgrade", "plan", "--kubeconfig", kubeconfig); code != 0 || !strings.Contains(out, "is up to date") {
		t.Errorf("capstan upgrade plan after apply exited %d:\n%s\nwant up to date", code, out)
	}
	fixture.Eventually(t, "one manager process after the rollout", time.Minute, func(context.Context) string {
		if pids := installedManagerPids(p); len(pids) != 1 {
			return fmt.Sprintf("manager processes %v", pids)
		}
		return ""
	})

	// A second init of the same version is harmless.
	if out, code := capstan(t, "init", "--state-dir", p.dir, "--kubeconfig", kubeconfig, "--infrastructure", "local", "--timeout", "1m"); code != 0 {
		t.Errorf("a second capstan init exited %d:\n%s", code, out)
	}

	out, code = capstan(t, "delete", "--kubeconfig", kubeconfig, "--timeout", "2m")
	if code != 0 {
		t.Fatalf("capstan delete exited %d:\n%s", code, out)
	}
	if _, err := wl.CoreV1().Namespaces().Get(ctx, "capstan-system", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace capstan-system after delete: %v", err)
	}
	fixture.Eventually(t, "the manager process to end", 30*time.Second, func(context.Context) string {
		if pids := installedManagerPids(p); len(pids) > 0 {
			return fmt.Sprintf("still running: %v", pids)
		}
		return ""
	})
	// The CRDs stay, and with them every Cluster API object.
	wc, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := wc.Get(ctx, client.ObjectKey{Name: "clusters.cluster.x-k8s.io"}, crd); err != nil {
		t.Errorf("the Cluster CRD after delete: %v", err)
	}
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue && d.Status.AvailableReplicas >= 1
		}
	}
	return false
}
