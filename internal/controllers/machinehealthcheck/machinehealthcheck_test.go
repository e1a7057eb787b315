package machinehealthcheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/controllers/machinehealthcheck"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

// mgmt is the management cluster; wl stands in for every test's workload
// cluster, where the test provider registers the Nodes.
var mgmt, wl *testenv.Env

func TestMain(m *testing.M) {
	fixture.SetLogger()
	ctx, cancel := context.WithCancel(context.Background())
	code := func() int {
		p, stop, err := fixture.StartPlanes(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stop()
		mgmt, wl = p.Mgmt, p.Workload
		if err := installRemediationKinds(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// manager.New registers the MachineHealthCheck controller with the
		// others, as a user runs it.
		if _, err := p.StartManager(ctx, manager.Options{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	cancel()
	os.Exit(code)
}

// An external remediation provider's kinds, for health checks with a
// remediation template.
var (
	remediationTemplate = provider.Kind{Group: "remediation.test.capstan.dev", Kind: "TestRemediationTemplate", Contract: "v1beta2", Version: "v1beta2"}
	remediation         = provider.Kind{Group: "remediation.test.capstan.dev", Kind: "TestRemediation", Contract: "v1beta2", Version: "v1beta2"}
)

func installRemediationKinds(ctx context.Context) error {
	for _, k := range []provider.Kind{remediationTemplate, remediation} {
		if err := mgmt.Client.Create(ctx, k.CRD()); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, k := range []provider.Kind{remediationTemplate, remediation} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(k.GVK().GroupVersion().WithKind(k.Kind + "List"))
			if err := mgmt.Client.List(ctx, list, client.Limit(1)); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

func machines(t *testing.T, ns string) []clusterv1.Machine {
	t.Helper()
	list := &clusterv1.MachineList{}
	if err := mgmt.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func cond(m *clusterv1.Machine, t string) *metav1.Condition {
	return meta.FindStatusCondition(m.Status.Conditions, t)
}

// running waits until exactly n Machines exist, all Running and Available
// with a Node, none of them named in gone; it returns them.
func running(t *testing.T, ns string, n int, gone ...string) []clusterv1.Machine {
	t.Helper()
	var ms []clusterv1.Machine
	fixture.Eventually(t, fmt.Sprintf("%d Machines Running", n), 2*time.Minute, func(context.Context) string {
		ms = machines(t, ns)
		if len(ms) != n {
			return fmt.Sprintf("%d Machines", len(ms))
		}
		for i := range ms {
			m := &ms[i]
			for _, g := range gone {
				if m.Name == g {
					return "machine " + g + " is still there"
				}
			}
			c := cond(m, clusterv1.AvailableCondition)
			if m.Status.Phase != string(clusterv1.MachinePhaseRunning) || c == nil || c.Status != metav1.ConditionTrue || !m.Status.NodeRef.IsDefined() {
				return fmt.Sprintf("machine %s: phase %s available %v", m.Name, m.Status.Phase, c)
			}
		}
		return ""
	})
	return ms
}

// createCluster makes a Cluster whose workload cluster is wl and a
// MachineDeployment of replicas workers the test provider brings up.
func createCluster(t *testing.T, ns string, replicas int32) {
	t.Helper()
	createClusterInitialized(t, ns, replicas, true)
}

func createClusterInitialized(t *testing.T, ns string, replicas int32, initialized bool) {
	t.Helper()
	fixture.CreateProviderCluster(t, mgmt, wl, ns, "c", fixture.Workers(ns, "c", replicas), initialized)
}

const nodeTimeout = 3 // seconds

func createMHC(t *testing.T, ns string, change func(*clusterv1.MachineHealthCheck)) *clusterv1.MachineHealthCheck {
	t.Helper()
	mhc := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"}}
	mhc.Spec.ClusterName = "c"
	mhc.Spec.Selector.MatchLabels = map[string]string{clusterv1.MachineDeploymentNameLabel: "workers"}
	mhc.Spec.Checks.UnhealthyNodeConditions = []clusterv1.UnhealthyNodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To(int32(nodeTimeout))},
		{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To(int32(nodeTimeout))},
	}
	if change != nil {
		change(mhc)
	}
	if err := mgmt.Client.Create(context.Background(), mhc); err != nil {
		t.Fatal(err)
	}
	return mhc
}

// mhcStatus waits until the health check reports the given numbers.
func mhcStatus(t *testing.T, mhc *clusterv1.MachineHealthCheck, expected, healthy int32, allowed metav1.ConditionStatus, msg string) {
	t.Helper()
	fixture.Eventually(t, "health check status", time.Minute, func(context.Context) string {
		if err := mgmt.Client.Get(context.Background(), client.ObjectKeyFromObject(mhc), mhc); err != nil {
			return err.Error()
		}
		st := mhc.Status
		c := meta.FindStatusCondition(st.Conditions, clusterv1.RemediationAllowedCondition)
		if ptr.Deref(st.ExpectedMachines, -1) != expected || ptr.Deref(st.CurrentHealthy, -1) != healthy ||
			c == nil || c.Status != allowed || !strings.Contains(c.Message, msg) || st.ObservedGeneration != mhc.Generation || len(st.Targets) != int(expected) {
			return fmt.Sprintf("status %+v, RemediationAllowed %+v", st, c)
		}
		return ""
	})
}

// setNodeReady reports the Node's Ready condition as a kubelet would, by a
// merge patch of the Node's status; it returns the transition time.
func setNodeReady(t *testing.T, name string, status corev1.ConditionStatus) time.Time {
	t.Helper()
	now := metav1.Now().Rfc3339Copy()
	body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": string(status), "reason": "KubeletNotReady",
		"lastHeartbeatTime": now.UTC().Format(time.RFC3339), "lastTransitionTime": now.UTC().Format(time.RFC3339),
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := wl.Client.Status().Patch(context.Background(), node, client.RawPatch("application/merge-patch+json", body)); err != nil {
		t.Fatal(err)
	}
	return now.Time
}

// markWatch watches one namespace's Machines from before a test breaks
// one, so that a Machine marked for remediation is seen marked even when
// its MachineSet deletes it at once.
type markWatch struct {
	marked chan *clusterv1.Machine
	stop   func()
}

func watchMarks(t *testing.T, ns, name, reason string) *markWatch {
	t.Helper()
	wc, err := client.NewWithWatch(mgmt.Config, client.Options{Scheme: mgmt.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &clusterv1.MachineList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	mw := &markWatch{marked: make(chan *clusterv1.Machine, 1), stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*clusterv1.Machine)
			if !ok || m.Name != name {
				continue
			}
			hc, or := cond(m, clusterv1.HealthCheckSucceededCondition), cond(m, clusterv1.OwnerRemediatedCondition)
			if hc != nil && hc.Status == metav1.ConditionFalse && hc.Reason == reason && or != nil && or.Status == metav1.ConditionFalse {
				mw.marked <- m
				w.Stop()
				return
			}
		}
	}()
	t.Cleanup(w.Stop)
	return mw
}

// remediated waits until the Machine was seen marked unhealthy for its
// owner, and returns it as marked.
func (mw *markWatch) remediated(t *testing.T) *clusterv1.Machine {
	t.Helper()
	select {
	case m := <-mw.marked:
		return m
	case <-time.After(time.Minute):
		t.Fatal("the Machine was not marked for remediation")
		return nil
	}
}

// healthConditionsManagedBy checks that the health check's field manager,
// and no other, owns HealthCheckSucceeded, and that it owns no other
// controller's conditions.
func healthConditionsManagedBy(m *clusterv1.Machine) string {
	for _, f := range m.ManagedFields {
		raw := ""
		if f.FieldsV1 != nil {
			raw = string(f.FieldsV1.Raw)
		}
		hasHC := strings.Contains(raw, `"k:{\"type\":\"HealthCheckSucceeded\"}"`)
		if f.Manager == machinehealthcheck.FieldManager {
			if !hasHC {
				return "the health check's field manager does not own HealthCheckSucceeded: " + raw
			}
			for _, other := range []string{"Ready", "Available", "InfrastructureReady", "NodeReady", "UpToDate"} {
				if strings.Contains(raw, `"k:{\"type\":\"`+other+`\"}"`) {
					return "the health check's field manager owns " + other
				}
			}
		} else if hasHC {
			return "field manager " + f.Manager + " owns HealthCheckSucceeded too"
		}
	}
	return ""
}

func TestUnhealthyNodeIsReplaced(t *testing.T) {
	t.Parallel()
	ns := mgmt.Namespace(t)
	createCluster(t, ns, 3)
	ms := running(t, ns, 3)
	mhc := createMHC(t, ns, nil)
	mhcStatus(t, mhc, 3, 3, metav1.ConditionTrue, "0 of 3")
	for i := range ms {
		fixture.Eventually(t, "healthy "+ms[i].Name, time.Minute, func(context.Context) string {
			m := &clusterv1.Machine{}
			if err := mgmt.Client.Get(context.Background(), client.ObjectKeyFromObject(&ms[i]), m); err != nil {
				return err.Error()
			}
			if c := cond(m, clusterv1.HealthCheckSucceededCondition); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Sprintf("HealthCheckSucceeded %+v", c)
			}
			// Other controllers' conditions are still there.
			if cond(m, clusterv1.AvailableCondition) == nil || cond(m, clusterv1.InfrastructureReadyCondition) == nil {
				return "the machine lost conditions it does not own"
			}
			return healthConditionsManagedBy(m)
		})
	}

	victim := ms[0]
	marks := watchMarks(t, ns, victim.Name, plan.UnhealthyNodeReason)
	since := setNodeReady(t, victim.Status.NodeRef.Name, corev1.ConditionFalse)
	m := marks.remediated(t)
	hc := cond(m, clusterv1.HealthCheckSucceededCondition)
	if !strings.Contains(hc.Message, "Ready=False") {
		t.Errorf("HealthCheckSucceeded message %q does not name the failed condition", hc.Message)
	}
	// Judged at the timeout, not before; and without polling delay.
	if at := hc.LastTransitionTime.Sub(since); at < nodeTimeout*time.Second || at > (nodeTimeout+5)*time.Second {
		t.Errorf("marked unhealthy %s after the Node went NotReady, want just after %ds", at, nodeTimeout)
	}
	if msg := healthConditionsManagedBy(m); msg != "" {
		t.Error(msg)
	}
	running(t, ns, 3, victim.Name)
	mhcStatus(t, mhc, 3, 3, metav1.ConditionTrue, "0 of 3")
	// One verdict, announced once: a reconcile from a stale read, whose
	// write is refused, does not record it again.
	events := &eventsv1.EventList{}
	if err := mgmt.Client.List(context.Background(), events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	announced := 0
	for _, e := range events.Items {
		if e.Reason == "MachineMarkedUnhealthy" && e.Regarding.Name == victim.Name {
			announced++
			if e.Series != nil {
				announced += int(e.Series.Count) - 1
			}
		}
	}
	if announced != 1 {
		t.Errorf("MachineMarkedUnhealthy recorded %d times for %s, want once", announced, victim.Name)
	}
}

func TestTooManyUnhealthyShortCircuits(t *testing.T) {
	t.Parallel()
	ns := mgmt.Namespace(t)
	createCluster(t, ns, 3)
	ms := running(t, ns, 3)
	mhc := createMHC(t, ns, func(mhc *clusterv1.MachineHealthCheck) {
		mhc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo = ptr.To(intstr.FromString("40%"))
	})
	mhcStatus(t, mhc, 3, 3, metav1.ConditionTrue, "0 of 3")
	setNodeReady(t, ms[0].Status.NodeRef.Name, corev1.ConditionFalse)
	setNodeReady(t, ms[1].Status.NodeRef.Name, corev1.ConditionUnknown)
	mhcStatus(t, mhc, 3, 1, metav1.ConditionFalse, "2 of 3 Machines are unhealthy, more than unhealthyLessThanOrEqualTo 40% (1 of 3)")
	if ptr.Deref(mhc.Status.RemediationsAllowed, -1) != 0 {
		t.Errorf("remediationsAllowed %d, want 0", ptr.Deref(mhc.Status.RemediationsAllowed, -1))
	}
	fixture.Consistently(t, "nothing remediated", 3*time.Second, func(context.Context) string {
		for _, m := range machines(t, ns) {
			if !m.DeletionTimestamp.IsZero() {
				return "machine " + m.Name + " is being deleted"
			}
			if c := cond(&m, clusterv1.OwnerRemediatedCondition); c != nil {
				return fmt.Sprintf("machine %s has OwnerRemediated %+v", m.Name, c)
			}
		}
		return ""
	})
	for _, name := range []string{ms[0].Name, ms[1].Name} {
		m := &clusterv1.Machine{}
		if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			t.Fatal(err)
		}
		if c := cond(m, clusterv1.HealthCheckSucceededCondition); c == nil || c.Status != metav1.ConditionFalse {
			t.Errorf("machine %s: HealthCheckSucceeded %+v, want False", name, c)
		}
	}

	// One recovers: one of three is within 40%, and the other is remediated.
	marks := watchMarks(t, ns, ms[0].Name, plan.UnhealthyNodeReason)
	setNodeReady(t, ms[1].Status.NodeRef.Name, corev1.ConditionTrue)
	marks.remediated(t)
	running(t, ns, 3, ms[0].Name)
}

func TestRemediateAnnotation(t *testing.T) {
	t.Parallel()
	ns := mgmt.Namespace(t)
	createCluster(t, ns, 3)
	ms := running(t, ns, 3)
	mhc := createMHC(t, ns, nil)
	mhcStatus(t, mhc, 3, 3, metav1.ConditionTrue, "0 of 3")
	victim := &ms[1]
	marks := watchMarks(t, ns, victim.Name, plan.RemediateAnnotationReason)
	if err := mgmt.Client.Patch(context.Background(), victim, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+clusterv1.RemediateMachineAnnotation+`":""}}}`))); err != nil {
		t.Fatal(err)
	}
	marks.remediated(t)
	running(t, ns, 3, victim.Name)
}

func TestDeletedNode(t *testing.T) {
	t.Parallel()
	ns := mgmt.Namespace(t)
	createCluster(t, ns, 3)
	ms := running(t, ns, 3)
	mhc := createMHC(t, ns, nil)
	mhcStatus(t, mhc, 3, 3, metav1.ConditionTrue, "0 of 3")
	victim := ms[2]
	marks := watchMarks(t, ns, victim.Name, plan.NodeDeletedReason)
	if err := wl.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: victim.Status.NodeRef.Name}}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	marks.remediated(t)
	running(t, ns, 3, victim.Name)
}

func TestExternalRemediation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	createCluster(t, ns, 2)
	ms := running(t, ns, 2)
	tmpl := remediationTemplate.New(ns, "reboot", map[string]any{"template": map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"team": "a"}},
		"spec":     map[string]any{"strategy": "Reboot"},
	}})
	if err := mgmt.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	mhc := createMHC(t, ns, func(mhc *clusterv1.MachineHealthCheck) {
		mhc.Spec.Remediation.TemplateRef = clusterv1.MachineHealthCheckRemediationTemplateReference{
			APIVersion: remediationTemplate.GVK().GroupVersion().String(), Kind: remediationTemplate.Kind, Name: "reboot",
		}
	})
	mhcStatus(t, mhc, 2, 2, metav1.ConditionTrue, "0 of 2")
	victim := ms[0]
	setNodeReady(t, victim.Status.NodeRef.Name, corev1.ConditionFalse)

	req := &unstructured.Unstructured{}
	req.SetGroupVersionKind(remediation.GVK())
	fixture.Eventually(t, "remediation request", time.Minute, func(context.Context) string {
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim.Name}, req); err != nil {
			return err.Error()
		}
		m := &clusterv1.Machine{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(&victim), m); err != nil {
			return err.Error()
		}
		hc, er := cond(m, clusterv1.HealthCheckSucceededCondition), cond(m, clusterv1.ExternallyRemediatedCondition)
		if hc == nil || hc.Status != metav1.ConditionFalse || er == nil || er.Status != metav1.ConditionFalse {
			return fmt.Sprintf("HealthCheckSucceeded %+v ExternallyRemediated %+v", hc, er)
		}
		if c := cond(m, clusterv1.OwnerRemediatedCondition); c != nil {
			return fmt.Sprintf("OwnerRemediated %+v must not be set with a remediation template", c)
		}
		return ""
	})
	if strategy, _, _ := unstructured.NestedString(req.Object, "spec", "strategy"); strategy != "Reboot" || req.GetLabels()["team"] != "a" {
		t.Errorf("remediation request not cloned from its template: %v", req.Object)
	}
	if refs := req.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "Machine" || refs[0].Name != victim.Name {
		t.Errorf("remediation request owners %+v", refs)
	}
	fixture.Consistently(t, "the owner leaves the Machine alone", 2*time.Second, func(context.Context) string {
		m := &clusterv1.Machine{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(&victim), m); err != nil {
			return err.Error()
		}
		if !m.DeletionTimestamp.IsZero() {
			return "the Machine is being deleted"
		}
		return ""
	})

	// The Node recovers before anyone acted: the request is withdrawn.
	setNodeReady(t, victim.Status.NodeRef.Name, corev1.ConditionTrue)
	fixture.Eventually(t, "remediation withdrawn", time.Minute, func(context.Context) string {
		m := &clusterv1.Machine{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(&victim), m); err != nil {
			return err.Error()
		}
		hc, er := cond(m, clusterv1.HealthCheckSucceededCondition), cond(m, clusterv1.ExternallyRemediatedCondition)
		if hc == nil || hc.Status != metav1.ConditionTrue || er != nil {
			return fmt.Sprintf("HealthCheckSucceeded %+v ExternallyRemediated %+v", hc, er)
		}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim.Name}, req); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("remediation request still there: %v", err)
		}
		return ""
	})
}

func TestNothingJudgedBeforeControlPlaneInitialized(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	createClusterInitialized(t, ns, 2, false)
	mhc := createMHC(t, ns, func(mhc *clusterv1.MachineHealthCheck) {
		mhc.Spec.Checks.NodeStartupTimeoutSeconds = ptr.To(int32(30))
	})
	fixture.Eventually(t, "health check waits", time.Minute, func(context.Context) string {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(mhc), mhc); err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(mhc.Status.Conditions, clusterv1.RemediationAllowedCondition)
		if c == nil || c.Status != metav1.ConditionUnknown || !strings.Contains(c.Message, "control plane to be initialized") || len(mhc.Status.Targets) != 2 {
			return fmt.Sprintf("status %+v", mhc.Status)
		}
		return ""
	})
	for _, m := range machines(t, ns) {
		if c := cond(&m, clusterv1.HealthCheckSucceededCondition); c != nil {
			t.Errorf("machine %s judged before the control plane is initialized: %+v", m.Name, c)
		}
	}
}

// A health check belongs to its Cluster, and one whose remediation template
// is missing says so in RemediationAllowed.
func TestMissingRemediationTemplateAndOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	createCluster(t, ns, 1)
	running(t, ns, 1)
	mhc := createMHC(t, ns, func(mhc *clusterv1.MachineHealthCheck) {
		mhc.Spec.Remediation.TemplateRef = clusterv1.MachineHealthCheckRemediationTemplateReference{
			APIVersion: remediationTemplate.GVK().GroupVersion().String(), Kind: remediationTemplate.Kind, Name: "absent",
		}
	})
	fixture.Eventually(t, "owner and condition", time.Minute, func(context.Context) string {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(mhc), mhc); err != nil {
			return err.Error()
		}
		owned := false
		for _, ref := range mhc.OwnerReferences {
			owned = owned || (ref.Kind == "Cluster" && ref.Name == mhc.Spec.ClusterName)
		}
		if !owned {
			return fmt.Sprintf("owners %+v", mhc.OwnerReferences)
		}
		c := meta.FindStatusCondition(mhc.Status.Conditions, clusterv1.RemediationAllowedCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != machinehealthcheck.RemediationTemplateNotFoundReason ||
			!strings.Contains(c.Message, "TestRemediationTemplate absent does not exist") {
			return fmt.Sprintf("RemediationAllowed %+v", c)
		}
		return ""
	})
	if err := mgmt.Client.Create(ctx, remediationTemplate.New(ns, "absent", map[string]any{"template": map[string]any{"spec": map[string]any{}}})); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the template found", time.Minute, func(context.Context) string {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(mhc), mhc); err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(mhc.Status.Conditions, clusterv1.RemediationAllowedCondition); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("RemediationAllowed %+v", c)
		}
		return ""
	})
}
