package drain_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/drain"
	"capstan.dev/capstan/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// holdFinalizer keeps an evicted pod in place, as a kubelet still running its
// shutdown would.
const holdFinalizer = "test.capstan.dev/hold"

// newNode creates a node named after the test's namespace and removes it when
// the test ends.
func newNode(t testing.TB, ns string) string {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + ns}}
	if err := env.Client.Create(context.Background(), node); err != nil {
		t.Fatalf("creating node: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	return node.Name
}

// ensureServiceAccount creates the namespace's default service account, which
// pod admission requires, without waiting for the controller that makes it.
func ensureServiceAccount(ctx context.Context, ns string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	if err := env.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// createPod creates a pod already bound to node. With no kubelet, a grace
// period of 0 makes an evicted pod vanish at once unless it has a finalizer.
func createPod(ctx context.Context, ns, name, node string, mutate ...func(*corev1.Pod)) (*corev1.Pod, error) {
	if err := ensureServiceAccount(ctx, ns); err != nil {
		return nil, err
	}
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &zero,
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
		},
	}
	for _, m := range mutate {
		m(pod)
	}
	status := pod.Status
	if err := env.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("creating pod %s: %w", name, err)
	}
	if status.Phase != "" {
		pod.Status = status
		if err := env.Client.Status().Update(ctx, pod); err != nil {
			return nil, fmt.Errorf("setting status of pod %s: %w", name, err)
		}
	}
	return pod, nil
}

func mustPod(t testing.TB, ns, name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	pod, err := createPod(context.Background(), ns, name, node, mutate...)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func labelled(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
	}
}

func runningReady(p *corev1.Pod) {
	p.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}
}

func withFinalizer(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, holdFinalizer) }

// releasePods removes the hold finalizer from every pod of the namespace, so
// that the namespace can go when the test ends.
func releasePods(t testing.TB, ns string) {
	t.Helper()
	t.Cleanup(func() {
		pods := &corev1.PodList{}
		if err := env.Client.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
			t.Errorf("listing pods: %v", err)
			return
		}
		for i := range pods.Items {
			if len(pods.Items[i].Finalizers) > 0 {
				release(t, &pods.Items[i])
			}
		}
	})
}

func release(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if err := env.Client.Patch(context.Background(), pod, patch); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("releasing pod %s: %v", pod.Name, err)
	}
}

func mustDrain(t testing.TB, node string, opts drain.Options) drain.Result {
	t.Helper()
	res, err := drain.Drain(context.Background(), env.Client, node, opts)
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	t.Logf("Drain: %s", res.Message())
	return res
}

func names(refs []types.NamespacedName) string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Name
	}
	return strings.Join(out, ",")
}

func skippedNames(res drain.Result) string {
	out := make([]string, len(res.Skipped))
	for i, s := range res.Skipped {
		out[i] = s.Pod.Name + "(" + s.Reason + ")"
	}
	return strings.Join(out, ",")
}

func exists(t testing.TB, ns, name string) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("reading pod %s: %v", name, err)
	}
	return err == nil
}

func TestCordon(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	nodeName := newNode(t, ns)

	if err := drain.Cordon(ctx, env.Client, nodeName); err != nil {
		t.Fatalf("Cordon: %v", err)
	}
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		t.Fatal(err)
	}
	if !node.Spec.Unschedulable {
		t.Fatalf("node not cordoned: %+v", node.Spec)
	}

	// A cordoned node is not written again.
	rv := node.ResourceVersion
	if err := drain.Cordon(ctx, env.Client, nodeName); err != nil {
		t.Fatalf("second Cordon: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		t.Fatal(err)
	}
	if node.ResourceVersion != rv {
		t.Errorf("second Cordon wrote the node: resourceVersion %s -> %s", rv, node.ResourceVersion)
	}

	if err := drain.Cordon(ctx, env.Client, "no-such-node-"+ns); !apierrors.IsNotFound(err) {
		t.Errorf("Cordon of a missing node: %v, want NotFound", err)
	}
}

func TestDrainEvictsAndSkips(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	node := newNode(t, ns)

	// A real DaemonSet, so that its pod's owner exists (the garbage
	// collector would otherwise delete the pod).
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.invalid/agent:1"}}},
			},
		},
	}
	if err := env.Client.Create(ctx, ds); err != nil {
		t.Fatalf("creating DaemonSet: %v", err)
	}

	mustPod(t, ns, "web-a", node)
	mustPod(t, ns, "web-b", node, runningReady)
	mustPod(t, ns, "agent-x", node, labelled("app", "agent"), func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &yes}}
	})
	mustPod(t, ns, "etcd-node", node, func(p *corev1.Pod) {
		p.Annotations = map[string]string{drain.MirrorPodAnnotation: "d41d8cd98f00b204e9800998ecf8427e"}
	})
	mustPod(t, ns, "job-done", node, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	mustPod(t, ns, "keep-me", node, labelled(drain.PodDrainLabel, drain.PodDrainLabelSkip))
	mustPod(t, ns, "monitor", node, labelled("role", "monitoring"))
	// A pod on another node is none of this drain's business.
	mustPod(t, ns, "elsewhere", newNode(t, ns+"-other"))

	opts := drain.Options{Policy: drain.Policy{SkipSelector: labels.SelectorFromSet(labels.Set{"role": "monitoring"})}}
	if err := drain.Cordon(ctx, env.Client, node); err != nil {
		t.Fatal(err)
	}
	res := mustDrain(t, node, opts)
	if got, want := names(res.Evicted), "web-a,web-b"; got != want {
		t.Errorf("evicted %s, want %s", got, want)
	}
	wantSkipped := "agent-x(DaemonSet pod),etcd-node(mirror pod),job-done(completed (Succeeded)),keep-me(label cluster.x-k8s.io/drain=skip),monitor(matches the skip selector)"
	if got := skippedNames(res); got != wantSkipped {
		t.Errorf("skipped %s\nwant %s", got, wantSkipped)
	}
	if res.Done() || len(res.Blocked)+len(res.Terminating) != 0 {
		t.Errorf("first pass: %+v", res)
	}
	if want := "draining node " + node + ": 2 pods evicted"; res.Message() != want {
		t.Errorf("message %q, want %q", res.Message(), want)
	}
	for _, name := range []string{"web-a", "web-b"} {
		if exists(t, ns, name) {
			t.Errorf("pod %s still exists after its eviction", name)
		}
	}
	for _, name := range []string{"agent-x", "etcd-node", "job-done", "keep-me", "monitor", "elsewhere"} {
		if !exists(t, ns, name) {
			t.Errorf("pod %s is gone, but should have been left alone", name)
		}
	}

	res = mustDrain(t, node, opts)
	if !res.Done() || len(res.Evicted) != 0 {
		t.Errorf("second pass not done: %+v", res)
	}
	if want := "node " + node + " drained (5 pods skipped)"; res.Message() != want {
		t.Errorf("message %q, want %q", res.Message(), want)
	}
}

func TestDrainRespectsPodDisruptionBudget(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	node := newNode(t, ns)

	mustPod(t, ns, "web-1", node, labelled("app", "web"), runningReady)
	mustPod(t, ns, "other", node)
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &one,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	if err := env.Client.Create(ctx, pdb); err != nil {
		t.Fatalf("creating PodDisruptionBudget: %v", err)
	}

	// The plane runs no disruption controller: the budget is never
	// processed, which the API server would answer with 429 and
	// Retry-After. Drain reports it instead of letting the client sleep.
	res := mustDrain(t, node, drain.Options{})
	if got := names(res.Evicted); got != "other" {
		t.Errorf("evicted %q, want other", got)
	}
	if len(res.Blocked) != 1 || res.Blocked[0].Pod.Name != "web-1" || !res.Blocked[0].ByBudget || res.Blocked[0].Budget != "web-pdb" ||
		!strings.Contains(res.Blocked[0].Message, "not been processed") {
		t.Fatalf("blocked %+v, want web-1 blocked by unprocessed web-pdb", res.Blocked)
	}

	// Play the disruption controller: the budget allows no disruption.
	setBudgetStatus := func(allowed int32) {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			t.Fatal(err)
		}
		pdb.Status = policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: pdb.Generation,
			DisruptionsAllowed: allowed,
			CurrentHealthy:     1,
			DesiredHealthy:     1,
			ExpectedPods:       1,
		}
		if err := env.Client.Status().Update(ctx, pdb); err != nil {
			t.Fatalf("updating PodDisruptionBudget status: %v", err)
		}
	}
	setBudgetStatus(0)
	res = mustDrain(t, node, drain.Options{})
	if len(res.Evicted) != 0 || len(res.Blocked) != 1 {
		t.Fatalf("with a budget allowing nothing: %+v", res)
	}
	b := res.Blocked[0]
	if !b.ByBudget || b.Budget != "web-pdb" || !strings.Contains(b.Message, "needs 1 healthy pods") {
		t.Errorf("blocked %+v, want the API server's refusal naming web-pdb", b)
	}
	if want := "draining node " + node + ": 1 pod blocked by PodDisruptionBudget web-pdb"; res.Message() != want {
		t.Errorf("message %q, want %q", res.Message(), want)
	}
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-1"}, pod); err != nil || pod.DeletionTimestamp != nil {
		t.Fatalf("web-1 should be untouched: err=%v deletionTimestamp=%v", err, pod.DeletionTimestamp)
	}

	// Once the budget allows a disruption the pod goes.
	setBudgetStatus(1)
	res = mustDrain(t, node, drain.Options{})
	if got := names(res.Evicted); got != "web-1" || len(res.Blocked) != 0 {
		t.Errorf("with a budget allowing one: %+v", res)
	}
	res = mustDrain(t, node, drain.Options{})
	if !res.Done() {
		t.Errorf("not done: %s", res.Message())
	}
}

func TestDrainWaitsForTerminationAndCompletion(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	node := newNode(t, ns)
	releasePods(t, ns)

	slow := mustPod(t, ns, "slow", node, withFinalizer)
	job := mustPod(t, ns, "job", node, labelled(drain.PodDrainLabel, drain.PodDrainLabelWaitCompleted), runningReady)

	res := mustDrain(t, node, drain.Options{})
	if names(res.Evicted) != "slow" || names(res.WaitingCompletion) != "job" || res.Done() {
		t.Fatalf("first pass: %+v", res)
	}

	// The evicted pod is held by its finalizer: it is terminating, and is
	// not evicted again.
	for range 2 {
		res = mustDrain(t, node, drain.Options{})
		if len(res.Evicted) != 0 || names(res.Terminating) != "slow" || res.Done() {
			t.Fatalf("while terminating: %+v", res)
		}
	}
	if want := "draining node " + node + ": 1 pod terminating, 1 waiting to complete"; res.Message() != want {
		t.Errorf("message %q, want %q", res.Message(), want)
	}

	release(t, slow)
	res = mustDrain(t, node, drain.Options{})
	if len(res.Terminating) != 0 || names(res.WaitingCompletion) != "job" || res.Done() {
		t.Fatalf("after the finalizer went: %+v", res)
	}

	// The job is never evicted; it is done when it completes.
	job.Status.Phase = corev1.PodSucceeded
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	res = mustDrain(t, node, drain.Options{})
	if !res.Done() {
		t.Fatalf("not done: %s", res.Message())
	}
	if !exists(t, ns, "job") {
		t.Errorf("the wait-completed pod was deleted")
	}
}

func TestDrainOrderAndRules(t *testing.T) {
	ns := env.Namespace(t)
	node := newNode(t, ns)
	releasePods(t, ns)

	mustPod(t, ns, "front", node, labelled("tier", "front"), withFinalizer)
	mustPod(t, ns, "app", node)
	mustPod(t, ns, "storage", node, labelled("tier", "storage"))
	mustPod(t, ns, "ignored", node, labelled("tier", "ignored"))

	opts := drain.Options{Policy: drain.Policy{Rules: []drain.Rule{
		// Selects by the namespace's labels, which Drain must read.
		{Name: "skip-ignored", Behavior: drain.BehaviorSkip, Pods: labels.SelectorFromSet(labels.Set{"tier": "ignored"}),
			Namespaces: labels.SelectorFromSet(labels.Set{"kubernetes.io/metadata.name": ns})},
		{Name: "front-first", Behavior: drain.BehaviorDrain, Order: -1, Pods: labels.SelectorFromSet(labels.Set{"tier": "front"})},
		{Name: "storage-last", Behavior: drain.BehaviorDrain, Order: 10, Pods: labels.SelectorFromSet(labels.Set{"tier": "storage"})},
	}}}

	res := mustDrain(t, node, opts)
	if names(res.Evicted) != "front" || names(res.Deferred) != "app,storage" || skippedNames(res) != "ignored(MachineDrainRule skip-ignored)" {
		t.Fatalf("first batch: %+v", res)
	}
	// The first batch is still terminating: nothing else moves.
	res = mustDrain(t, node, opts)
	if len(res.Evicted) != 0 || names(res.Terminating) != "front" || names(res.Deferred) != "app,storage" {
		t.Fatalf("while the first batch terminates: %+v", res)
	}
	release(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "front"}})
	res = mustDrain(t, node, opts)
	if names(res.Evicted) != "app" || names(res.Deferred) != "storage" {
		t.Fatalf("second batch: %+v", res)
	}
	res = mustDrain(t, node, opts)
	if names(res.Evicted) != "storage" || len(res.Deferred) != 0 {
		t.Fatalf("third batch: %+v", res)
	}
	if res = mustDrain(t, node, opts); !res.Done() {
		t.Fatalf("not done: %s", res.Message())
	}
}

func TestDrainUnreachableNode(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	nodeName := newNode(t, ns)
	releasePods(t, ns)

	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown"}}
	if err := env.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	mustPod(t, ns, "stranded", node.Name, runningReady, withFinalizer, func(p *corev1.Pod) {
		thirty := int64(30)
		p.Spec.TerminationGracePeriodSeconds = &thirty
	})

	res := mustDrain(t, node.Name, drain.Options{})
	if names(res.Evicted) != "stranded" {
		t.Fatalf("evicted %+v", res)
	}
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stranded"}, pod); err != nil {
		t.Fatal(err)
	}
	if pod.DeletionGracePeriodSeconds == nil || *pod.DeletionGracePeriodSeconds != 1 {
		t.Errorf("eviction on an unreachable node: deletion grace %v, want 1 s", pod.DeletionGracePeriodSeconds)
	}
}

func TestDrainNodeNotFound(t *testing.T) {
	res, err := drain.Drain(context.Background(), env.Client, "no-such-node-"+env.Namespace(t), drain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NodeNotFound || !res.Done() {
		t.Errorf("result %+v, want a missing node reported as drained", res)
	}
}

// TestDrainWithCachedReader checks that a controller-runtime cache can serve
// Drain's reads once IndexPodsByNode is registered.
func TestDrainWithCachedReader(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	node := newNode(t, ns)
	mustPod(t, ns, "cached-a", node)
	mustPod(t, ns, "cached-b", node)

	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := drain.IndexPodsByNode(ctx, c); err != nil {
		t.Fatalf("IndexPodsByNode: %v", err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}

	// The first read of a kind starts its informer; wait until the cache
	// holds both pods.
	deadline := time.Now().Add(30 * time.Second)
	for {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.MatchingFields{drain.PodNodeNameField: node}); err != nil {
			t.Fatalf("cached list by node: %v", err)
		}
		if len(pods.Items) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cache holds %d pods", len(pods.Items))
		}
		time.Sleep(50 * time.Millisecond)
	}

	res := mustDrain(t, node, drain.Options{Reader: c})
	if got := names(res.Evicted); got != "cached-a,cached-b" {
		t.Errorf("evicted %q", got)
	}
}

func TestVolumesDetached(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	nodeName := newNode(t, ns)

	detached, msg, err := drain.VolumesDetached(ctx, env.Client, nodeName)
	if err != nil || !detached || msg != "" {
		t.Fatalf("bare node: %v %q %v", detached, msg, err)
	}

	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "kubernetes.io/csi/csi.example.com^vol-1", DevicePath: ""}}
	if err := env.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	pvName := "pv-" + ns
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "va-" + ns},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "csi.example.com",
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName},
			NodeName: nodeName,
		},
	}
	if err := env.Client.Create(ctx, va); err != nil {
		t.Fatalf("creating VolumeAttachment: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), va) })
	// A VolumeAttachment of another node does not count.
	otherVA := va.DeepCopy()
	otherVA.ObjectMeta = metav1.ObjectMeta{Name: "va-other-" + ns}
	otherVA.Spec.NodeName = "elsewhere-" + ns
	if err := env.Client.Create(ctx, otherVA); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), otherVA) })

	detached, msg, err = drain.VolumesDetached(ctx, env.Client, nodeName)
	want := "waiting for volumes to detach from node " + nodeName + ": node reports 1 volume attached (kubernetes.io/csi/csi.example.com^vol-1); VolumeAttachment " + va.Name + " still names the node"
	if err != nil || detached || msg != want {
		t.Fatalf("both attached: %v %v\n got %q\nwant %q", detached, err, msg, want)
	}

	node.Status.VolumesAttached = nil
	if err := env.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	detached, msg, err = drain.VolumesDetached(ctx, env.Client, nodeName)
	if err != nil || detached || !strings.Contains(msg, va.Name) || strings.Contains(msg, "node reports") {
		t.Fatalf("VolumeAttachment only: %v %q %v", detached, msg, err)
	}

	if err := env.Client.Delete(ctx, va); err != nil {
		t.Fatal(err)
	}
	detached, msg, err = drain.VolumesDetached(ctx, env.Client, nodeName)
	if err != nil || !detached || msg != "" {
		t.Fatalf("all detached: %v %q %v", detached, msg, err)
	}
}
