package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/test/fixture"
)

// fleet is what must survive a backup and restore unchanged: the Cluster's
// UID and every Machine's and InMemoryMachine's UID (and provider ID).
type fleet struct {
	cluster  string
	machines []string // kind/name=uid lines, sorted
}

func (f fleet) String() string { return f.cluster + "\n  " + strings.Join(f.machines, "\n  ") }

// fleetOf reads the fleet of cluster name, whose infrastructure machines are
// of infraKind (InMemoryMachine, LocalMachine).
func fleetOf(ctx context.Context, c client.Client, name, infraKind string) (fleet, error) {
	var f fleet
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cl); err != nil {
		return f, err
	}
	f.cluster = string(cl.UID)
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace("default")); err != nil {
		return f, err
	}
	for _, m := range machines.Items {
		f.machines = append(f.machines, fmt.Sprintf("Machine/%s=%s", m.Name, m.UID))
	}
	infra := &unstructured.UnstructuredList{}
	infra.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
	infra.SetKind(infraKind + "List")
	if err := c.List(ctx, infra, client.InNamespace("default")); err != nil {
		return f, err
	}
	for _, m := range infra.Items {
		id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
		f.machines = append(f.machines, fmt.Sprintf("%s/%s=%s %s", infraKind, m.GetName(), m.GetUID(), id))
	}
	sort.Strings(f.machines)
	return f, nil
}

func waitAvailable(t *testing.T, c client.Client, name string) {
	t.Helper()
	fixture.Eventually(t, "cluster "+name+" Available", 5*time.Minute, func(ctx context.Context) string {
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cl); err != nil {
			return err.Error()
		}
		if cond := conditions.Get(cl, clusterv1.AvailableCondition); cond == nil || cond.Status != "True" {
			return fmt.Sprintf("Available: %+v", cond)
		}
		return ""
	})
}

// Back up a plane holding a cluster of simulated machines, lose its state
// directory, restore into a new one and start it: the Cluster, its
// Machines and InMemoryMachines are the same objects (same UIDs, no new
// ones) and the cluster is Available again. On the way: the snapshot is
// 0600, encrypted snapshots need their key (a wrong or missing one
// changes nothing), a running plane's directory is refused, and
// `up --backup-every` keeps the newest --backup-keep snapshots.
func TestBackupRestoreCarriesOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	work := t.TempDir()
	key, wrongKey := filepath.Join(work, "key"), filepath.Join(work, "wrong-key")
	for _, k := range []string{key, wrongKey} {
		if err := os.WriteFile(k, []byte(rand.Text()+rand.Text()[:6]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	scheduled := filepath.Join(work, "scheduled")

	p := newPlane(t)
	if out, code := capstan(t, "up", "--state-dir", p.dir, "--backup-every", "2s", "--backup-keep", "2", "--backup-dir", scheduled); code != 0 {
		t.Fatalf("capstan up exited %d:\n%s\nlog:\n%s", code, out, p.log())
	}
	c := p.client()
	config := filepath.Join(work, "capstan.yaml")
	if err := os.WriteFile(config, []byte("MACHINE_BOOT_DELAY: 1s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest, code := capstan(t, "generate", "cluster", "keep", "--infrastructure", "in-memory", "--worker-machine-count", "1", "--config", config)
	if code != 0 {
		t.Fatalf("generate exited %d:\n%s", code, manifest)
	}
	if err := apply(c, manifest); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, c, "keep")
	before, err := fleetOf(ctx, c, "keep", "InMemoryMachine")
	if err != nil {
		t.Fatal(err)
	}
	if len(before.machines) != 4 {
		t.Fatalf("want 2 Machines and 2 InMemoryMachines, have:\n%s", before)
	}

	snapshot := filepath.Join(work, "plane.backup")
	if out, code := capstan(t, "backup", "--state-dir", p.dir, "--to", snapshot, "--encryption-key-file", key); code != 0 {
		t.Fatalf("backup exited %d:\n%s", code, out)
	}
	if fi, err := os.Stat(snapshot); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot mode %v, %v; want 0600", fi.Mode(), err)
	}

	restored := filepath.Join(work, "restored")
	for what, c := range map[string]struct {
		args []string
		want string
	}{
		"no key":          {[]string{"--state-dir", restored}, "give its key with --encryption-key-file"},
		"wrong key":       {[]string{"--state-dir", restored, "--encryption-key-file", wrongKey}, "cannot be decrypted"},
		"a running plane": {[]string{"--state-dir", p.dir, "--encryption-key-file", key}, "capstan down --state-dir " + p.dir},
	} {
		out, code := capstan(t, append([]string{"restore", "--from", snapshot}, c.args...)...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("restore with %s exited %d; want a refusal saying %q:\n%s", what, code, c.want, out)
		}
	}
	if _, err := os.Stat(restored); !os.IsNotExist(err) {
		t.Errorf("a refused restore created %s (%v)", restored, err)
	}

	fixture.Eventually(t, "scheduled snapshots taken", time.Minute, func(context.Context) string {
		entries, err := os.ReadDir(scheduled)
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(len(entries) == 2, fmt.Sprintf("%d snapshots in %s", len(entries), scheduled))
	})
	time.Sleep(5 * time.Second) // two more periods: the oldest go, two stay
	entries, _ := os.ReadDir(scheduled)
	if len(entries) != 2 {
		t.Errorf("%d scheduled snapshots, want --backup-keep 2", len(entries))
	}
	for _, e := range entries {
		if fi, err := e.Info(); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("scheduled snapshot %s: mode %v, %v", e.Name(), fi.Mode(), err)
		}
	}

	// Lose the state directory.
	p.down()
	if err := os.RemoveAll(p.dir); err != nil {
		t.Fatal(err)
	}
	q := newPlane(t)
	q.dir = restored
	if out, code := capstan(t, "restore", "--from", snapshot, "--state-dir", q.dir, "--encryption-key-file", key); code != 0 {
		t.Fatalf("restore exited %d:\n%s", code, out)
	}
	q.up()
	c = q.client()
	// The restored status says Available from the start; the simulated
	// machines' Nodes come back only once the new plane's provider boots
	// them again, which is what shows that the machines carry on.
	waitReadyNodes(t, workloadOf(t, q, "keep"), 2, 5*time.Minute)
	waitAvailable(t, c, "keep")
	after, err := fleetOf(ctx, c, "keep", "InMemoryMachine")
	if err != nil {
		t.Fatal(err)
	}
	if after.String() != before.String() {
		t.Errorf("the restored cluster is not made of the same objects:\nbefore %s\nafter  %s", before, after)
	}
}

// workloadOf is a client of plane p's workload cluster name, through the
// kubeconfig `capstan get kubeconfig` gives.
func workloadOf(t *testing.T, p *plane, name string) kubernetes.Interface {
	t.Helper()
	kubeconfig, code := capstan(t, "get", "kubeconfig", name, "--kubeconfig", filepath.Join(p.dir, "kubeconfig"))
	if code != 0 {
		t.Fatalf("capstan get kubeconfig %s exited %d:\n%s", name, code, kubeconfig)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	return kubernetes.NewForConfigOrDie(cfg)
}

// A local cluster whose machines live in a --local-dir of their own outlives
// the loss of the plane's state directory: restored from a snapshot into a
// new directory, the plane finds the same machine processes (none restarted
// or created again), the same objects (same UIDs), and drives them on — a
// worker added after the restore joins.
func TestBackupRestoreLocalMachinesCarryOn(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a local workload cluster")
	}
	ctx := context.Background()
	p := newPlane(t)
	localDir := filepath.Join(t.TempDir(), "machines")
	t.Cleanup(func() { killProcessesUnder(localDir) })
	if out, code := capstan(t, "up", "--state-dir", p.dir, "--local-dir", localDir, "--cluster", "kept",
		"--worker-machine-count", "1", "--cluster-timeout", "5m"); code != 0 {
		t.Fatalf("capstan up --cluster exited %d:\n%s\nlog:\n%s", code, out, tail(p.log(), 60))
	}
	pids := movePIDs(t, localDir)
	if len(pids) != 3 {
		t.Fatalf("want 2 machines and a load balancer running, found %v", pids)
	}
	before, err := fleetOf(ctx, p.client(), "kept", "LocalMachine")
	if err != nil {
		t.Fatal(err)
	}
	snapshot := filepath.Join(t.TempDir(), "plane.backup")
	if out, code := capstan(t, "backup", "--state-dir", p.dir, "--to", snapshot); code != 0 {
		t.Fatalf("backup exited %d:\n%s", code, out)
	}

	p.down()
	if err := os.RemoveAll(p.dir); err != nil {
		t.Fatal(err)
	}
	q := newPlane(t)
	if out, code := capstan(t, "restore", "--from", snapshot, "--state-dir", q.dir); code != 0 {
		t.Fatalf("restore exited %d:\n%s", code, out)
	}
	if out, code := capstan(t, "up", "--state-dir", q.dir, "--local-dir", localDir); code != 0 {
		t.Fatalf("capstan up of the restored plane exited %d:\n%s\nlog:\n%s", code, out, tail(q.log(), 60))
	}
	c := q.client()
	waitAvailable(t, c, "kept")
	workload := workloadOf(t, q, "kept")
	waitReadyNodes(t, workload, 2, 5*time.Minute)
	expectSamePIDs(t, localDir, pids)
	after, err := fleetOf(ctx, c, "kept", "LocalMachine")
	if err != nil {
		t.Fatal(err)
	}
	if after.String() != before.String() {
		t.Errorf("the restored cluster is not made of the same objects:\nbefore %s\nafter  %s", before, after)
	}

	// The restored plane drives the machines on: one more worker joins.
	mds := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, mds, client.InNamespace("default"), client.MatchingLabels{clusterv1.ClusterNameLabel: "kept"}); err != nil || len(mds.Items) != 1 {
		t.Fatalf("want the cluster's one MachineDeployment, have %d (%v)", len(mds.Items), err)
	}
	md := &mds.Items[0]
	if err := c.Patch(ctx, md, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))); err != nil {
		t.Fatal(err)
	}
	waitReadyNodes(t, workload, 3, 5*time.Minute)
	expectSamePIDs(t, localDir, pids)
}

// `backup --kubeconfig` snapshots another management cluster's Cluster API
// objects and secrets (file 0600), leaving them unpaused; `restore
// --kubeconfig` refuses to write over objects that are not the
// snapshot's, and once they are gone brings them back, unpaused.
func TestBackupOfObjectsRestores(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	kubeconfig := filepath.Join(env.StateDir, "kubeconfig")
	ns := "backup-objects"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
		Spec: clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-kubeconfig"}, Data: map[string][]byte{"value": []byte("kubeconfig")}}
	for _, o := range []client.Object{cluster, secret} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	snapshot := filepath.Join(t.TempDir(), "objects.backup")
	out, code := capstan(t, "backup", "--kubeconfig", kubeconfig, "-n", ns, "--pause-timeout", "0", "--to", snapshot)
	if code != 0 {
		t.Fatalf("backup exited %d:\n%s", code, out)
	}
	if fi, err := os.Stat(snapshot); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot mode %v, %v; want 0600", fi.Mode(), err)
	}
	notPaused := func(what string) {
		t.Helper()
		cur := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), cur); err != nil {
			t.Fatal(err)
		}
		if (cur.Spec.Paused != nil && *cur.Spec.Paused) || cur.Annotations["move.capstan.dev/paused"] != "" {
			t.Errorf("%s: the Cluster is left paused: %v %v", what, cur.Spec.Paused, cur.Annotations)
		}
	}
	notPaused("after the backup")

	out, code = capstan(t, "restore", "--kubeconfig", kubeconfig, "--from", snapshot)
	if code == 0 || !strings.Contains(out, "not the snapshot's") || !strings.Contains(out, "c1") {
		t.Fatalf("restore over the live objects exited %d; want a refusal naming them:\n%s", code, out)
	}
	for _, o := range []client.Object{cluster, secret} {
		if err := c.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	fixture.Eventually(t, "the Cluster gone", time.Minute, func(ctx context.Context) string {
		err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprintf("still there (%v)", err))
	})
	if out, code := capstan(t, "restore", "--kubeconfig", kubeconfig, "--from", snapshot); code != 0 {
		t.Fatalf("restore exited %d:\n%s", code, out)
	}
	notPaused("after the restore")
	back := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(secret), back); err != nil || string(back.Data["value"]) != "kubeconfig" {
		t.Errorf("the secret came back as %v, %v", back.Data, err)
	}
	restored := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), restored); err != nil || restored.Annotations["move.capstan.dev/source-uid"] != string(cluster.UID) {
		t.Errorf("the restored Cluster does not record its original (%s): %v, %v", cluster.UID, restored.Annotations, err)
	}
}
