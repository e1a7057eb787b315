package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/lockfile"
	"capstan.dev/capstan/test/fixture"
)

// TestMoveBetweenPlanes moves a 3+2 local cluster (the ha flavor) from plane A to a
// directory and back, then to plane B (which shares A's local machine
// directory) with the move killed halfway and run again; on B every object
// is there once, none is left on A, no machine was restarted, and scaling
// the workers from B adds a Ready node.
func TestMoveBetweenPlanes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a workload cluster of five machines")
	}
	ctx := context.Background()
	a, b := newPlane(t), newPlane(t)
	localDir := filepath.Join(a.dir, "local")
	out, code := capstan(t, "up", "--state-dir", a.dir, "--cluster", "demo", "--flavor", "ha",
		"--worker-machine-count", "2", "--cluster-timeout", "5m")
	if code != 0 {
		t.Fatalf("capstan up --cluster exited %d:\n%s\nlog:\n%s", code, out, tail(a.log(), 60))
	}
	// The ha flavor spreads the control plane over the LocalCluster's three
	// failure domains.
	controlPlane := &clusterv1.MachineList{}
	if err := a.client().List(ctx, controlPlane, client.InNamespace("default"), client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
		t.Fatal(err)
	}
	domains := map[string]bool{}
	for _, m := range controlPlane.Items {
		domains[m.Spec.FailureDomain] = true
	}
	if len(controlPlane.Items) != 3 || len(domains) != 3 || domains[""] {
		t.Errorf("control-plane Machines %d over failure domains %v, want 3 over 3", len(controlPlane.Items), domains)
	}
	if out, code := capstan(t, "up", "--state-dir", b.dir, "--local-dir", localDir); code != 0 {
		t.Fatalf("capstan up of plane B exited %d:\n%s\nlog:\n%s", code, out, tail(b.log(), 60))
	}
	ac, bc := a.client(), b.client()
	aKubeconfig, bKubeconfig := filepath.Join(a.dir, "kubeconfig"), filepath.Join(b.dir, "kubeconfig")
	pids := movePIDs(t, localDir)
	if len(pids) != 6 {
		t.Fatalf("want 5 machines and a load balancer running, found %v", pids)
	}
	before := moveInventory(t, ac, "demo")
	t.Logf("objects of the cluster: %v", before)

	// A dry run lists the plan and changes nothing.
	out, code = capstan(t, "move", "--kubeconfig", aKubeconfig, "--to-kubeconfig", bKubeconfig, "--dry-run")
	if code != 0 || !strings.Contains(out, "Would move 33 objects") || !strings.Contains(out, "LocalMachine.infrastructure.cluster.x-k8s.io default/") {
		t.Fatalf("dry run exited %d:\n%s", code, out)
	}
	if got := moveInventory(t, bc, "demo"); len(got) != 0 {
		t.Fatalf("a dry run created on B: %v", got)
	}
	cl := &clusterv1.Cluster{}
	if err := ac.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo"}, cl); err != nil || cl.Spec.Paused != nil {
		t.Fatalf("after a dry run the Cluster on A is %v (err %v), want unpaused", cl.Spec.Paused, err)
	}

	// A to a directory and back.
	dir := filepath.Join(t.TempDir(), "moved")
	if out, code := capstan(t, "move", "--kubeconfig", aKubeconfig, "--to-directory", dir); code != 0 {
		t.Fatalf("move to a directory exited %d:\n%s", code, out)
	}
	if got := moveInventory(t, ac, "demo"); len(got) != 0 {
		t.Fatalf("left on A after the move to a directory: %v", got)
	}
	if out, code := capstan(t, "move", "--kubeconfig", aKubeconfig, "--from-directory", dir); code != 0 {
		t.Fatalf("move from a directory exited %d:\n%s", code, out)
	}
	if got := moveInventory(t, ac, "demo"); !equalInventory(got, before) {
		t.Fatalf("after the round trip through a directory A has %v, want %v", got, before)
	}
	expectSamePIDs(t, localDir, pids)

	// A to B, killed after a few creations, then run again.
	cmd := exec.Command(env.Binary, "move", "--kubeconfig", aKubeconfig, "--to-kubeconfig", bKubeconfig, "--step-delay", "300ms")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var firstRun strings.Builder
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		firstRun.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(strings.TrimSpace(sc.Text()), "[8/") && !killed {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("the move ended before it could be killed:\n%s", firstRun.String())
	}
	t.Logf("killed move:\n%s", firstRun.String())
	out, code = capstan(t, "move", "--kubeconfig", aKubeconfig, "--to-kubeconfig", bKubeconfig)
	if code != 0 {
		t.Fatalf("resumed move exited %d:\n%s", code, out)
	}
	t.Logf("resumed move:\n%s", out)
	if !strings.Contains(out, "exists already (earlier run)") {
		t.Errorf("the resumed move did not recognise what the killed one created")
	}

	if got := moveInventory(t, ac, "demo"); len(got) != 0 {
		t.Errorf("left on A: %v", got)
	}
	if got := moveInventory(t, bc, "demo"); !equalInventory(got, before) {
		t.Errorf("B has %v, want %v", got, before)
	}
	expectSamePIDs(t, localDir, pids)

	waitUnpausedAndAvailable(t, bc, "demo")

	for _, list := range []client.ObjectList{&clusterv1.MachineList{}, &bootstrapv1.KubeadmConfigList{}, &localv1.LocalMachineList{}, &controlplanev1.KubeadmControlPlaneList{}} {
		if err := bc.List(ctx, list, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		items, _ := meta.ExtractList(list)
		for _, item := range items {
			o := item.(client.Object)
			_, paused := o.GetAnnotations()[clusterv1.PausedAnnotation]
			_, marked := o.GetAnnotations()["move.capstan.dev/paused"]
			if paused || marked {
				t.Errorf("%T %s is still paused on B: %v", o, o.GetName(), o.GetAnnotations())
			}
		}
	}

	wcfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(a.dir, "demo.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	wl := kubernetes.NewForConfigOrDie(wcfg)
	waitReadyNodes(t, wl, 5, time.Minute)
	md := &clusterv1.MachineDeployment{}
	md.Namespace, md.Name = "default", "demo-md-0"
	if err := bc.Patch(ctx, md, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":3}}`))); err != nil {
		t.Fatal(err)
	}
	waitReadyNodes(t, wl, 6, 3*time.Minute)
	expectSamePIDs(t, localDir, pids)
	if got := moveInventory(t, ac, "demo"); len(got) != 0 {
		t.Errorf("A acquired objects again after the scale-up on B: %v", got)
	}
}

// waitUnpausedAndAvailable waits until the Cluster default/name is
// unpaused and Available, as its controller observed its latest spec.
func waitUnpausedAndAvailable(t *testing.T, c client.Client, name string) {
	t.Helper()
	cluster := &clusterv1.Cluster{}
	fixture.Eventually(t, "Cluster "+name+" unpaused and Available", 2*time.Minute, func(context.Context) string {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, cluster); err != nil {
			return err.Error()
		}
		if cluster.Spec.Paused != nil && *cluster.Spec.Paused {
			return "spec.paused is true"
		}
		for kind, want := range map[string]metav1.ConditionStatus{clusterv1.PausedCondition: metav1.ConditionFalse, clusterv1.AvailableCondition: metav1.ConditionTrue} {
			cond := meta.FindStatusCondition(cluster.Status.Conditions, kind)
			if cond == nil || cond.Status != want || cond.ObservedGeneration != cluster.Generation {
				return fmt.Sprintf("condition %s is %+v, want %s", kind, cond, want)
			}
		}
		return ""
	})
}

// movePIDs maps each running local machine (and the load balancer) under
// root to the pid holding its lock.
func movePIDs(t *testing.T, root string) map[string]int {
	t.Helper()
	locks, _ := filepath.Glob(filepath.Join(root, "*", "*", "machines", "*", "node.lock"))
	lbs, _ := filepath.Glob(filepath.Join(root, "*", "*", "lb", "lb.lock"))
	out := map[string]int{}
	for _, l := range append(locks, lbs...) {
		if held, err := lockfile.Held(l); err != nil || !held {
			continue
		}
		pid, err := lockfile.Owner(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		out[filepath.Base(filepath.Dir(l))] = pid
	}
	return out
}

func expectSamePIDs(t *testing.T, root string, want map[string]int) {
	t.Helper()
	got := movePIDs(t, root)
	for name, pid := range want {
		if got[name] != pid {
			t.Errorf("%s: pid %d, was %d: the machine was restarted or stopped", name, got[name], pid)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			t.Errorf("%s: process %d is gone", name, pid)
		}
	}
}

// moveInventory lists the objects of the cluster named cluster in the
// default namespace by kind and name, with their UIDs left out (a move
// gives new ones).
func moveInventory(t *testing.T, c client.Client, cluster string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	lists := map[string]client.ObjectList{
		"Cluster": &clusterv1.ClusterList{}, "Machine": &clusterv1.MachineList{}, "MachineSet": &clusterv1.MachineSetList{},
		"MachineDeployment": &clusterv1.MachineDeploymentList{}, "KubeadmControlPlane": &controlplanev1.KubeadmControlPlaneList{},
		"KubeadmConfig": &bootstrapv1.KubeadmConfigList{}, "KubeadmConfigTemplate": &bootstrapv1.KubeadmConfigTemplateList{},
		"LocalCluster": &localv1.LocalClusterList{}, "LocalMachine": &localv1.LocalMachineList{},
		"LocalMachineTemplate": &localv1.LocalMachineTemplateList{}, "Secret": &corev1.SecretList{},
	}
	for kind, list := range lists {
		if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			o := item.(client.Object)
			if kind == "Secret" && !strings.HasPrefix(o.GetName(), cluster) {
				continue
			}
			out = append(out, kind+"/"+o.GetName())
		}
	}
	sort.Strings(out)
	return out
}

func equalInventory(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}
