package cluster_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

const holdFinalizer = "test.capstan.dev/hold"

func exists(t *testing.T, obj client.Object) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// release drops the test's finalizer; a merge patch, since controllers
// write the object too.
func release(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
}

// Deleting a Cluster takes workers first, then the control plane, then the
// infrastructure, and only then lets the Cluster go.
func TestClusterDeletionOrder(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	infra := provider.InfraCluster.New(ns, "d", nil)
	infra.SetFinalizers([]string{holdFinalizer})
	cp := provider.ControlPlane.New(ns, "d", nil)
	cp.SetFinalizers([]string{holdFinalizer})
	cluster := fixture.NewCluster(ns, "d", fixture.Infrastructure(infra), fixture.ControlPlane(cp))
	worker := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d-worker", Labels: map[string]string{clusterv1.ClusterNameLabel: "d"}, Finalizers: []string{holdFinalizer}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "d",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("x")},
			InfrastructureRef: provider.InfraMachine.Ref("d-worker"),
		},
	}
	fixture.Create(t, env.Client, infra, cp, cluster, worker)
	key := client.ObjectKeyFromObject(cluster)
	clusterCheck(t, key, func(c *clusterv1.Cluster) string {
		if len(c.Finalizers) == 0 {
			return "no finalizer yet"
		}
		return ""
	})

	if err := env.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "worker Machine deleted first", 30*time.Second, func(context.Context) string {
		return fixture.Unless(exists(t, worker) && !worker.DeletionTimestamp.IsZero(), "")
	})
	c := clusterCheck(t, key, func(c *clusterv1.Cluster) string {
		cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1.DeletingCondition)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Message != "waiting for 1 worker Machine (d-worker) to be deleted" {
			return "Deleting condition does not say it waits for the worker"
		}
		return ""
	})
	if c.Status.Phase != string(clusterv1.ClusterPhaseDeleting) {
		t.Errorf("phase %s", c.Status.Phase)
	}
	// The control plane must outlive the workers.
	time.Sleep(time.Second)
	if !exists(t, cp) || !cp.GetDeletionTimestamp().IsZero() {
		t.Fatal("control plane deleted while a worker Machine remained")
	}

	release(t, worker)
	fixture.Eventually(t, "control plane deleted once workers are gone", 30*time.Second, func(context.Context) string {
		return fixture.Unless(exists(t, cp) && !cp.GetDeletionTimestamp().IsZero(), "")
	})
	if !exists(t, infra) || !infra.GetDeletionTimestamp().IsZero() {
		t.Fatal("infrastructure deleted while the control plane remained")
	}
	release(t, cp)
	fixture.Eventually(t, "infrastructure deleted once the control plane is gone", 30*time.Second, func(context.Context) string {
		return fixture.Unless(exists(t, infra) && !infra.GetDeletionTimestamp().IsZero(), "")
	})
	if !exists(t, cluster) {
		t.Fatal("Cluster gone while its infrastructure remained")
	}
	release(t, infra)
	fixture.Eventually(t, "Cluster gone once nothing remains", 30*time.Second, func(context.Context) string { return fixture.Unless(!exists(t, cluster), "") })
}

// A reference to a kind no CRD defines names nothing that can exist: it
// must not hold the deletion of the Cluster, nor of a Machine whose
// bootstrap and infrastructure references name such kinds.
func TestDeletionIsNotHeldByKindsWithoutCRD(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	missing := func(kind, name string) clusterv1.ContractVersionedObjectReference {
		return clusterv1.ContractVersionedObjectReference{APIGroup: "nowhere.capstan.dev", Kind: kind, Name: name}
	}
	cluster := fixture.NewCluster(ns, "ghost")
	cluster.Spec.InfrastructureRef = missing("GhostCluster", "ghost")
	cluster.Spec.ControlPlaneRef = missing("GhostControlPlane", "ghost")
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost-m", Labels: map[string]string{clusterv1.ClusterNameLabel: "ghost"}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "ghost",
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: missing("GhostConfig", "ghost-m")},
			InfrastructureRef: missing("GhostMachine", "ghost-m"),
		},
	}
	fixture.Create(t, env.Client, cluster, machine)
	key := client.ObjectKeyFromObject(cluster)
	clusterCheck(t, key, func(c *clusterv1.Cluster) string {
		return fixture.Unless(len(c.Finalizers) > 0, "no finalizer yet")
	})
	fixture.Eventually(t, "Machine finalizer", 30*time.Second, func(context.Context) string {
		if !exists(t, machine) {
			return "Machine gone"
		}
		return fixture.Unless(len(machine.Finalizers) > 0, "no finalizer yet")
	})

	if err := env.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "Machine and Cluster gone", 30*time.Second, func(context.Context) string {
		if exists(t, machine) {
			return "Machine still there: " + conditionMessage(machine.Status.Conditions, clusterv1.DeletingCondition)
		}
		c := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, key, c); err == nil {
			return "Cluster still there: " + conditionMessage(c.Status.Conditions, clusterv1.DeletingCondition)
		}
		return ""
	})
}

func conditionMessage(conds []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(conds, t); c != nil {
		return c.Reason + ": " + c.Message
	}
	return "no " + t + " condition"
}
