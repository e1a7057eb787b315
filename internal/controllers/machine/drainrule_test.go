package machine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/node/kubelet"
	"capstan.dev/capstan/test/fixture"
)

// holdTermination is a finalizer the test puts on a pod to keep it
// terminating after the kubelet has stopped it, as an application still
// finishing its requests would, until the test removes it.
const holdTermination = "test.capstan.dev/hold-termination"

// podOnNode is a pod bound to node, which the kubelet simulates: running at
// once, gone as soon as it is deleted unless a finalizer holds it.
func podOnNode(ns, name, node string, labels map[string]string, policy corev1.RestartPolicy, finalizers ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Finalizers: finalizers},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 policy,
			TerminationGracePeriodSeconds: ptr.To[int64](120),
			Containers:                    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// releasePod removes the test's finalizer from a pod.
func releasePod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	err := workloadEnv.Client.Patch(context.Background(), pod, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)))
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// TestDrainFollowsMachineDrainRules deletes a Machine whose Node is run by
// the local provider's kubelet, and checks that the drain does what the MachineDrainRules of the Machine's
// namespace say: pods a rule skips stay, pods a WaitCompleted rule selects
// are waited for and never evicted, pods of a higher order go only after
// the lower ones are gone, and a rule for other Machines changes nothing.
// The Machine's Deleting condition says which pods wait, and why.
func TestDrainFollowsMachineDrainRules(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	cluster := workloadCluster(t, ns)
	if err := mgmt.Client.Patch(ctx, cluster, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"stage":"production"}}}`))); err != nil {
		t.Fatal(err)
	}

	nodeName := "drain-" + ns
	providerID := "local://" + ns + "/m1"
	fixture.StartKubelet(t, workloadEnv, kubelet.Options{NodeName: nodeName, ProviderID: providerID})
	runningMachine(t, cluster, "m1", providerID, nodeName, map[string]string{"pool": "gpu"}, nil)

	// The workload's pods, in a namespace of their own.
	workloadNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "apps"}}}
	fixture.Create(t, workloadEnv.Client, workloadNS)
	// Pod admission needs the namespace's default service account, which the
	// plane's controller makes soon; the test does not wait for it.
	if err := workloadEnv.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// web holds its termination until the test lets it go; batch runs
	// until the test completes it.
	web := podOnNode(ns, "web", nodeName, nil, corev1.RestartPolicyAlways, holdTermination)
	batch := podOnNode(ns, "batch", nodeName, map[string]string{"app": "batch"}, corev1.RestartPolicyNever)
	db := podOnNode(ns, "db", nodeName, map[string]string{"tier": "storage"}, corev1.RestartPolicyAlways)
	agent := podOnNode(ns, "agent", nodeName, map[string]string{"app": "agent"}, corev1.RestartPolicyAlways)
	keep := podOnNode(ns, "keep", nodeName, map[string]string{clusterv1.PodDrainLabel: "skip"}, corev1.RestartPolicyAlways)
	fixture.Create(t, workloadEnv.Client, web, batch, db, agent, keep)
	t.Cleanup(func() { releasePod(t, web) })
	for _, pod := range []*corev1.Pod{web, batch, db, agent, keep} {
		fixture.Eventually(t, "pod "+pod.Name+" running", 30*time.Second, func(ctx context.Context) string {
			got := &corev1.Pod{}
			if err := workloadEnv.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
				return err.Error()
			}
			return fixture.Unless(got.Status.Phase == corev1.PodRunning, "phase "+string(got.Status.Phase))
		})
	}
	rule := func(name string, behavior clusterv1.MachineDrainRuleDrainBehavior, order *int32, machines []clusterv1.MachineDrainRuleMachineSelector, pods ...clusterv1.MachineDrainRulePodSelector) *clusterv1.MachineDrainRule {
		return &clusterv1.MachineDrainRule{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.MachineDrainRuleSpec{
				Drain:    clusterv1.MachineDrainRuleDrainConfig{Behavior: behavior, Order: order},
				Machines: machines,
				Pods:     pods,
			},
		}
	}
	matching := func(kv ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{kv[0]: kv[1]}}
	}
	fixture.Create(t, mgmt.Client,
		// First by name, so it would decide for every pod if it applied;
		// it does not: the Cluster is not a staging one.
		rule("0-staging-skips-everything", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil,
			[]clusterv1.MachineDrainRuleMachineSelector{{ClusterSelector: matching("stage", "staging")}}),
		rule("agents-stay", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil,
			[]clusterv1.MachineDrainRuleMachineSelector{{Selector: matching("pool", "gpu"), ClusterSelector: matching("stage", "production")}},
			clusterv1.MachineDrainRulePodSelector{Selector: matching("app", "agent"), NamespaceSelector: matching("team", "apps")}),
		rule("batch-waits", clusterv1.MachineDrainRuleDrainBehaviorWaitCompleted, nil, nil,
			clusterv1.MachineDrainRulePodSelector{Selector: matching("app", "batch")}),
		rule("storage-last", clusterv1.MachineDrainRuleDrainBehaviorDrain, ptr.To[int32](10), nil,
			clusterv1.MachineDrainRulePodSelector{Selector: matching("tier", "storage")}),
	)

	key := client.ObjectKey{Namespace: ns, Name: "m1"}
	if err := mgmt.Client.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1"}}); err != nil {
		t.Fatal(err)
	}

	// podState is "gone", "deleting" or "there".
	podState := func(ctx context.Context, pod *corev1.Pod) string {
		got := &corev1.Pod{}
		err := workloadEnv.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)
		switch {
		case apierrors.IsNotFound(err):
			return "gone"
		case err != nil:
			return err.Error()
		case got.DeletionTimestamp != nil:
			return "deleting"
		default:
			return "there"
		}
	}
	deletingMessage := func(m *clusterv1.Machine) string {
		if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.DeletingCondition); c != nil {
			return c.Message
		}
		return ""
	}
	stillThere := func(ctx context.Context, pods ...*corev1.Pod) string {
		for _, pod := range pods {
			if s := podState(ctx, pod); s != "there" {
				return fmt.Sprintf("pod %s is %s; it must never be evicted", pod.Name, s)
			}
		}
		return ""
	}

	// The first group (order 0) is evicted; web holds its termination.
	machineCheck(t, key, func(m *clusterv1.Machine) string {
		msg := deletingMessage(m)
		for _, want := range []string{
			"* Pods terminating: " + ns + "/web",
			"* Pods waiting to complete (MachineDrainRule batch-waits): " + ns + "/batch",
			"* Pods waiting for a lower drain order (order 10, MachineDrainRule storage-last): " + ns + "/db",
		} {
			if !strings.Contains(msg, want) {
				return fmt.Sprintf("Deleting message %q does not say %q", msg, want)
			}
		}
		return ""
	})
	fixture.Consistently(t, "the higher order waits while web terminates", 2*time.Second, func(ctx context.Context) string {
		if s := podState(ctx, web); s != "deleting" {
			return "web is " + s
		}
		return stillThere(ctx, db, batch, agent, keep)
	})

	// web goes. db's group still waits: batch, which a WaitCompleted rule
	// puts in group 0, has not completed.
	releasePod(t, web)
	fixture.Eventually(t, "web gone", 30*time.Second, func(ctx context.Context) string {
		return fixture.Unless(podState(ctx, web) == "gone", "web is "+podState(ctx, web))
	})
	machineCheck(t, key, func(m *clusterv1.Machine) string {
		msg := deletingMessage(m)
		if strings.Contains(msg, "terminating") {
			return fmt.Sprintf("Deleting message %q still has web terminating", msg)
		}
		return ""
	})
	fixture.Consistently(t, "db waits for batch to complete", 2*time.Second, func(ctx context.Context) string {
		return stillThere(ctx, db, batch, agent, keep)
	})

	// batch completes (its container exits 0, as its kubelet would report
	// it); db's group is evicted, then nothing holds the drain any more and
	// the Machine goes.
	completed := []byte(`{"status":{"phase":"Succeeded","containerStatuses":[{"name":"main","image":"registry.k8s.io/pause:3.10","imageID":"","ready":false,` +
		`"restartCount":0,"state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]}}`)
	if err := workloadEnv.Client.Status().Patch(ctx, batch, client.RawPatch(types.StrategicMergePatchType, completed)); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "db evicted", 30*time.Second, func(ctx context.Context) string {
		return fixture.Unless(podState(ctx, db) == "gone", "db is "+podState(ctx, db))
	})
	fixture.Eventually(t, "machine gone", 60*time.Second, func(ctx context.Context) string {
		m := &clusterv1.Machine{}
		err := mgmt.Client.Get(ctx, key, m)
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("still there (%v): %s", err, deletingMessage(m))
	})
	got := &corev1.Pod{}
	if err := workloadEnv.Client.Get(ctx, client.ObjectKeyFromObject(batch), got); err != nil || got.Status.Phase != corev1.PodSucceeded || got.DeletionTimestamp != nil {
		t.Errorf("batch pod: want completed and never evicted, have %v %s deleting=%v", err, got.Status.Phase, got.DeletionTimestamp != nil)
	}
	if why := stillThere(ctx, agent, keep); why != "" {
		t.Error(why)
	}
}

// TestInvalidMachineDrainRuleHoldsTheDrain: a rule whose selector cannot be
// evaluated (the API cannot refuse it) stops the drain instead of being
// ignored, and the Machine's Deleting condition names the rule, the field
// and the fix; once the rule is fixed the drain goes on.
func TestInvalidMachineDrainRuleHoldsTheDrain(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	cluster := workloadCluster(t, ns)
	providerID := "test://" + ns + "/held"
	node := readyNode("held-"+ns, providerID)
	fixture.Create(t, workloadEnv.Client, node)
	t.Cleanup(func() { _ = workloadEnv.Client.Delete(context.Background(), node) })
	setNodeReady(t, node)
	waitForServiceAccount(t, "default")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "held-" + ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node.Name, TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	fixture.Create(t, workloadEnv.Client, pod)
	m := runningMachine(t, cluster, "held", providerID, node.Name, nil, nil)

	broken := &clusterv1.MachineDrainRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"},
		Spec: clusterv1.MachineDrainRuleSpec{
			Drain: clusterv1.MachineDrainRuleDrainConfig{Behavior: clusterv1.MachineDrainRuleDrainBehaviorSkip},
			Pods: []clusterv1.MachineDrainRulePodSelector{{Selector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals", Values: []string{"web"}}},
			}}},
		},
	}
	fixture.Create(t, mgmt.Client, broken)
	if err := mgmt.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	machineCheck(t, client.ObjectKeyFromObject(m), func(m *clusterv1.Machine) string {
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.DeletingCondition)
		want := "MachineDrainRule broken: spec.pods[0].selector is not a valid label selector"
		if c == nil || !strings.Contains(c.Message, want) || !strings.Contains(c.Message, "fix or remove it") {
			return fmt.Sprintf("Deleting %+v; want a message with %q", c, want)
		}
		return ""
	})
	if err := workloadEnv.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); err != nil {
		t.Fatalf("the pod was evicted although a rule that may select it could not be read: %v", err)
	}

	// The user fixes the rule: In instead of Equals. It skips the pod, and
	// the Machine goes.
	patch := []byte(`{"spec":{"pods":[{"selector":{"matchExpressions":[{"key":"app","operator":"In","values":["web"]}]}}]}}`)
	if err := mgmt.Client.Patch(ctx, broken, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "machine gone", 30*time.Second, func(ctx context.Context) string {
		err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{})
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprint("still there: ", err))
	})
	got := &corev1.Pod{}
	if err := workloadEnv.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil || got.DeletionTimestamp != nil {
		t.Errorf("the pod the fixed rule skips was evicted: %v", err)
	}
}
