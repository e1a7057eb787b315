package machine_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/test/fixture"
)

// TestNodeWritesAreMergePatches: the Machine controller writes a workload
// cluster's Nodes with merge patches only, never server-side apply, which
// API servers that are not kube-apiserver may not serve (upstream's
// in-memory provider's simulated API servers answer it 415). Synced labels
// still come and go with the Machine's, and labels others set stay.
func TestNodeWritesAreMergePatches(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	cluster := workloadCluster(t, ns)
	const (
		pool  = "node.cluster.x-k8s.io/pool"
		role  = "node-role.kubernetes.io/worker"
		admin = "node.cluster.x-k8s.io/set-by-admin"
	)

	providerID := "test://" + ns + "/m1"
	node := readyNode("merge-"+ns, providerID)
	node.Labels = map[string]string{"team": "blue", admin: "kept"}
	fixture.Create(t, workloadEnv.Client, node)
	t.Cleanup(func() { _ = workloadEnv.Client.Delete(context.Background(), node) })
	setNodeReady(t, node)
	m := runningMachine(t, cluster, "m1", providerID, node.Name, map[string]string{role: "", pool: "a"}, nil)

	nodeHas := func(what string, want map[string]string, gone ...string) {
		t.Helper()
		fixture.Eventually(t, what, 30*time.Second, func(ctx context.Context) string {
			if err := workloadEnv.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
				return err.Error()
			}
			for k, v := range want {
				if have, ok := node.Labels[k]; !ok || have != v {
					return fmt.Sprintf("label %s: want %q, labels %v", k, v, node.Labels)
				}
			}
			for _, k := range gone {
				if _, ok := node.Labels[k]; ok {
					return fmt.Sprintf("label %s still there: %v", k, node.Labels)
				}
			}
			if node.Annotations["cluster.x-k8s.io/machine"] != "m1" {
				return fmt.Sprintf("annotations %v", node.Annotations)
			}
			return ""
		})
	}
	nodeHas("the Machine's labels on the Node", map[string]string{role: "", pool: "a", "team": "blue", admin: "kept"})

	// The Machine drops one synced label and changes another.
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	before := m.DeepCopy()
	delete(m.Labels, pool)
	m.Labels[role] = "yes"
	if err := mgmt.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	nodeHas("the Machine's new labels on the Node", map[string]string{role: "yes", "team": "blue", admin: "kept"}, pool)
	if got := node.Annotations["cluster.x-k8s.io/labels-from-machine"]; got != role {
		t.Errorf("managed-labels annotation %q, want %q", got, role)
	}

	for _, f := range node.ManagedFields {
		if f.Operation == metav1.ManagedFieldsOperationApply {
			t.Errorf("the Node was written by server-side apply (manager %q, subresource %q)", f.Manager, f.Subresource)
		}
	}
}

// TestNodeTaintsFollowTheMachine: the Machine's Always taints are kept on
// its Node (put back when removed, values corrected, removed when the
// Machine drops them), its OnInitialization taints are added once, and
// taints others set are never touched.
func TestNodeTaintsFollowTheMachine(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	cluster := workloadCluster(t, ns)
	providerID := "test://" + ns + "/tainted"
	node := readyNode("taints-"+ns, providerID) // carries an admin's taint
	fixture.Create(t, workloadEnv.Client, node)
	t.Cleanup(func() { _ = workloadEnv.Client.Delete(context.Background(), node) })
	setNodeReady(t, node)

	taint := func(key, value string, effect corev1.TaintEffect, p clusterv1.MachineTaintPropagation) clusterv1.MachineTaint {
		return clusterv1.MachineTaint{Key: key, Value: value, Effect: effect, Propagation: p}
	}
	always, once := clusterv1.MachineTaintPropagationAlways, clusterv1.MachineTaintPropagationOnInitialization
	m := runningMachine(t, cluster, "tainted", providerID, node.Name, nil, []clusterv1.MachineTaint{
		taint("example.com/a", "1", corev1.TaintEffectNoSchedule, always),
		taint("example.com/b", "", corev1.TaintEffectNoExecute, once),
	})

	// nodeTaints renders the Node's taints as sorted "key=value:effect",
	// with the tracking annotation after a "|".
	nodeTaints := func(ctx context.Context) string {
		got := &corev1.Node{}
		if err := workloadEnv.Client.Get(ctx, client.ObjectKeyFromObject(node), got); err != nil {
			return err.Error()
		}
		var out []string
		for _, t := range got.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				out = append(out, t.Key+"="+t.Value+":"+string(t.Effect))
			}
		}
		sort.Strings(out)
		return strings.Join(out, ",") + "|" + got.Annotations["cluster.x-k8s.io/taints-from-machine"]
	}
	nodeHas := func(what, want string) {
		t.Helper()
		fixture.Eventually(t, what, 30*time.Second, func(ctx context.Context) string {
			got := nodeTaints(ctx)
			return fixture.Unless(got == want, "node taints "+got+", want "+want)
		})
	}
	const adminTaint = "admin.example.com/keep=:NoSchedule"
	nodeHas("both taints on the new Node", adminTaint+",example.com/a=1:NoSchedule,example.com/b=:NoExecute|example.com/a:NoSchedule")

	// Someone removes both from the Node: only the Always one comes back.
	patchNode := func(taints string) {
		t.Helper()
		if err := workloadEnv.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"taints":`+taints+`}}`))); err != nil {
			t.Fatal(err)
		}
	}
	patchNode(`[{"key":"admin.example.com/keep","effect":"NoSchedule"}]`)
	nodeHas("the Always taint back", adminTaint+",example.com/a=1:NoSchedule|example.com/a:NoSchedule")
	fixture.Consistently(t, "the OnInitialization taint stays away", 2*time.Second, func(ctx context.Context) string {
		got := nodeTaints(ctx)
		return fixture.Unless(!strings.Contains(got, "example.com/b"), "node taints "+got)
	})

	setTaints := func(taints ...clusterv1.MachineTaint) {
		t.Helper()
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		before := m.DeepCopy()
		m.Spec.Taints = taints
		if err := mgmt.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	// A value changes, an OnInitialization taint goes from the Machine (and
	// was already gone from the Node), a new Always taint comes.
	setTaints(taint("example.com/a", "2", corev1.TaintEffectNoSchedule, always), taint("example.com/c", "", corev1.TaintEffectPreferNoSchedule, always))
	nodeHas("a's new value and c", adminTaint+",example.com/a=2:NoSchedule,example.com/c=:PreferNoSchedule|example.com/a:NoSchedule,example.com/c:PreferNoSchedule")

	// a becomes OnInitialization: it stays, untracked; c is dropped: it goes.
	setTaints(taint("example.com/a", "2", corev1.TaintEffectNoSchedule, once))
	nodeHas("c removed, a kept untracked", adminTaint+",example.com/a=2:NoSchedule|")
}
