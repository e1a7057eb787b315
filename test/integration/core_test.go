// Package integration runs all of Capstan's core controllers together
// against real API servers — a management plane and a second plane standing
// in for the workload cluster — with the contract-following test provider
// bringing machines up.
package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

var (
	planes   *fixture.Planes
	mgmt, wl *testenv.Env
)

func TestMain(m *testing.M) {
	fixture.SetLogger()
	code := func() int {
		p, stop, err := fixture.StartPlanes(context.Background())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stop()
		planes, mgmt, wl = p, p.Mgmt, p.Workload
		return m.Run()
	}()
	os.Exit(code)
}

// startManager runs every controller and the test provider until the
// returned function stops them.
func startManager(t *testing.T) (stop func()) {
	t.Helper()
	stop, err := planes.StartManager(context.Background(), manager.Options{AllowRestartInProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	return stop
}

func machines(t *testing.T, ns string) []clusterv1.Machine {
	t.Helper()
	list := &clusterv1.MachineList{}
	if err := mgmt.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func available(m *clusterv1.Machine) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.AvailableCondition)
	return m.DeletionTimestamp.IsZero() && c != nil && c.Status == metav1.ConditionTrue
}

// runningWithNodes waits until exactly n Machines exist, all Running with a
// Node in the workload cluster, all at version.
func runningWithNodes(t *testing.T, ns string, n int, version string) {
	t.Helper()
	fixture.Eventually(t, fmt.Sprintf("%d Machines Running at %s", n, version), 2*time.Minute, func(context.Context) string {
		ms := machines(t, ns)
		if len(ms) != n {
			return fmt.Sprintf("%d Machines", len(ms))
		}
		for i := range ms {
			m := &ms[i]
			if m.Status.Phase != string(clusterv1.MachinePhaseRunning) || m.Spec.Version != version || !available(m) {
				return fmt.Sprintf("machine %s: phase %s version %s available %v", m.Name, m.Status.Phase, m.Spec.Version, available(m))
			}
			node := &corev1.Node{}
			if err := wl.Client.Get(context.Background(), client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
				return fmt.Sprintf("node of %s: %v", m.Name, err)
			}
		}
		return ""
	})
}

func createCluster(t *testing.T, ns string, replicas int32) *clusterv1.MachineDeployment {
	t.Helper()
	md := fixture.Workers(ns, "c", replicas)
	md.Spec.Rollout = clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
		Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
			MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		},
	}}
	fixture.CreateProviderCluster(t, mgmt, wl, ns, "c", md, true)
	return md
}

func patchMD(t *testing.T, md *clusterv1.MachineDeployment, body string) {
	t.Helper()
	if err := mgmt.Client.Patch(context.Background(), md, client.RawPatch("application/merge-patch+json", []byte(body))); err != nil {
		t.Fatal(err)
	}
}

// rolloutWatcher checks the rolling update's promises at every observed
// step: never more than replicas+maxSurge Machines, never fewer than
// replicas−maxUnavailable available.
type rolloutWatcher struct {
	stop  chan struct{}
	done  chan struct{}
	steps int
	worst string
}

func watchRollout(t *testing.T, ns string, maxMachines, minAvailable int) *rolloutWatcher {
	w := &rolloutWatcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			list := &clusterv1.MachineList{}
			if err := mgmt.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
				continue
			}
			avail := 0
			for i := range list.Items {
				if available(&list.Items[i]) {
					avail++
				}
			}
			w.steps++
			if len(list.Items) > maxMachines || avail < minAvailable {
				w.worst = fmt.Sprintf("%d Machines (max %d), %d available (min %d)", len(list.Items), maxMachines, avail, minAvailable)
			}
		}
	}()
	return w
}

func (w *rolloutWatcher) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	if w.worst != "" {
		t.Errorf("rolling update broke its limits: %s", w.worst)
	}
	t.Logf("rolling update observed in %d steps", w.steps)
}

func TestClusterLifecycle(t *testing.T) {
	stop := startManager(t)
	defer func() { stop() }()
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	md := createCluster(t, ns, 3)
	runningWithNodes(t, ns, 3, "v1.35.0")

	// Scale up, then down.
	patchMD(t, md, `{"spec":{"replicas":5}}`)
	runningWithNodes(t, ns, 5, "v1.35.0")
	patchMD(t, md, `{"spec":{"replicas":2}}`)
	runningWithNodes(t, ns, 2, "v1.35.0")

	// A rolling update of 5 replicas, maxSurge 1, maxUnavailable 0; the
	// manager restarts in the middle and must converge without duplicates.
	patchMD(t, md, `{"spec":{"replicas":5}}`)
	runningWithNodes(t, ns, 5, "v1.35.0")
	w := watchRollout(t, ns, 6, 5)
	patchMD(t, md, `{"spec":{"template":{"spec":{"version":"v1.35.1"}}}}`)
	fixture.Eventually(t, "rollout under way", time.Minute, func(context.Context) string {
		for _, m := range machines(t, ns) {
			if m.Spec.Version == "v1.35.1" && available(&m) {
				return ""
			}
		}
		return "no new Machine available yet"
	})
	stop()
	stop = startManager(t)
	runningWithNodes(t, ns, 5, "v1.35.1")
	w.finish(t)
	sets := &clusterv1.MachineSetList{}
	if err := mgmt.Client.List(ctx, sets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	current := 0
	for _, s := range sets.Items {
		if s.Spec.Template.Spec.Version == "v1.35.1" {
			current++
		}
	}
	if current != 1 {
		t.Errorf("%d MachineSets for the new template, want 1 (restart made a duplicate?)", current)
	}

	// OnDelete: nothing is replaced until the user deletes a Machine.
	patchMD(t, md, `{"spec":{"rollout":{"strategy":{"type":"OnDelete","rollingUpdate":null}},"template":{"spec":{"version":"v1.35.2"}}}}`)
	time.Sleep(3 * time.Second)
	for _, m := range machines(t, ns) {
		if m.Spec.Version == "v1.35.2" || !m.DeletionTimestamp.IsZero() {
			t.Fatalf("OnDelete replaced Machine %s on its own", m.Name)
		}
	}
	victim := machines(t, ns)[0]
	if err := mgmt.Client.Delete(ctx, &victim); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "deleted Machine replaced at the new version", 2*time.Minute, func(context.Context) string {
		n, updated := 0, 0
		for _, m := range machines(t, ns) {
			n++
			if m.Spec.Version == "v1.35.2" && available(&m) {
				updated++
			}
		}
		if n != 5 || updated != 1 {
			return fmt.Sprintf("%d Machines, %d at v1.35.2", n, updated)
		}
		return ""
	})

	// Pause: nothing happens to a paused Cluster's Machines.
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}
	if err := mgmt.Client.Patch(ctx, cluster, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":true}}`))); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "Paused condition", 30*time.Second, func(context.Context) string {
		_ = mgmt.Client.Get(ctx, client.ObjectKeyFromObject(md), md)
		c := meta.FindStatusCondition(md.Status.Conditions, clusterv1.PausedCondition)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("Paused %+v", c)
		}
		return ""
	})
	patchMD(t, md, `{"spec":{"replicas":6}}`)
	time.Sleep(3 * time.Second)
	if n := len(machines(t, ns)); n != 5 {
		t.Fatalf("a paused Cluster's MachineDeployment scaled to %d Machines", n)
	}
	if err := mgmt.Client.Patch(ctx, cluster, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":false}}`))); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "scaled after unpause", 2*time.Minute, func(context.Context) string {
		if n := len(machines(t, ns)); n != 6 {
			return fmt.Sprintf("%d Machines", n)
		}
		return ""
	})

	// Deleting the Cluster takes everything with it.
	if err := mgmt.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "everything deleted", 2*time.Minute, func(context.Context) string {
		for _, list := range []client.ObjectList{&clusterv1.ClusterList{}, &clusterv1.MachineDeploymentList{}, &clusterv1.MachineSetList{}, &clusterv1.MachineList{}} {
			if err := mgmt.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err.Error()
			}
			if n := meta.LenList(list); n > 0 {
				return fmt.Sprintf("%d %T left", n, list)
			}
		}
		for _, k := range provider.Kinds {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(k.GVK().GroupVersion().WithKind(k.Kind + "List"))
			if err := mgmt.Client.List(ctx, list, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
				return err.Error()
			}
			if n := len(list.Items); n > 0 {
				return fmt.Sprintf("%d %s left", n, k.Kind)
			}
		}
		return ""
	})
}
