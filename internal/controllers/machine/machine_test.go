package machine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

// mgmt is the management cluster; workloadEnv stands in for the workload
// cluster whose Nodes the Machines find.
var mgmt, workloadEnv *testenv.Env

func TestMain(m *testing.M) { fixture.MainWithControllers(m, &mgmt, &workloadEnv) }

func machineCheck(t *testing.T, key client.ObjectKey, check func(*clusterv1.Machine) string) *clusterv1.Machine {
	t.Helper()
	m := &clusterv1.Machine{}
	fixture.Eventually(t, "machine "+key.Name, 30*time.Second, func(ctx context.Context) string {
		if err := mgmt.Client.Get(ctx, key, m); err != nil {
			return err.Error()
		}
		return check(m)
	})
	return m
}

// workloadCluster creates a Cluster whose control plane is initialized and
// whose kubeconfig reaches the workload plane.
func workloadCluster(t *testing.T, ns string) *clusterv1.Cluster {
	t.Helper()
	return workloadClusterWith(t, ns, fixture.KubeconfigSecret(t, workloadEnv, ns, "w"))
}

// workloadClusterWith is workloadCluster with the given kubeconfig Secret.
func workloadClusterWith(t *testing.T, ns string, kubeconfig *corev1.Secret) *clusterv1.Cluster {
	t.Helper()
	ctx := context.Background()
	cp := provider.ControlPlane.New(ns, "w", nil)
	c := fixture.NewCluster(ns, "w", fixture.ControlPlane(cp))
	fixture.Create(t, mgmt.Client, cp, c, kubeconfig)
	if err := provider.SetStatus(ctx, mgmt.Client, cp, map[string]any{"initialization": map[string]any{"controlPlaneInitialized": true}}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "cluster initialized", 30*time.Second, func(ctx context.Context) string {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err.Error()
		}
		if !ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false) {
			return "control plane not initialized yet"
		}
		return ""
	})
	return c
}

// runningMachine creates a Machine of the test provider with labels and
// taints, whose infrastructure reports providerID, and waits until the
// Machine has found its Node.
func runningMachine(t *testing.T, cluster *clusterv1.Cluster, name, providerID, nodeName string, labels map[string]string, taints []clusterv1.MachineTaint) *clusterv1.Machine {
	t.Helper()
	ctx := context.Background()
	ns := cluster.Namespace
	bootstrap := provider.BootstrapConfig.New(ns, name, nil)
	infra := provider.InfraMachine.New(ns, name, nil)
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster.Name,
			Version:           "v1.35.0",
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: provider.BootstrapConfig.Ref(name)},
			InfrastructureRef: provider.InfraMachine.Ref(name),
			Taints:            taints,
		},
	}
	fixture.Create(t, mgmt.Client, bootstrap, infra, m)
	if err := provider.SetStatus(ctx, mgmt.Client, bootstrap, map[string]any{
		"initialization": map[string]any{"dataSecretCreated": true}, "dataSecretName": name + "-bootstrap-data",
	}); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Patch(ctx, infra, client.RawPatch("application/merge-patch+json",
		[]byte(`{"spec":{"providerID":"`+providerID+`"}}`))); err != nil {
		t.Fatal(err)
	}
	if err := provider.SetStatus(ctx, mgmt.Client, infra, map[string]any{"initialization": map[string]any{"provisioned": true}}); err != nil {
		t.Fatal(err)
	}
	return machineCheck(t, client.ObjectKeyFromObject(m), func(m *clusterv1.Machine) string {
		return fixture.Unless(m.Status.NodeRef.Name == nodeName, "nodeRef "+m.Status.NodeRef.Name)
	})
}

func readyNode(name, providerID string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: providerID, Taints: []corev1.Taint{{Key: "admin.example.com/keep", Effect: corev1.TaintEffectNoSchedule}}},
	}
}

// setNodeStatus reports the Node's Ready condition as a kubelet would; a
// merge patch, since the Machine controller writes the Node too.
func setNodeStatus(t *testing.T, node *corev1.Node, ready corev1.ConditionStatus, reason string) {
	t.Helper()
	status := map[string]any{"status": map[string]any{
		"conditions": []any{map[string]any{"type": "Ready", "status": string(ready), "reason": reason,
			"lastHeartbeatTime": metav1.Now().UTC().Format(time.RFC3339), "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)}},
		"nodeInfo": map[string]any{"kubeletVersion": "v1.35.0", "osImage": "Capstan test", "machineID": "", "systemUUID": "", "bootID": "",
			"kernelVersion": "", "containerRuntimeVersion": "", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
	}}
	body, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	if err := workloadEnv.Client.Status().Patch(context.Background(), node, client.RawPatch("application/merge-patch+json", body)); err != nil {
		t.Fatal(err)
	}
}

func setNodeReady(t *testing.T, node *corev1.Node) {
	t.Helper()
	setNodeStatus(t, node, corev1.ConditionTrue, "KubeletReady")
}

func TestMachineLifecycle(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	cluster := workloadCluster(t, ns)

	bootstrap := provider.BootstrapConfig.New(ns, "m1", nil)
	infra := provider.InfraMachine.New(ns, "m1", nil)
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1", Labels: map[string]string{"node-role.kubernetes.io/worker": "", "app": "not-synced"}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster.Name,
			Version:           "v1.35.0",
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: provider.BootstrapConfig.Ref("m1")},
			InfrastructureRef: provider.InfraMachine.Ref("m1"),
			Taints: []clusterv1.MachineTaint{
				{Key: "capstan.dev/always", Value: "yes", Effect: corev1.TaintEffectNoSchedule, Propagation: clusterv1.MachineTaintPropagationAlways},
				{Key: "capstan.dev/once", Effect: corev1.TaintEffectNoSchedule, Propagation: clusterv1.MachineTaintPropagationOnInitialization},
			},
		},
	}
	for _, o := range []client.Object{bootstrap, infra, m} {
		if err := mgmt.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	key := client.ObjectKeyFromObject(m)
	machineCheck(t, key, func(m *clusterv1.Machine) string {
		if !strings.Contains(strings.Join(m.Finalizers, ","), clusterv1.MachineFinalizer) {
			return "no finalizer"
		}
		if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Kind != "Cluster" {
			return fmt.Sprintf("owner references %+v", m.OwnerReferences)
		}
		if m.Status.Phase != string(clusterv1.MachinePhasePending) {
			return "phase " + m.Status.Phase
		}
		return fixture.Condition(m.Status.Conditions, clusterv1.BootstrapConfigReadyCondition, metav1.ConditionFalse)
	})
	for _, o := range []*unstructured.Unstructured{bootstrap, infra} {
		fixture.Eventually(t, o.GetKind()+" owned by the Machine", 30*time.Second, func(ctx context.Context) string {
			if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return err.Error()
			}
			refs := o.GetOwnerReferences()
			if len(refs) != 1 || refs[0].Kind != "Machine" || !ptr.Deref(refs[0].Controller, false) {
				return fmt.Sprintf("owner references %+v", refs)
			}
			return ""
		})
	}

	// Bootstrap data appears.
	if err := provider.SetStatus(ctx, mgmt.Client, bootstrap, map[string]any{
		"initialization": map[string]any{"dataSecretCreated": true}, "dataSecretName": "m1-bootstrap-data",
	}); err != nil {
		t.Fatal(err)
	}
	machineCheck(t, key, func(m *clusterv1.Machine) string {
		if ptr.Deref(m.Spec.Bootstrap.DataSecretName, "") != "m1-bootstrap-data" {
			return "dataSecretName not copied"
		}
		if m.Status.Phase != string(clusterv1.MachinePhaseProvisioning) {
			return "phase " + m.Status.Phase
		}
		return fixture.Condition(m.Status.Conditions, clusterv1.BootstrapConfigReadyCondition, metav1.ConditionTrue)
	})

	// The infrastructure comes up.
	providerID := "test://" + ns + "/m1"
	if err := mgmt.Client.Patch(ctx, infra, client.RawPatch("application/merge-patch+json",
		[]byte(`{"spec":{"providerID":"`+providerID+`"}}`))); err != nil {
		t.Fatal(err)
	}
	if err := provider.SetStatus(ctx, mgmt.Client, infra, map[string]any{
		"initialization": map[string]any{"provisioned": true},
		"addresses":      []any{map[string]any{"type": "InternalIP", "address": "10.1.2.3"}},
		"failureDomain":  "fd-b",
	}); err != nil {
		t.Fatal(err)
	}
	machineCheck(t, key, func(m *clusterv1.Machine) string {
		if m.Spec.ProviderID != providerID || len(m.Status.Addresses) != 1 {
			return fmt.Sprintf("providerID %q addresses %+v", m.Spec.ProviderID, m.Status.Addresses)
		}
		if m.Status.FailureDomain != "fd-b" {
			return "status.failureDomain " + m.Status.FailureDomain
		}
		if m.Status.Phase != string(clusterv1.MachinePhaseProvisioned) {
			return "phase " + m.Status.Phase
		}
		return ""
	})

	// The Node registers in the workload cluster.
	node := readyNode("node-"+ns, providerID)
	if err := workloadEnv.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = workloadEnv.Client.Delete(context.Background(), node) })
	setNodeReady(t, node)
	got := machineCheck(t, key, func(m *clusterv1.Machine) string {
		if m.Status.NodeRef.Name != node.Name {
			return "nodeRef " + m.Status.NodeRef.Name
		}
		if m.Status.Phase != string(clusterv1.MachinePhaseRunning) {
			return "phase " + m.Status.Phase
		}
		if why := fixture.Condition(m.Status.Conditions, clusterv1.ReadyCondition, metav1.ConditionTrue); why != "" {
			return why
		}
		return fixture.Condition(m.Status.Conditions, clusterv1.AvailableCondition, metav1.ConditionTrue)
	})
	if got.Status.NodeInfo == nil || got.Status.NodeInfo.KubeletVersion != "v1.35.0" {
		t.Errorf("nodeInfo %+v", got.Status.NodeInfo)
	}
	fixture.Eventually(t, "node labelled, annotated and tainted", 30*time.Second, func(ctx context.Context) string {
		if err := workloadEnv.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return err.Error()
		}
		if _, ok := node.Labels["node-role.kubernetes.io/worker"]; !ok {
			return fmt.Sprintf("labels %v", node.Labels)
		}
		if _, ok := node.Labels["app"]; ok {
			return "a label outside the synced domains was copied"
		}
		if node.Annotations["cluster.x-k8s.io/machine"] != "m1" || node.Annotations["cluster.x-k8s.io/cluster-namespace"] != ns {
			return fmt.Sprintf("annotations %v", node.Annotations)
		}
		have := map[string]bool{}
		for _, t := range node.Spec.Taints {
			have[t.Key] = true
		}
		if !have["capstan.dev/always"] || !have["capstan.dev/once"] || !have["admin.example.com/keep"] {
			return fmt.Sprintf("taints %+v", node.Spec.Taints)
		}
		return ""
	})

	// The Node goes NotReady: the Machine says so.
	setNodeStatus(t, node, corev1.ConditionFalse, "KubeletNotReady")
	machineCheck(t, key, func(m *clusterv1.Machine) string {
		if why := fixture.Condition(m.Status.Conditions, clusterv1.NodeHealthyCondition, metav1.ConditionFalse); why != "" {
			return why
		}
		return fixture.Condition(m.Status.Conditions, clusterv1.ReadyCondition, metav1.ConditionFalse)
	})
	setNodeReady(t, node)

	// Deletion: a pre-drain hook holds it, then the node is drained and
	// everything goes.
	waitForServiceAccount(t, ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "on-" + ns},
		Spec: corev1.PodSpec{NodeName: node.Name, TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if err := workloadEnv.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	hook := clusterv1.PreDrainDeleteHookAnnotationPrefix + "/test"
	terminateHook := clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/test"
	if err := mgmt.Client.Patch(ctx, got, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+hook+`":"","`+terminateHook+`":""}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	var preDrainStart metav1.Time
	machineCheck(t, key, func(m *clusterv1.Machine) string {
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.DeletingCondition)
		if c == nil || !strings.Contains(c.Message, "pre-drain hooks") {
			return fmt.Sprintf("Deleting %+v", c)
		}
		if m.Status.Deletion == nil || m.Status.Deletion.WaitForPreDrainHookStartTime.IsZero() {
			return fmt.Sprintf("no waitForPreDrainHookStartTime in %+v", m.Status.Deletion)
		}
		preDrainStart = m.Status.Deletion.WaitForPreDrainHookStartTime
		return ""
	})
	if err := workloadEnv.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatalf("the pod was evicted while a pre-drain hook held the Machine: %v", err)
	}
	if err := mgmt.Client.Patch(ctx, got, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+hook+`":null}}}`))); err != nil {
		t.Fatal(err)
	}
	// Drained, the Machine waits for its pre-terminate hook, and says since when.
	machineCheck(t, key, func(m *clusterv1.Machine) string {
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.DeletingCondition)
		if c == nil || !strings.Contains(c.Message, "pre-terminate hooks") {
			return fmt.Sprintf("Deleting %+v", c)
		}
		d := m.Status.Deletion
		if d == nil || d.WaitForPreTerminateHookStartTime.IsZero() || d.NodeDrainStartTime.IsZero() {
			return fmt.Sprintf("deletion status %+v", d)
		}
		if !d.WaitForPreDrainHookStartTime.Equal(&preDrainStart) {
			return fmt.Sprintf("waitForPreDrainHookStartTime moved from %v to %v", preDrainStart, d.WaitForPreDrainHookStartTime)
		}
		return ""
	})
	if err := mgmt.Client.Patch(ctx, got, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+terminateHook+`":null}}}`))); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "machine gone", 30*time.Second, func(ctx context.Context) string {
		err := mgmt.Client.Get(ctx, key, &clusterv1.Machine{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		c := meta.FindStatusCondition(got.Status.Conditions, clusterv1.DeletingCondition)
		_ = mgmt.Client.Get(ctx, key, got)
		return fmt.Sprintf("still there: %v %+v", err, c)
	})
	for _, o := range []client.Object{pod, node} {
		if err := workloadEnv.Client.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s survived the Machine's deletion: %v", o, o.GetName(), err)
		}
	}
	for _, o := range []*unstructured.Unstructured{bootstrap, infra} {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%s survived the Machine's deletion: %v", o.GetKind(), err)
		}
	}
}

func waitForServiceAccount(t *testing.T, _ string) {
	t.Helper()
	fixture.Eventually(t, "default service account in the workload cluster", 30*time.Second, func(ctx context.Context) string {
		if err := workloadEnv.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{}); err != nil {
			return err.Error()
		}
		return ""
	})
}
