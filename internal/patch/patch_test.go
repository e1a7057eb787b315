package patch_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/internal/topology"
	"capstan.dev/capstan/test/fixture"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// createCluster creates a Cluster of the test's own.
func createCluster(t *testing.T) *clusterv1.Cluster {
	t.Helper()
	c := fixture.NewCluster(env.Namespace(t), "c", fixture.Infrastructure(&localv1.LocalCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}}))
	fixture.Create(t, env.Client, c)
	return c
}

func TestNothingChangedWritesNothing(t *testing.T) {
	c := createCluster(t)
	rv := c.ResourceVersion
	h, err := patch.NewHelper(c, env.Client)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Patch(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	got := &clusterv1.Cluster{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != rv {
		t.Errorf("an unchanged object was written: resourceVersion %s -> %s", rv, got.ResourceVersion)
	}
}

func TestSpecAndStatusChangesLand(t *testing.T) {
	ctx := context.Background()
	c := createCluster(t)
	h, _ := patch.NewHelper(c, env.Client)
	c.Labels = map[string]string{"a": "b"}
	c.Finalizers = []string{clusterv1.ClusterFinalizer}
	c.Status.Phase = "Provisioning"
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: "Paused", Status: metav1.ConditionFalse, Reason: "NotPaused"})
	if err := h.Patch(ctx, c); err != nil {
		t.Fatal(err)
	}
	got := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if got.Labels["a"] != "b" || len(got.Finalizers) != 1 || got.Status.Phase != "Provisioning" || len(got.Status.Conditions) != 1 {
		t.Errorf("changes did not land: %+v %+v", got.ObjectMeta, got.Status)
	}
	rv := got.ResourceVersion
	// A second Patch without changes writes nothing.
	if err := h.Patch(ctx, c); err != nil {
		t.Fatal(err)
	}
	_ = env.Client.Get(ctx, client.ObjectKeyFromObject(c), got)
	if got.ResourceVersion != rv {
		t.Error("second patch without changes wrote")
	}
}

// A status patch does not conflict with someone else's write to other fields.
func TestStatusPatchDoesNotConflict(t *testing.T) {
	ctx := context.Background()
	c := createCluster(t)
	h, _ := patch.NewHelper(c, env.Client)
	other := c.DeepCopy()
	other.Annotations = map[string]string{"someone": "else"}
	if err := env.Client.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	c.Status.Phase = "Provisioned"
	if err := h.Patch(ctx, c); err != nil {
		t.Fatalf("status patch over a stale copy: %v", err)
	}
}

// Dropping a finalizer from a stale copy must not erase one added since.
func TestFinalizerChangeOnStaleCopyConflicts(t *testing.T) {
	ctx := context.Background()
	c := createCluster(t)
	h, _ := patch.NewHelper(c, env.Client)
	other := c.DeepCopy()
	other.Finalizers = []string{"someone.example.com/keep"}
	if err := env.Client.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	c.Finalizers = []string{clusterv1.ClusterFinalizer}
	err := h.Patch(ctx, c)
	if !apierrors.IsConflict(err) {
		t.Fatalf("want a conflict, got %v", err)
	}
}

// Changing conditions over a stale copy must not drop a condition someone
// else wrote since.
func TestConditionsChangeOnStaleCopyConflicts(t *testing.T) {
	ctx := context.Background()
	c := createCluster(t)
	h, _ := patch.NewHelper(c, env.Client)
	other := c.DeepCopy()
	meta.SetStatusCondition(&other.Status.Conditions, metav1.Condition{Type: "TheirCondition", Status: metav1.ConditionTrue, Reason: "Theirs"})
	if err := env.Client.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: "MyCondition", Status: metav1.ConditionTrue, Reason: "Mine"})
	if err := h.Patch(ctx, c); !apierrors.IsConflict(err) {
		t.Fatalf("want a conflict, got %v", err)
	}
}

// The sole writer of a status changes its conditions over a stale copy
// without a conflict.
func TestSoleStatusWriterDoesNotConflict(t *testing.T) {
	ctx := context.Background()
	c := createCluster(t)
	h, _ := patch.NewHelper(c, env.Client, patch.SoleStatusWriter())
	other := c.DeepCopy()
	other.Status.Phase = "Provisioning"
	if err := env.Client.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: "MyCondition", Status: metav1.ConditionTrue, Reason: "Mine"})
	if err := h.Patch(ctx, c); err != nil {
		t.Fatalf("want the write to land, got %v", err)
	}
	got := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if meta.FindStatusCondition(got.Status.Conditions, "MyCondition") == nil {
		t.Errorf("conditions after the write: %v", got.Status.Conditions)
	}
}

// With owned conditions, a controller's status write keeps the conditions
// others own, even from a stale copy, and does not conflict.
func TestOwnedConditionsKeepOthersEntries(t *testing.T) {
	ctx := context.Background()
	c := createCluster(t)
	h, _ := patch.NewHelper(c, env.Client, patch.OwnedConditions("test-owner", "MyCondition"))
	other := c.DeepCopy()
	meta.SetStatusCondition(&other.Status.Conditions, metav1.Condition{Type: "TheirCondition", Status: metav1.ConditionTrue, Reason: "Theirs"})
	if err := env.Client.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: "MyCondition", Status: metav1.ConditionTrue, Reason: "Mine"})
	c.Status.Phase = "Provisioning"
	if err := h.Patch(ctx, c); err != nil {
		t.Fatal(err)
	}
	got := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if meta.FindStatusCondition(got.Status.Conditions, "TheirCondition") == nil || meta.FindStatusCondition(got.Status.Conditions, "MyCondition") == nil || got.Status.Phase != "Provisioning" {
		t.Errorf("status after apply: %+v", got.Status)
	}
}

// A controller that changes the spec it reports on observed that new spec:
// the status it writes in the same Patch carries the new generation.
func TestOwnSpecChangeIsObserved(t *testing.T) {
	ctx := context.Background()
	c := createCluster(t)
	h, _ := patch.NewHelper(c, env.Client)
	c.Spec.ClusterNetwork.ServiceDomain = "example.local"
	c.Status.ObservedGeneration = c.Generation
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: "Paused", Status: metav1.ConditionFalse, Reason: "NotPaused", ObservedGeneration: c.Generation})
	if err := h.Patch(ctx, c); err != nil {
		t.Fatal(err)
	}
	got := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if got.Generation != 2 || got.Status.ObservedGeneration != 2 || got.Status.Conditions[0].ObservedGeneration != 2 {
		t.Errorf("generation %d, observedGeneration %d, condition's %d; want all 2", got.Generation, got.Status.ObservedGeneration, got.Status.Conditions[0].ObservedGeneration)
	}
	rv := got.ResourceVersion
	if err := h.Patch(ctx, c); err != nil {
		t.Fatal(err)
	}
	_ = env.Client.Get(ctx, client.ObjectKeyFromObject(c), got)
	if got.ResourceVersion != rv {
		t.Error("a second patch without changes wrote")
	}
}

// A Cluster's status shared out by field and condition (a topology
// Cluster's): two controllers writing from the same copy both land without
// a conflict, and each keeps what the other wrote, including a plan the one
// cleared while the other still had it in its copy.
func TestOwnedStatusPartsDoNotSetEachOtherBack(t *testing.T) {
	ctx := context.Background()
	c := createCluster(t)
	plan := []clusterv1.StatusUpgradePlanVersion{{Version: "v1.35.9"}}
	seed, _ := patch.NewHelper(c, env.Client, patch.OwnedStatus("topology-writer", topology.TopologyStatus))
	c.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{UpgradePlan: plan}
	if err := seed.Patch(ctx, c); err != nil {
		t.Fatal(err)
	}

	clusterCopy, topologyCopy := c.DeepCopy(), c.DeepCopy()
	clusterWriter, _ := patch.NewHelper(clusterCopy, env.Client, patch.OwnedStatus("cluster-writer", topology.StatusWithoutTopology))
	topologyWriter, _ := patch.NewHelper(topologyCopy, env.Client, patch.OwnedStatus("topology-writer", topology.TopologyStatus))

	topologyCopy.Status.ControlPlane.UpgradePlan = nil
	meta.SetStatusCondition(&topologyCopy.Status.Conditions, metav1.Condition{Type: clusterv1.ClusterTopologyReconciledCondition, Status: metav1.ConditionTrue, Reason: "Done"})
	if err := topologyWriter.Patch(ctx, topologyCopy); err != nil {
		t.Fatal(err)
	}
	clusterCopy.Status.Phase = "Provisioned"
	clusterCopy.Status.ControlPlane.Replicas = ptr.To(int32(1))
	meta.SetStatusCondition(&clusterCopy.Status.Conditions, metav1.Condition{Type: clusterv1.AvailableCondition, Status: metav1.ConditionFalse, Reason: "Waiting"})
	if err := clusterWriter.Patch(ctx, clusterCopy); err != nil {
		t.Fatalf("the second writer, from a copy older than the first's write: %v", err)
	}

	got := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if meta.FindStatusCondition(got.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition) == nil || meta.FindStatusCondition(got.Status.Conditions, clusterv1.AvailableCondition) == nil {
		t.Errorf("conditions %+v, want both writers'", got.Status.Conditions)
	}
	if got.Status.Phase != "Provisioned" || got.Status.ControlPlane == nil || ptr.Deref(got.Status.ControlPlane.Replicas, 0) != 1 {
		t.Errorf("the cluster writer's fields did not land: %+v", got.Status)
	}
	if got.Status.ControlPlane != nil && got.Status.ControlPlane.UpgradePlan != nil {
		t.Errorf("the stale copy set the cleared upgrade plan back: %+v", got.Status.ControlPlane.UpgradePlan)
	}
}
