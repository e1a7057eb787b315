package machinedeployment_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/controllers/machinedeployment"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/scheme"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"
)

var (
	env    *testenv.Env
	writes = &writeCounter{byNamespace: map[string]int{}}
)

// writeCounter counts the controller's writes to the API server, by
// namespace, so tests can tell that a settled MachineDeployment costs none.
type writeCounter struct {
	mu          sync.Mutex
	byNamespace map[string]int
}

func (w *writeCounter) add(obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.byNamespace[obj.GetNamespace()]++
}

func (w *writeCounter) in(ns string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byNamespace[ns]
}

type countingClient struct {
	client.Client
}

func (c countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	writes.add(obj)
	return c.Client.Create(ctx, obj, opts...)
}

func (c countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	writes.add(obj)
	return c.Client.Update(ctx, obj, opts...)
}

func (c countingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	writes.add(obj)
	return c.Client.Patch(ctx, obj, p, opts...)
}

func (c countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	writes.add(obj)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c countingClient) Status() client.SubResourceWriter {
	return countingStatus{c.Client.Status()}
}

type countingStatus struct {
	client.SubResourceWriter
}

func (c countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	writes.add(obj)
	return c.SubResourceWriter.Update(ctx, obj, opts...)
}

func (c countingStatus) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	writes.add(obj)
	return c.SubResourceWriter.Patch(ctx, obj, p, opts...)
}

// TestMain starts a management plane and a manager that runs only the
// MachineDeployment controller. No MachineSet controller runs: the tests
// play its part by writing MachineSet status.
func TestMain(m *testing.M) {
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env = e
	if os.Getenv("CAPSTAN_TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
		// Events refused by namespaces the tests are deleting are noise.
		klog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	code := func() int {
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
			Scheme:                 scheme.New(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r := &machinedeployment.Reconciler{Client: countingClient{mgr.GetClient()}, Recorder: mgr.GetEventRecorder("machinedeployment-controller")}
		if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 4}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := releaseSetFinalizers(mgr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() {
			if err := mgr.Start(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "manager:", err)
			}
		}()
		return m.Run()
	}()
	cancel()
	env.Stop()
	os.Exit(code)
}

// releaseSetFinalizers plays the one part of the MachineSet controller that
// deletion needs: new sets are born with its finalizer, which it drops once
// a deleted set's Machines are gone (these tests create no Machines).
func releaseSetFinalizers(mgr ctrl.Manager) error {
	c := mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).Named("machineset-finalizer").For(&clusterv1.MachineSet{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			ms := &clusterv1.MachineSet{}
			if err := c.Get(ctx, req.NamespacedName, ms); err != nil || ms.DeletionTimestamp.IsZero() {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			before := ms.DeepCopy()
			if controllerutil.RemoveFinalizer(ms, clusterv1.MachineSetFinalizer) {
				return reconcile.Result{}, client.IgnoreNotFound(c.Patch(ctx, ms, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
			}
			return reconcile.Result{}, nil
		}))
}

const (
	v1 = "v1.34.0"
	v2 = "v1.35.0"
	v3 = "v1.36.0"
)

// withEmptySelector turns md into an object whose spec.selector is {}, as a
// manifest written for Cluster API's defaulting webhook has it: the typed
// client would leave the empty selector out, which the API refuses.
func withEmptySelector(t *testing.T, md *clusterv1.MachineDeployment) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetGroupVersionKind(clusterv1.GroupVersion.WithKind(clusterv1.MachineDeploymentKind))
	if err := unstructured.SetNestedMap(u.Object, map[string]any{}, "spec", "selector"); err != nil {
		t.Fatal(err)
	}
	return u
}

func newMD(ns, name, cluster string, replicas int32) *clusterv1.MachineDeployment {
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	md.Spec.ClusterName = cluster
	md.Spec.Replicas = ptr.To(replicas)
	md.Spec.Template.Labels = map[string]string{"pool": name}
	md.Spec.Selector.MatchLabels = map[string]string{"pool": name}
	md.Spec.Template.Spec = clusterv1.MachineSpec{
		ClusterName: cluster,
		Version:     v1,
		Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap-data")},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "infrastructure.test.capstan.dev", Kind: "TestMachineTemplate", Name: name + "-infra",
		},
	}
	return md
}

func rolling(md *clusterv1.MachineDeployment, surge, unavailable intstr.IntOrString) {
	md.Spec.Rollout.Strategy = clusterv1.MachineDeploymentRolloutStrategy{
		Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
			MaxSurge: &surge, MaxUnavailable: &unavailable,
		},
	}
}

// mergePatch applies a JSON merge patch to obj's main resource.
func mergePatch(t *testing.T, obj client.Object, body map[string]any) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, raw)); err != nil {
		t.Fatalf("patching %s: %v", obj.GetName(), err)
	}
}

func getMD(t *testing.T, key client.ObjectKey) *clusterv1.MachineDeployment {
	t.Helper()
	md := &clusterv1.MachineDeployment{}
	if err := env.Client.Get(context.Background(), key, md); err != nil {
		t.Fatal(err)
	}
	return md
}

func revision(ms clusterv1.MachineSet) int {
	n, _ := strconv.Atoi(ms.Annotations[clusterv1.RevisionAnnotation])
	return n
}

// ownedSets reads, straight from the API server, the MachineSets md
// controls, oldest revision first.
func ownedSets(t *testing.T, md *clusterv1.MachineDeployment) []clusterv1.MachineSet {
	t.Helper()
	list := &clusterv1.MachineSetList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(md.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []clusterv1.MachineSet
	for _, ms := range list.Items {
		if ref := metav1.GetControllerOf(&ms); ref != nil && ref.UID == md.UID {
			out = append(out, ms)
		}
	}
	// Creation times have whole seconds; the revisions tell the order.
	slices.SortFunc(out, func(a, b clusterv1.MachineSet) int {
		return cmp.Or(cmp.Compare(revision(a), revision(b)), a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func condition(md *clusterv1.MachineDeployment, condType string) *metav1.Condition {
	return meta.FindStatusCondition(md.Status.Conditions, condType)
}

// settled waits until the controller has reacted to the latest change: it
// has observed the current generation and its status adds up the
// MachineSets' status as they are now. The status is written at the end of
// the reconcile that acted, so its writes to the sets are done by then.
func settled(t *testing.T, key client.ObjectKey) (*clusterv1.MachineDeployment, []clusterv1.MachineSet) {
	t.Helper()
	var md *clusterv1.MachineDeployment
	var sets []clusterv1.MachineSet
	fixture.Eventually(t, "waiting for the controller to settle", 30*time.Second, func(context.Context) string {
		md = getMD(t, key)
		sets = ownedSets(t, md)
		var replicas, available int32
		for _, ms := range sets {
			replicas += ptr.Deref(ms.Status.Replicas, 0)
			available += ptr.Deref(ms.Status.AvailableReplicas, 0)
		}
		switch {
		case md.Status.ObservedGeneration != md.Generation:
			return fmt.Sprintf("observed generation %d of %d", md.Status.ObservedGeneration, md.Generation)
		case ptr.Deref(md.Status.Replicas, -1) != replicas || ptr.Deref(md.Status.AvailableReplicas, -1) != available:
			return fmt.Sprintf("status replicas %v available %v, sets have %d and %d",
				md.Status.Replicas, md.Status.AvailableReplicas, replicas, available)
		}
		return ""
	})
	return md, sets
}

func setStatus(t *testing.T, ms *clusterv1.MachineSet, replicas, available, upToDate int32) {
	t.Helper()
	// All of a set's Machines run its template's version; a set without
	// Machines counts none.
	var versions any
	if replicas > 0 {
		versions = []any{map[string]any{"version": ms.Spec.Template.Spec.Version, "replicas": replicas}}
	}
	body, _ := json.Marshal(map[string]any{"status": map[string]any{
		"replicas": replicas, "readyReplicas": available, "availableReplicas": available, "upToDateReplicas": upToDate,
		"versions": versions,
	}})
	if err := env.Client.Status().Patch(context.Background(), ms, client.RawPatch(types.MergePatchType, body)); err != nil {
		t.Fatalf("setting status of %s: %v", ms.Name, err)
	}
}

// emulateStep plays the MachineSet controller and the machines for one
// set, oldest first: Machines appear (not yet available) or go to match
// spec.replicas, or the Machines that exist become available. It reports
// whether anything changed.
func emulateStep(t *testing.T, md *clusterv1.MachineDeployment, sets []clusterv1.MachineSet) bool {
	t.Helper()
	for i := range sets {
		ms := &sets[i]
		spec := ptr.Deref(ms.Spec.Replicas, 1)
		replicas := ptr.Deref(ms.Status.Replicas, 0)
		available := ptr.Deref(ms.Status.AvailableReplicas, 0)
		upToDate := func(n int32) int32 {
			if plan.TemplateUpToDate(&ms.Spec.Template, &md.Spec.Template) {
				return n
			}
			return 0
		}
		switch {
		case replicas != spec:
			setStatus(t, ms, spec, min(available, spec), upToDate(spec))
			return true
		case available < replicas:
			setStatus(t, ms, replicas, replicas, upToDate(replicas))
			return true
		}
	}
	return false
}

// drive alternates the controller and the emulated Machines until nothing
// changes any more, calling check on every state either side leaves.
func drive(t *testing.T, key client.ObjectKey, check func([]clusterv1.MachineSet)) (*clusterv1.MachineDeployment, []clusterv1.MachineSet) {
	t.Helper()
	for step := 0; step < 200; step++ {
		md, sets := settled(t, key)
		if check != nil {
			check(sets)
		}
		if !emulateStep(t, md, sets) {
			return md, sets
		}
		if check != nil {
			check(ownedSets(t, md))
		}
	}
	t.Fatal("the rollout did not converge in 200 steps")
	return nil, nil
}

func replicasOf(ms clusterv1.MachineSet) int32 { return ptr.Deref(ms.Spec.Replicas, -1) }

func describe(sets []clusterv1.MachineSet) string {
	var parts []string
	for _, ms := range sets {
		parts = append(parts, fmt.Sprintf("%s(%s rev %s spec %d machines %d available %d)", ms.Name, ms.Spec.Template.Spec.Version,
			ms.Annotations[clusterv1.RevisionAnnotation], replicasOf(ms), ptr.Deref(ms.Status.Replicas, 0), ptr.Deref(ms.Status.AvailableReplicas, 0)))
	}
	return strings.Join(parts, ", ")
}

func setVersion(t *testing.T, md *clusterv1.MachineDeployment, version string) {
	t.Helper()
	mergePatch(t, md, map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"version": version}}}})
}

func TestNewDeploymentCreatesOneMachineSet(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	md := newMD(ns, "workers", "c1", 3)
	// The controller fills the empty selector.
	md.Spec.Template.Labels = nil
	md.Spec.Selector = metav1.LabelSelector{}
	md.Spec.Deletion.Order = clusterv1.OldestMachineSetDeletionOrder
	md.Spec.MachineNaming.Template = "{{ .machineSet.name }}-{{ .random }}"
	md.Annotations = map[string]string{"team": "blue"}
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), withEmptySelector(t, md))
	key := client.ObjectKeyFromObject(md)

	md, sets := settled(t, key)
	if len(sets) != 1 {
		t.Fatalf("want one MachineSet, have %s", describe(sets))
	}
	if got := md.Spec.Selector.MatchLabels[clusterv1.MachineDeploymentNameLabel]; got != "workers" {
		t.Errorf("selector %+v was not defaulted", md.Spec.Selector)
	}
	if md.Spec.Template.Labels[clusterv1.MachineDeploymentNameLabel] != "workers" {
		t.Errorf("template labels %v lack the deployment-name label", md.Spec.Template.Labels)
	}
	if md.Labels[clusterv1.ClusterNameLabel] != "c1" {
		t.Errorf("labels %v lack the cluster-name label", md.Labels)
	}
	if refs := md.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Cluster" || refs[0].Name != "c1" {
		t.Errorf("owner references %+v, want the Cluster", refs)
	}
	if !strings.Contains(strings.Join(md.Finalizers, ","), clusterv1.MachineDeploymentFinalizer) {
		t.Errorf("finalizers %v", md.Finalizers)
	}
	// Defaulted as upstream does: the cluster-name label too.
	if md.Status.Selector != "cluster.x-k8s.io/cluster-name=c1,cluster.x-k8s.io/deployment-name=workers" {
		t.Errorf("status.selector %q", md.Status.Selector)
	}
	if md.Annotations[clusterv1.RevisionAnnotation] != "1" {
		t.Errorf("revision annotation %q, want 1", md.Annotations[clusterv1.RevisionAnnotation])
	}

	ms := sets[0]
	if replicasOf(ms) != 3 {
		t.Errorf("replicas %d, want 3", replicasOf(ms))
	}
	if !strings.HasPrefix(ms.Name, "workers-") || len(ms.Name) > 63 {
		t.Errorf("name %q", ms.Name)
	}
	hash := ms.Labels[clusterv1.MachineDeploymentUniqueLabel]
	for k, v := range map[string]string{
		clusterv1.MachineDeploymentNameLabel: "workers", clusterv1.ClusterNameLabel: "c1", clusterv1.MachineDeploymentUniqueLabel: hash,
	} {
		if ms.Labels[k] != v || v == "" {
			t.Errorf("label %s=%q, want %q", k, ms.Labels[k], v)
		}
		if k != clusterv1.ClusterNameLabel && ms.Spec.Template.Labels[k] != v {
			t.Errorf("template label %s=%q, want %q", k, ms.Spec.Template.Labels[k], v)
		}
	}
	if ms.Spec.Selector.MatchLabels[clusterv1.MachineDeploymentUniqueLabel] != hash {
		t.Errorf("selector %+v lacks the template hash", ms.Spec.Selector)
	}
	ref := metav1.GetControllerOf(&ms)
	if ref == nil || ref.Kind != "MachineDeployment" || ref.UID != md.UID {
		t.Errorf("controller %+v, want the MachineDeployment", ref)
	}
	if ms.Annotations[clusterv1.RevisionAnnotation] != "1" || ms.Annotations["team"] != "blue" ||
		ms.Annotations[clusterv1.DesiredReplicasAnnotation] != "3" || ms.Annotations[clusterv1.MaxReplicasAnnotation] != "4" {
		t.Errorf("annotations %v", ms.Annotations)
	}
	if ms.Spec.Template.Spec.Version != v1 || ms.Spec.ClusterName != "c1" || ms.Spec.Template.Spec.InfrastructureRef != md.Spec.Template.Spec.InfrastructureRef {
		t.Errorf("template %+v not copied", ms.Spec.Template.Spec)
	}
	if ms.Spec.Deletion.Order != clusterv1.OldestMachineSetDeletionOrder || ms.Spec.MachineNaming != md.Spec.MachineNaming {
		t.Errorf("deletion %+v, machine naming %+v not copied", ms.Spec.Deletion, ms.Spec.MachineNaming)
	}

	// Before any Machine exists the deployment is scaling up and not available.
	for _, c := range []struct {
		t string
		s metav1.ConditionStatus
	}{
		{clusterv1.ScalingUpCondition, metav1.ConditionTrue},
		{clusterv1.AvailableCondition, metav1.ConditionFalse},
		{clusterv1.RollingOutCondition, metav1.ConditionFalse},
		{clusterv1.DeletingCondition, metav1.ConditionFalse},
		{clusterv1.PausedCondition, metav1.ConditionFalse},
	} {
		if why := fixture.Condition(md.Status.Conditions, c.t, c.s); why != "" {
			t.Error(why)
		}
	}
	if md.Status.Phase != string(clusterv1.MachineDeploymentPhaseScalingUp) {
		t.Errorf("phase %q", md.Status.Phase)
	}
	if c := condition(md, clusterv1.ScalingUpCondition); c != nil && c.Message != "Scaling up from 0 to 3 replicas" {
		t.Errorf("ScalingUp message %q", c.Message)
	}

	md, _ = drive(t, key, nil)
	for _, c := range []struct {
		t string
		s metav1.ConditionStatus
	}{
		{clusterv1.ScalingUpCondition, metav1.ConditionFalse},
		{clusterv1.ScalingDownCondition, metav1.ConditionFalse},
		{clusterv1.AvailableCondition, metav1.ConditionTrue},
		{clusterv1.MachinesReadyCondition, metav1.ConditionTrue},
		{clusterv1.MachinesUpToDateCondition, metav1.ConditionTrue},
		{clusterv1.RemediatingCondition, metav1.ConditionFalse},
	} {
		if why := fixture.Condition(md.Status.Conditions, c.t, c.s); why != "" {
			t.Error(why)
		}
	}
	if md.Status.Phase != string(clusterv1.MachineDeploymentPhaseRunning) ||
		ptr.Deref(md.Status.ReadyReplicas, 0) != 3 || ptr.Deref(md.Status.UpToDateReplicas, 0) != 3 {
		t.Errorf("status %+v", md.Status)
	}
	if len(md.Status.Versions) != 1 || md.Status.Versions[0].Replicas != 3 {
		t.Errorf("versions %+v, want the 3 Machines at one version", md.Status.Versions)
	}

	events := &eventsv1.EventList{}
	if err := env.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		if e.Reason == "SuccessfulCreate" && e.Regarding.Name == "workers" && strings.Contains(e.Note, ms.Name) {
			found = true
		}
	}
	if !found {
		t.Errorf("no SuccessfulCreate event for %s among %d events", ms.Name, len(events.Items))
	}
}

func TestScaleUpAndDown(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "scale", "c1", 2)
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, sets := drive(t, key, nil)
	name := sets[0].Name

	for _, c := range []struct {
		replicas int32
		phase    clusterv1.MachineDeploymentPhase
		cond     string
	}{
		{5, clusterv1.MachineDeploymentPhaseScalingUp, clusterv1.ScalingUpCondition},
		{1, clusterv1.MachineDeploymentPhaseScalingDown, clusterv1.ScalingDownCondition},
		{0, clusterv1.MachineDeploymentPhaseScalingDown, clusterv1.ScalingDownCondition},
	} {
		mergePatch(t, md, map[string]any{"spec": map[string]any{"replicas": c.replicas}})
		md, sets = settled(t, key)
		if len(sets) != 1 || sets[0].Name != name || replicasOf(sets[0]) != c.replicas {
			t.Fatalf("after scaling to %d: %s", c.replicas, describe(sets))
		}
		if md.Status.Phase != string(c.phase) {
			t.Errorf("phase %q while scaling to %d, want %s", md.Status.Phase, c.replicas, c.phase)
		}
		if why := fixture.Condition(md.Status.Conditions, c.cond, metav1.ConditionTrue); why != "" {
			t.Error(why)
		}
		md, sets = drive(t, key, nil)
		if len(sets) != 1 || ptr.Deref(sets[0].Status.AvailableReplicas, -1) != c.replicas {
			t.Fatalf("after scaling to %d: %s", c.replicas, describe(sets))
		}
		if md.Status.Phase != string(clusterv1.MachineDeploymentPhaseRunning) {
			t.Errorf("phase %q after scaling to %d", md.Status.Phase, c.replicas)
		}
	}
}

// TestRollingUpdateStaysWithinLimits rolls 5 replicas to a new template
// with maxSurge 1 and maxUnavailable 0, and checks every state on the way:
// never more than 6 Machines asked for or existing, never fewer than 5
// available.
func TestRollingUpdateStaysWithinLimits(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "roll", "c1", 5)
	rolling(md, intstr.FromInt32(1), intstr.FromInt32(0))
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, sets := drive(t, key, nil)
	oldName := sets[0].Name

	setVersion(t, md, v2)
	steps := 0
	sawRollingOut := false
	md, sets = drive(t, key, func(sets []clusterv1.MachineSet) {
		steps++
		var specs, footprint, available int32
		for _, ms := range sets {
			specs += replicasOf(ms)
			footprint += max(replicasOf(ms), ptr.Deref(ms.Status.Replicas, 0))
			available += ptr.Deref(ms.Status.AvailableReplicas, 0)
		}
		if specs > 6 || footprint > 6 || available < 5 {
			t.Fatalf("step %d breaks the limits (spec replicas %d, Machines at most %d, available %d): %s",
				steps, specs, footprint, available, describe(sets))
		}
		if len(sets) > 2 {
			t.Fatalf("step %d: more than two MachineSets: %s", steps, describe(sets))
		}
		if c := condition(getMD(t, key), clusterv1.RollingOutCondition); c != nil && c.Status == metav1.ConditionTrue {
			sawRollingOut = true
			if !strings.Contains(c.Message, "not up-to-date replica") || !strings.Contains(c.Message, "version v1.34.0 → v1.35.0") {
				t.Errorf("RollingOut message %q", c.Message)
			}
		}
	})
	if len(sets) != 2 || sets[0].Name != oldName || replicasOf(sets[0]) != 0 || ptr.Deref(sets[0].Status.Replicas, -1) != 0 ||
		replicasOf(sets[1]) != 5 || ptr.Deref(sets[1].Status.AvailableReplicas, -1) != 5 || sets[1].Spec.Template.Spec.Version != v2 {
		t.Fatalf("the rollout ended with %s", describe(sets))
	}
	if _, ok := sets[0].Annotations["machineset.cluster.x-k8s.io/disable-machine-create"]; !ok {
		t.Errorf("the old set may still create Machines: %v", sets[0].Annotations)
	}
	if _, ok := sets[1].Annotations["machineset.cluster.x-k8s.io/disable-machine-create"]; ok {
		t.Errorf("the new set may not create Machines: %v", sets[1].Annotations)
	}
	if steps < 10 {
		t.Errorf("the rollout took %d observed steps; with maxSurge 1 it needs at least 10", steps)
	}
	if !sawRollingOut {
		t.Error("RollingOut was never True")
	}
	if sets[0].Annotations[clusterv1.RevisionAnnotation] != "1" || sets[1].Annotations[clusterv1.RevisionAnnotation] != "2" ||
		md.Annotations[clusterv1.RevisionAnnotation] != "2" {
		t.Errorf("revisions: %s, deployment %q", describe(sets), md.Annotations[clusterv1.RevisionAnnotation])
	}
	for _, c := range []struct {
		t string
		s metav1.ConditionStatus
	}{
		{clusterv1.RollingOutCondition, metav1.ConditionFalse},
		{clusterv1.AvailableCondition, metav1.ConditionTrue},
	} {
		if why := fixture.Condition(md.Status.Conditions, c.t, c.s); why != "" {
			t.Error(why)
		}
	}
	if ptr.Deref(md.Status.UpToDateReplicas, -1) != 5 {
		t.Errorf("upToDateReplicas %v", md.Status.UpToDateReplicas)
	}
	t.Logf("the controller made %d writes in %d observed steps (MachineSet creations, patches and MachineDeployment status)", writes.in(ns), steps)

	// A settled MachineDeployment costs no write, whatever wakes it.
	before := writes.in(ns)
	mergePatch(t, md, map[string]any{"metadata": map[string]any{"labels": map[string]any{"touched": "yes"}}})
	time.Sleep(500 * time.Millisecond)
	if after := writes.in(ns); after != before {
		t.Errorf("a reconcile with nothing to do made %d writes", after-before)
	}
}

// TestRollingUpdateWithMaxUnavailable lets the rollout take Machines away
// first, and never below replicas - maxUnavailable.
func TestRollingUpdateWithMaxUnavailable(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "unav", "c1", 4)
	rolling(md, intstr.FromInt32(0), intstr.FromString("50%"))
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, _ = drive(t, key, nil)
	setVersion(t, md, v2)
	_, sets := drive(t, key, func(sets []clusterv1.MachineSet) {
		var footprint, available int32
		for _, ms := range sets {
			footprint += max(replicasOf(ms), ptr.Deref(ms.Status.Replicas, 0))
			available += ptr.Deref(ms.Status.AvailableReplicas, 0)
		}
		if footprint > 4 || available < 2 {
			t.Fatalf("Machines at most %d, available %d: %s", footprint, available, describe(sets))
		}
	})
	if len(sets) != 2 || replicasOf(sets[0]) != 0 || replicasOf(sets[1]) != 4 {
		t.Fatalf("the rollout ended with %s", describe(sets))
	}
}

func TestOnDeleteReplacesOnlyDeletedMachines(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "ondelete", "c1", 3)
	md.Spec.Rollout.Strategy.Type = clusterv1.OnDeleteMachineDeploymentStrategyType
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, _ = drive(t, key, nil)

	setVersion(t, md, v2)
	md, sets := drive(t, key, nil)
	if len(sets) != 2 || replicasOf(sets[0]) != 3 || replicasOf(sets[1]) != 0 {
		t.Fatalf("after the template change: %s; OnDelete must leave the old Machines alone", describe(sets))
	}
	if why := fixture.Condition(md.Status.Conditions, clusterv1.RollingOutCondition, metav1.ConditionTrue); why != "" {
		t.Error(why)
	}

	for deleted := int32(1); deleted <= 3; deleted++ {
		// Someone deletes one old Machine; it goes.
		old := sets[0]
		left := ptr.Deref(old.Status.Replicas, 0) - 1
		setStatus(t, &old, left, left, 0)
		md, sets = drive(t, key, func(sets []clusterv1.MachineSet) {
			var specs int32
			for _, ms := range sets {
				specs += replicasOf(ms)
			}
			// The old set never asks for a Machine it lost back.
			if specs != 3 || replicasOf(sets[0]) > ptr.Deref(sets[0].Status.Replicas, 0) {
				t.Fatalf("after %d deletions: %s", deleted, describe(sets))
			}
		})
		if replicasOf(sets[0]) != 3-deleted || replicasOf(sets[1]) != deleted || ptr.Deref(sets[1].Status.AvailableReplicas, 0) != deleted {
			t.Fatalf("after %d deletions: %s", deleted, describe(sets))
		}
	}
	if why := fixture.Condition(md.Status.Conditions, clusterv1.RollingOutCondition, metav1.ConditionFalse); why != "" {
		t.Error(why)
	}
}

func TestRolloutAfterReplacesOlderMachinesOnTime(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "after", "c1", 2)
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, sets := drive(t, key, nil)
	oldName := sets[0].Name

	after := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	mergePatch(t, md, map[string]any{"spec": map[string]any{"rollout": map[string]any{"after": after.UTC().Format(time.RFC3339)}}})
	md, sets = settled(t, key)
	if len(sets) != 1 {
		t.Fatalf("a MachineSet was created before rollout.after: %s", describe(sets))
	}
	// Nothing else happens until then: only the requeue wakes the controller.
	for time.Now().Before(after.Add(-300 * time.Millisecond)) {
		if sets := ownedSets(t, md); len(sets) != 1 {
			t.Fatalf("%s: a MachineSet was created before rollout.after %s", time.Now(), after)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fixture.Eventually(t, "waiting for a new MachineSet after rollout.after", 30*time.Second, func(context.Context) string {
		if sets := ownedSets(t, md); len(sets) != 2 {
			return describe(sets)
		}
		return ""
	})
	md, sets = drive(t, key, nil)
	if len(sets) != 2 || sets[0].Name != oldName || replicasOf(sets[0]) != 0 || replicasOf(sets[1]) != 2 {
		t.Fatalf("the rollout ended with %s", describe(sets))
	}
	if sets[1].CreationTimestamp.Time.Before(after) {
		t.Errorf("new MachineSet created at %s, before rollout.after %s", sets[1].CreationTimestamp, after)
	}
	if !plan.TemplateUpToDate(&sets[0].Spec.Template, &sets[1].Spec.Template) {
		t.Error("the template changed; rollout.after alone should replace the Machines")
	}
	if why := fixture.Condition(md.Status.Conditions, clusterv1.RollingOutCondition, metav1.ConditionFalse); why != "" {
		t.Error(why)
	}
}

func TestPausedClusterStopsTheController(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	cluster := fixture.NewCluster(ns, "c1", fixture.Paused(false))
	cluster.Spec.Paused = ptr.To(true)
	md := newMD(ns, "paused", "c1", 2)
	fixture.Create(t, env.Client, cluster, md)
	key := client.ObjectKeyFromObject(md)
	fixture.Eventually(t, "waiting for Paused", 30*time.Second, func(context.Context) string {
		return fixture.Condition(getMD(t, key).Status.Conditions, clusterv1.PausedCondition, metav1.ConditionTrue)
	})
	time.Sleep(300 * time.Millisecond)
	md = getMD(t, key)
	if sets := ownedSets(t, md); len(sets) != 0 || len(md.Finalizers) != 0 {
		t.Fatalf("a paused MachineDeployment was acted on: finalizers %v, sets %s", md.Finalizers, describe(sets))
	}

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		t.Fatal(err)
	}
	mergePatch(t, cluster, map[string]any{"spec": map[string]any{"paused": false}})
	_, sets := drive(t, key, nil)
	if len(sets) != 1 || replicasOf(sets[0]) != 2 {
		t.Fatalf("after resuming: %s", describe(sets))
	}

	// The annotation pauses one MachineDeployment.
	md = getMD(t, key)
	mergePatch(t, md, map[string]any{"metadata": map[string]any{"annotations": map[string]any{clusterv1.PausedAnnotation: ""}}, "spec": map[string]any{"replicas": 4}})
	fixture.Eventually(t, "waiting for Paused", 30*time.Second, func(context.Context) string {
		return fixture.Condition(getMD(t, key).Status.Conditions, clusterv1.PausedCondition, metav1.ConditionTrue)
	})
	time.Sleep(300 * time.Millisecond)
	if sets := ownedSets(t, md); replicasOf(sets[0]) != 2 {
		t.Fatalf("a paused MachineDeployment scaled: %s", describe(sets))
	}
	mergePatch(t, md, map[string]any{"metadata": map[string]any{"annotations": map[string]any{clusterv1.PausedAnnotation: nil}}})
	_, sets = drive(t, key, nil)
	if replicasOf(sets[0]) != 4 {
		t.Fatalf("after resuming: %s", describe(sets))
	}
}

func TestPausedRolloutStillScales(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "hold", "c1", 2)
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, _ = drive(t, key, nil)

	mergePatch(t, md, map[string]any{"spec": map[string]any{"paused": true, "template": map[string]any{"spec": map[string]any{"version": v2}}}})
	md, sets := drive(t, key, nil)
	if len(sets) != 1 {
		t.Fatalf("a paused rollout created a MachineSet: %s", describe(sets))
	}
	if c := condition(md, clusterv1.PausedCondition); c == nil || c.Status != metav1.ConditionTrue || c.Reason != machinedeployment.RolloutPausedReason {
		t.Errorf("Paused %+v", c)
	}
	mergePatch(t, md, map[string]any{"spec": map[string]any{"replicas": 3}})
	md, sets = drive(t, key, nil)
	if len(sets) != 1 || replicasOf(sets[0]) != 3 || sets[0].Spec.Template.Spec.Version != v1 {
		t.Fatalf("a paused rollout must still scale: %s", describe(sets))
	}
	if _, ok := sets[0].Annotations["machineset.cluster.x-k8s.io/disable-machine-create"]; ok {
		t.Errorf("the set a paused rollout scales may not create Machines: %v", sets[0].Annotations)
	}
	if c := condition(md, clusterv1.RollingOutCondition); c == nil || !strings.Contains(c.Message, "spec.paused") {
		t.Errorf("RollingOut %+v should say the rollout is paused", c)
	}

	mergePatch(t, md, map[string]any{"spec": map[string]any{"paused": nil}})
	md, sets = drive(t, key, nil)
	if len(sets) != 2 || replicasOf(sets[0]) != 0 || replicasOf(sets[1]) != 3 || sets[1].Spec.Template.Spec.Version != v2 {
		t.Fatalf("after resuming the rollout: %s", describe(sets))
	}
	if why := fixture.Condition(md.Status.Conditions, clusterv1.PausedCondition, metav1.ConditionFalse); why != "" {
		t.Error(why)
	}
}

func TestRevisionHistoryIsCleanedUp(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "history", "c1", 1)
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, sets := drive(t, key, nil)
	first := sets[0].Name
	for _, v := range []string{v2, v3} {
		setVersion(t, md, v)
		md, _ = drive(t, key, nil)
	}
	fixture.Eventually(t, "waiting for the oldest revision to go", 30*time.Second, func(context.Context) string {
		sets = ownedSets(t, md)
		if len(sets) != 2 {
			return describe(sets)
		}
		return ""
	})
	for _, ms := range sets {
		if ms.Name == first {
			t.Fatalf("revision 1 was kept: %s", describe(sets))
		}
	}
	if sets[0].Annotations[clusterv1.RevisionAnnotation] != "2" || replicasOf(sets[0]) != 0 ||
		sets[1].Annotations[clusterv1.RevisionAnnotation] != "3" || replicasOf(sets[1]) != 1 {
		t.Fatalf("history: %s", describe(sets))
	}
	if md = getMD(t, key); md.Annotations[clusterv1.RevisionAnnotation] != "3" {
		t.Errorf("deployment revision %q, want 3", md.Annotations[clusterv1.RevisionAnnotation])
	}
}

func TestRollbackToThePreviousRevision(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "undo", "c1", 2)
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, sets := drive(t, key, nil)
	original := sets[0].Name
	setVersion(t, md, v2)
	md, sets = drive(t, key, nil)
	if len(sets) != 2 {
		t.Fatalf("after the rollout: %s", describe(sets))
	}
	if _, err := plan.RollbackTemplate(md, sets, 9); err == nil || !strings.Contains(err.Error(), "kept revisions: 1, 2") {
		t.Errorf("rolling back to a revision that is not kept: %v", err)
	}

	template, err := plan.RollbackTemplate(md, sets, 0)
	if err != nil {
		t.Fatal(err)
	}
	if template.Spec.Version != v1 || template.Labels[clusterv1.MachineDeploymentUniqueLabel] != "" {
		t.Fatalf("rollback template %+v", template)
	}
	mergePatch(t, md, map[string]any{"spec": map[string]any{"template": template}})
	md, sets = drive(t, key, nil)
	// Revision order: the v2 set (2), then the original one again (3).
	if len(sets) != 2 || sets[1].Name != original || replicasOf(sets[1]) != 2 || replicasOf(sets[0]) != 0 {
		t.Fatalf("after the rollback: %s; the original MachineSet should be back", describe(sets))
	}
	if _, ok := sets[1].Annotations["machineset.cluster.x-k8s.io/disable-machine-create"]; ok {
		t.Errorf("the rolled-back set may not create Machines: %v", sets[1].Annotations)
	}
	if sets[1].Annotations[clusterv1.RevisionAnnotation] != "3" || md.Annotations[clusterv1.RevisionAnnotation] != "3" {
		t.Errorf("the rolled-back set should be revision 3: %s, deployment %q", describe(sets), md.Annotations[clusterv1.RevisionAnnotation])
	}
}

func TestInPlaceChangesNeedNoNewMachineSet(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "inplace", "c1", 1)
	md.Spec.Template.Labels["old"] = "yes"
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, sets := drive(t, key, nil)
	name := sets[0].Name

	mergePatch(t, md, map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"team": "green"}},
		"spec": map[string]any{
			"deletion": map[string]any{"order": "Newest"},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"old": nil, "tier": "gold"}, "annotations": map[string]any{"note": "x"}},
				"spec": map[string]any{
					"minReadySeconds": 10,
					"readinessGates":  []any{map[string]any{"conditionType": "example.com/Ready"}},
					"deletion":        map[string]any{"nodeDrainTimeoutSeconds": 30},
					"taints":          []any{map[string]any{"key": "dedicated", "value": "gpu", "effect": "NoSchedule", "propagation": "Always"}},
				},
			},
		},
	})
	md, sets = drive(t, key, nil)
	if len(sets) != 1 || sets[0].Name != name {
		t.Fatalf("an in-place change made a new MachineSet: %s", describe(sets))
	}
	ms := sets[0]
	tmpl := ms.Spec.Template
	switch {
	case tmpl.Labels["tier"] != "gold" || tmpl.Labels["old"] != "":
		t.Errorf("template labels %v", tmpl.Labels)
	case tmpl.Annotations["note"] != "x":
		t.Errorf("template annotations %v", tmpl.Annotations)
	case ptr.Deref(tmpl.Spec.MinReadySeconds, 0) != 10 || ptr.Deref(tmpl.Spec.Deletion.NodeDrainTimeoutSeconds, 0) != 30:
		t.Errorf("template spec %+v", tmpl.Spec)
	case len(tmpl.Spec.ReadinessGates) != 1 || tmpl.Spec.ReadinessGates[0].ConditionType != "example.com/Ready":
		t.Errorf("readiness gates %+v", tmpl.Spec.ReadinessGates)
	case len(tmpl.Spec.Taints) != 1 || tmpl.Spec.Taints[0].Key != "dedicated":
		t.Errorf("taints %+v", tmpl.Spec.Taints)
	case ms.Spec.Deletion.Order != clusterv1.NewestMachineSetDeletionOrder:
		t.Errorf("deletion order %q", ms.Spec.Deletion.Order)
	case ms.Labels["tier"] != "gold" || ms.Annotations["team"] != "green":
		t.Errorf("labels %v annotations %v", ms.Labels, ms.Annotations)
	case tmpl.Labels[clusterv1.MachineDeploymentUniqueLabel] == "" || tmpl.Labels[clusterv1.MachineDeploymentNameLabel] != "inplace":
		t.Errorf("template labels %v lost what the selector needs", tmpl.Labels)
	}
	if why := fixture.Condition(md.Status.Conditions, clusterv1.RollingOutCondition, metav1.ConditionFalse); why != "" {
		t.Error(why)
	}

	// Labels someone removes from the set are put back.
	mergePatch(t, &ms, map[string]any{"metadata": map[string]any{"labels": map[string]any{clusterv1.MachineDeploymentNameLabel: nil}}})
	fixture.Eventually(t, "waiting for the deployment-name label to come back", 30*time.Second, func(context.Context) string {
		sets := ownedSets(t, md)
		if sets[0].Labels[clusterv1.MachineDeploymentNameLabel] != "inplace" {
			return fmt.Sprintf("labels %v", sets[0].Labels)
		}
		return ""
	})
}

func TestOrphanedMachineSetIsAdopted(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "adopt", "c1", 2)
	md.Spec.Selector.MatchLabels = map[string]string{"pool": "adopt"}
	orphan := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "handmade", Labels: map[string]string{"pool": "adopt"}}}
	orphan.Spec.ClusterName = "c1"
	orphan.Spec.Replicas = ptr.To(int32(2))
	orphan.Spec.Selector.MatchLabels = map[string]string{"pool": "adopt"}
	orphan.Spec.Template = *md.Spec.Template.DeepCopy()
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), orphan)
	setStatus(t, orphan, 2, 2, 2)
	fixture.Create(t, env.Client, md)
	key := client.ObjectKeyFromObject(md)
	_, sets := drive(t, key, nil)
	if len(sets) != 1 || sets[0].Name != "handmade" || replicasOf(sets[0]) != 2 {
		t.Fatalf("want the orphan adopted and used: %s", describe(sets))
	}
	if sets[0].Annotations[clusterv1.RevisionAnnotation] != "1" || sets[0].Labels[clusterv1.MachineDeploymentNameLabel] != "adopt" {
		t.Errorf("adopted set annotations %v labels %v", sets[0].Annotations, sets[0].Labels)
	}
}

func TestUnplannableStrategyIsReported(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "blocked", "c1", 5)
	// 10% of 5 rounds down to 0, and maxSurge is 0: no rollout could move.
	rolling(md, intstr.FromInt32(0), intstr.FromString("10%"))
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, sets := settled(t, key)
	if len(sets) != 0 {
		t.Fatalf("sets %s", describe(sets))
	}
	c := condition(md, clusterv1.RollingOutCondition)
	if c == nil || c.Reason != machinedeployment.RolloutBlockedReason || !strings.Contains(c.Message, "raise one of them") {
		t.Errorf("RollingOut %+v should explain the blocked rollout", c)
	}
	if c := condition(md, clusterv1.ScalingUpCondition); c == nil || !strings.Contains(c.Message, "blocked") {
		t.Errorf("ScalingUp %+v should say scaling is blocked", c)
	}
	// Fixing the strategy unblocks it.
	mergePatch(t, md, map[string]any{"spec": map[string]any{"rollout": map[string]any{"strategy": map[string]any{"rollingUpdate": map[string]any{"maxSurge": 1}}}}})
	_, sets = drive(t, key, nil)
	if len(sets) != 1 || replicasOf(sets[0]) != 5 {
		t.Fatalf("after fixing the strategy: %s", describe(sets))
	}
}

func TestMachineConditionsAreSummarised(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	md := newMD(ns, "summary", "c1", 2)
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, sets := drive(t, key, nil)
	ms := sets[0]

	var machines []*clusterv1.Machine
	for _, name := range []string{"summary-a", "summary-b"} {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels:          map[string]string{clusterv1.MachineDeploymentNameLabel: md.Name, clusterv1.MachineSetNameLabel: ms.Name, clusterv1.ClusterNameLabel: "c1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: ms.Name, UID: ms.UID, Controller: ptr.To(true)}},
		}}
		m.Spec = *ms.Spec.Template.Spec.DeepCopy()
		fixture.Create(t, env.Client, m)
		machines = append(machines, m)
	}
	setConditions := func(m *clusterv1.Machine, conds ...metav1.Condition) {
		t.Helper()
		for i := range conds {
			conds[i].LastTransitionTime = metav1.Now()
			if conds[i].Reason == "" {
				conds[i].Reason = string(conds[i].Status)
			}
		}
		body, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
		if err := env.Client.Status().Patch(ctx, m, client.RawPatch(types.MergePatchType, body)); err != nil {
			t.Fatal(err)
		}
	}
	setConditions(machines[0], metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue},
		metav1.Condition{Type: clusterv1.UpToDateCondition, Status: metav1.ConditionTrue})
	setConditions(machines[1], metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionFalse},
		metav1.Condition{Type: clusterv1.UpToDateCondition, Status: metav1.ConditionTrue},
		metav1.Condition{Type: clusterv1.HealthCheckSucceededCondition, Status: metav1.ConditionFalse},
		metav1.Condition{Type: clusterv1.OwnerRemediatedCondition, Status: metav1.ConditionFalse})
	fixture.Eventually(t, "waiting for the Machine conditions to be summarised", 30*time.Second, func(context.Context) string {
		md := getMD(t, key)
		if c := condition(md, clusterv1.MachinesReadyCondition); c == nil || c.Status != metav1.ConditionFalse || c.Message != "1 Machine is not Ready: summary-b" {
			return fmt.Sprintf("MachinesReady %+v", c)
		}
		if c := condition(md, clusterv1.RemediatingCondition); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "summary-b") {
			return fmt.Sprintf("Remediating %+v", c)
		}
		return fixture.Condition(md.Status.Conditions, clusterv1.MachinesUpToDateCondition, metav1.ConditionTrue)
	})

	setConditions(machines[1], metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue},
		metav1.Condition{Type: clusterv1.UpToDateCondition, Status: metav1.ConditionTrue})
	fixture.Eventually(t, "waiting for MachinesReady", 30*time.Second, func(context.Context) string {
		md := getMD(t, key)
		if why := fixture.Condition(md.Status.Conditions, clusterv1.RemediatingCondition, metav1.ConditionFalse); why != "" {
			return why
		}
		return fixture.Condition(md.Status.Conditions, clusterv1.MachinesReadyCondition, metav1.ConditionTrue)
	})

	// A new template makes the old set's Machines outdated, whatever they say.
	setVersion(t, md, v2)
	fixture.Eventually(t, "waiting for MachinesUpToDate", 30*time.Second, func(context.Context) string {
		c := condition(getMD(t, key), clusterv1.MachinesUpToDateCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Message != "2 Machines are not up to date: summary-a, summary-b" {
			return fmt.Sprintf("MachinesUpToDate %+v", c)
		}
		return ""
	})
}

func TestDeletionTakesTheMachineSets(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	md := newMD(ns, "gone", "c1", 2)
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "c1", fixture.Paused(false)), md)
	key := client.ObjectKeyFromObject(md)
	md, sets := drive(t, key, nil)
	setVersion(t, md, v2)
	md, sets = drive(t, key, nil)
	if len(sets) != 2 {
		t.Fatalf("sets %s", describe(sets))
	}
	if err := env.Client.Delete(ctx, md); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "waiting for the MachineDeployment to go", 30*time.Second, func(context.Context) string {
		err := env.Client.Get(ctx, key, &clusterv1.MachineDeployment{})
		if !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there (%v)", err)
		}
		return ""
	})
	if sets := ownedSets(t, md); len(sets) != 0 {
		t.Fatalf("MachineSets left behind: %s", describe(sets))
	}
}

func TestMissingClusterIsWaitedFor(t *testing.T) {
	ns := env.Namespace(t)
	md := newMD(ns, "early", "later", 1)
	fixture.Create(t, env.Client, md)
	key := client.ObjectKeyFromObject(md)
	fixture.Eventually(t, "waiting for the missing Cluster to be reported", 30*time.Second, func(context.Context) string {
		c := condition(getMD(t, key), clusterv1.AvailableCondition)
		if c == nil || c.Reason != machinedeployment.WaitingForClusterReason || !strings.Contains(c.Message, "Cluster later") {
			return fmt.Sprintf("Available %+v", c)
		}
		return ""
	})
	if sets := ownedSets(t, getMD(t, key)); len(sets) != 0 {
		t.Fatalf("sets made without a Cluster: %s", describe(sets))
	}
	fixture.Create(t, env.Client, fixture.NewCluster(ns, "later", fixture.Paused(false)))
	_, sets := drive(t, key, nil)
	if len(sets) != 1 || replicasOf(sets[0]) != 1 {
		t.Fatalf("after the Cluster appeared: %s", describe(sets))
	}
}
