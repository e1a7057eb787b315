package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// movedKinds are the kinds of a local-provider cluster's objects.
var movedKinds = []struct{ group, kind string }{
	{"cluster.x-k8s.io", "Cluster"},
	{"cluster.x-k8s.io", "MachineDeployment"},
	{"cluster.x-k8s.io", "MachineSet"},
	{"cluster.x-k8s.io", "Machine"},
	{"controlplane.cluster.x-k8s.io", "KubeadmControlPlane"},
	{"bootstrap.cluster.x-k8s.io", "KubeadmConfig"},
	{"bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate"},
	{"infrastructure.cluster.x-k8s.io", "LocalCluster"},
	{"infrastructure.cluster.x-k8s.io", "LocalMachine"},
	{"infrastructure.cluster.x-k8s.io", "LocalMachineTemplate"},
	{"", "Secret"},
}

// inventory lists "Kind/name" of every object of the moved kinds in the
// default namespace (Secrets: those of the cluster), sorted.
func inventory(t testing.TB, c client.Client, cluster string) []string {
	t.Helper()
	var out []string
	for _, k := range movedKinds {
		list := &unstructured.UnstructuredList{}
		version := "v1beta2"
		if k.group == "" {
			version = "v1"
		}
		list.SetGroupVersionKind(gvk(k.group, version, k.kind+"List"))
		opts := []client.ListOption{client.InNamespace("default")}
		if k.kind == "Secret" {
			opts = append(opts, client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})
		}
		if err := c.List(context.Background(), list, opts...); err != nil {
			t.Fatalf("listing %s: %v", k.kind, err)
		}
		for _, o := range list.Items {
			out = append(out, k.kind+"/"+o.GetName())
		}
	}
	slices.Sort(out)
	return out
}

func machineNames(t testing.TB, c client.Client, cluster string) []string {
	var names []string
	for _, m := range clusterMachines(t, c, cluster) {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// TestClusterctlMove moves a local-provider cluster with upstream clusterctl
// from one Capstan plane to another (both use the same directory of local
// machines, as two management clusters can reach the same cloud), then backs
// it up to a directory and restores it into a third plane: every object
// arrives, nothing stays behind, no Machine is replaced, and the cluster
// scales from where it now lives.
func TestClusterctlMove(t *testing.T) {
	ctx := context.Background()
	a, b := newPlane(t), newPlane(t)
	a.up("--cluster", "demo", "--worker-machine-count", "1", "--cluster-timeout", "5m")
	b.up("--local-dir", filepath.Join(a.dir, "local"))
	ac, bc := a.client(), b.client()

	before := inventory(t, ac, "demo")
	if !slices.Contains(before, "LocalMachineTemplate/demo-control-plane") || !slices.Contains(before, "KubeadmConfigTemplate/demo-md-0") {
		t.Fatalf("the cluster's templates are missing before the move: %v", before)
	}
	machines := machineNames(t, ac, "demo")
	t.Logf("objects of the cluster: %v", before)

	out := mustClusterctl(t, "move", "--kubeconfig", a.kubeconfig(), "--to-kubeconfig", b.kubeconfig(), "--namespace", "default")
	t.Logf("clusterctl move:\n%s", out)
	if got := inventory(t, bc, "demo"); !slices.Equal(got, before) {
		t.Fatalf("on the target after clusterctl move:\n%v\nwant\n%v", got, before)
	}
	if got := inventory(t, ac, "demo"); len(got) != 0 {
		t.Fatalf("left on the source after clusterctl move: %v", got)
	}
	stable(t, bc, "demo", machines)

	// The moved cluster scales from the target.
	md := &clusterv1.MachineDeployment{}
	if err := bc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-md-0"}, md); err != nil {
		t.Fatal(err)
	}
	base := md.DeepCopy()
	md.Spec.Replicas = ptr.To(int32(2))
	if err := bc.Patch(ctx, md, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the moved cluster's new worker is Ready", 4*time.Minute, func() string {
		ms := clusterMachines(t, bc, "demo")
		if len(ms) != 3 {
			return fmt.Sprintf("%d Machines", len(ms))
		}
		for _, m := range ms {
			if !meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineNodeReadyCondition) {
				return "Machine " + m.Name + ": node not Ready"
			}
		}
		return ""
	})
	machines = machineNames(t, bc, "demo")
	before = inventory(t, bc, "demo")

	// A backup to a directory keeps the source as it was (clusterctl
	// pauses it while it writes, then resumes it); restoring it into a new
	// plane after the old one is gone brings the cluster back with the same
	// Machines.
	dir := filepath.Join(t.TempDir(), "backup")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mustClusterctl(t, "move", "--kubeconfig", b.kubeconfig(), "--to-directory", dir, "--namespace", "default")
	if got := inventory(t, bc, "demo"); !slices.Equal(got, before) {
		t.Fatalf("the source after clusterctl move --to-directory:\n%v\nwant it unchanged:\n%v", got, before)
	}
	stable(t, bc, "demo", machines)
	files, _ := os.ReadDir(dir)
	if len(files) != len(before) {
		t.Errorf("clusterctl wrote %d files for %d objects", len(files), len(before))
	}
	if out, code := capstan(t, "down", "--state-dir", b.dir); code != 0 {
		t.Fatalf("capstan down: %s", out)
	}
	c := newPlane(t)
	c.up("--local-dir", filepath.Join(a.dir, "local"))
	mustClusterctl(t, "move", "--from-directory", dir, "--to-kubeconfig", c.kubeconfig(), "--namespace", "default")
	cc := c.client()
	if got := inventory(t, cc, "demo"); !slices.Equal(got, before) {
		t.Fatalf("after clusterctl move --from-directory:\n%v\nwant\n%v", got, before)
	}
	stable(t, cc, "demo", machines)
}

// stable waits until the moved Cluster is unpaused and Available, then
// checks for a while that its Machines are exactly the ones it had.
func stable(t testing.TB, c client.Client, cluster string, machines []string) {
	t.Helper()
	eventually(t, "the moved Cluster is unpaused and Available", 3*time.Minute, func() string {
		cl := &clusterv1.Cluster{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: cluster}, cl); err != nil {
			return err.Error()
		}
		if ptr.Deref(cl.Spec.Paused, false) || cl.Annotations[clusterv1.PausedAnnotation] != "" {
			return "still paused"
		}
		if !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1.AvailableCondition) {
			return fmt.Sprintf("not Available: %v", meta.FindStatusCondition(cl.Status.Conditions, clusterv1.AvailableCondition))
		}
		return ""
	})
	for i := 0; i < 20; i++ {
		if got := machineNames(t, c, cluster); !slices.Equal(got, machines) {
			t.Fatalf("Machines after the move: %v, want the same as before: %v", got, machines)
		}
		time.Sleep(time.Second)
	}
}
