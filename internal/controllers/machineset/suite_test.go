package machineset_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/controllers/machineset"
	"capstan.dev/capstan/internal/testenv"
	fx "capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

var env *testenv.Env

// TestMain starts a management plane and a manager that runs the MachineSet
// controller alone: no Machine controller runs, so tests play its part
// (setting Machine conditions, releasing the Machine finalizer).
func TestMain(m *testing.M) {
	fx.MainWithManager(m, &env, func(ctx context.Context, mgr ctrl.Manager) error {
		if err := provider.Install(ctx, env.Client); err != nil {
			return err
		}
		r := &machineset.Reconciler{
			Client:   mgr.GetClient(),
			Resolver: &contract.Resolver{Reader: mgr.GetClient()},
			Recorder: mgr.GetEventRecorder("machineset-controller"),
		}
		return r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 4})
	})
}

func get(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
}

// update applies change to the latest copy of obj, retrying on conflicts.
func update[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return env.Client.Update(context.Background(), obj)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setConditions sets conditions on a Machine's status as the Machine
// controller or a MachineHealthCheck would, keeping the others.
func setConditions(t *testing.T, m *clusterv1.Machine, conds ...metav1.Condition) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		for _, c := range conds {
			if c.Reason == "" {
				c.Reason = string(c.Status)
			}
			meta.SetStatusCondition(&m.Status.Conditions, c)
		}
		return env.Client.Status().Update(context.Background(), m)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func cond(t string, status metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: t, Status: status}
}

// readyAndAvailable makes Machines look like the Machine controller brought
// them up.
func readyAndAvailable(t *testing.T, machines ...*clusterv1.Machine) {
	t.Helper()
	for _, m := range machines {
		setConditions(t, m, cond(clusterv1.ReadyCondition, metav1.ConditionTrue), cond(clusterv1.AvailableCondition, metav1.ConditionTrue))
	}
}

// machines lists the namespace's Machines, oldest first.
func machines(t *testing.T, ns string) []*clusterv1.Machine {
	t.Helper()
	list := &clusterv1.MachineList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := make([]*clusterv1.Machine, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreationTimestamp.Equal(&out[j].CreationTimestamp) {
			return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func names(ms []*clusterv1.Machine) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func live(ms []*clusterv1.Machine) []*clusterv1.Machine {
	var out []*clusterv1.Machine
	for _, m := range ms {
		if m.DeletionTimestamp.IsZero() {
			out = append(out, m)
		}
	}
	return out
}

func deleting(ms []*clusterv1.Machine) []*clusterv1.Machine {
	var out []*clusterv1.Machine
	for _, m := range ms {
		if !m.DeletionTimestamp.IsZero() {
			out = append(out, m)
		}
	}
	return out
}

// waitMachines waits until the namespace has n Machines not being deleted
// (and no deleting ones) and returns them, oldest first.
func waitMachines(t *testing.T, ns string, n int) []*clusterv1.Machine {
	t.Helper()
	var got []*clusterv1.Machine
	fx.Eventually(t, fmt.Sprintf("%d Machines", n), 30*time.Second, func(context.Context) string {
		got = machines(t, ns)
		if len(live(got)) != n || len(deleting(got)) != 0 {
			return fmt.Sprintf("%d live and %d deleting Machines: %v", len(live(got)), len(deleting(got)), names(got))
		}
		return ""
	})
	return got
}

// release plays the Machine controller's part in deletion: deleting
// Machines lose their finalizer and go.
func release(t *testing.T, ms ...*clusterv1.Machine) {
	t.Helper()
	for _, m := range ms {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(m), m); err != nil {
				return err
			}
			m.Finalizers = nil
			return env.Client.Update(context.Background(), m)
		})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

func msCondition(ms *clusterv1.MachineSet, t string) *metav1.Condition {
	return meta.FindStatusCondition(ms.Status.Conditions, t)
}

// waitSet polls the MachineSet until check passes.
func waitSet(t *testing.T, ms *clusterv1.MachineSet, what string, check func(*clusterv1.MachineSet) string) {
	t.Helper()
	fx.Eventually(t, what, 30*time.Second, func(context.Context) string {
		got := &clusterv1.MachineSet{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ms), got); err != nil {
			return err.Error()
		}
		if why := check(got); why != "" {
			return fmt.Sprintf("%s (status %+v)", why, got.Status)
		}
		return ""
	})
}

func conditionIs(t string, status metav1.ConditionStatus, reason string) func(*clusterv1.MachineSet) string {
	return func(ms *clusterv1.MachineSet) string {
		c := msCondition(ms, t)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Sprintf("%s is %+v, want %s %s", t, c, status, reason)
		}
		return ""
	}
}

type fixture struct {
	ns        string
	cluster   *clusterv1.Cluster
	infra     *unstructured.Unstructured
	bootstrap *unstructured.Unstructured
}

// newFixture makes a namespace with a Cluster "c" and the infrastructure
// and bootstrap templates MachineSets clone.
func newFixture(t *testing.T, paused bool) *fixture {
	t.Helper()
	ns := env.Namespace(t)
	f := &fixture{
		ns: ns,
		cluster: &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
			Spec:       clusterv1.ClusterSpec{InfrastructureRef: provider.InfraCluster.Ref("c")},
		},
		infra: provider.InfraMachineTemplate.New(ns, "infra", map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"from-infra-template": "yes"}, "annotations": map[string]any{"infra-note": "n"}},
			"spec":     map[string]any{"size": "large", "disks": []any{"a", "b"}},
		}}),
		bootstrap: provider.BootstrapConfigTemplate.New(ns, "boot", map[string]any{"template": map[string]any{
			"spec": map[string]any{"format": "cloud-config"},
		}}),
	}
	if paused {
		f.cluster.Spec.Paused = ptr.To(true)
	}
	fx.Create(t, env.Client, f.cluster, f.infra, f.bootstrap)
	return f
}

// machineSet returns (without creating it) a MachineSet of the fixture's
// cluster with an empty selector.
func (f *fixture) machineSet(name string, replicas int32) *clusterv1.MachineSet {
	return &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: clusterv1.MachineSetSpec{
			ClusterName: "c",
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": "a"}, Annotations: map[string]string{"note": "x"}},
				Spec: clusterv1.MachineSpec{
					ClusterName:       "c",
					Version:           "v1.33.0",
					InfrastructureRef: provider.InfraMachineTemplate.Ref("infra"),
					Bootstrap:         clusterv1.Bootstrap{ConfigRef: provider.BootstrapConfigTemplate.Ref("boot")},
				},
			},
		},
	}
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func describe(ms []*clusterv1.Machine) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s(deleting=%v)", m.Name, !m.DeletionTimestamp.IsZero()))
	}
	return strings.Join(parts, ", ")
}
