package machinepool_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
	"capstan.dev/capstan/internal/bench"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/providers/inmemory"
	"capstan.dev/capstan/internal/testenv"
	fx "capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// simulatedCluster starts the manager with every controller and the
// in-memory provider (no delays) in a namespace of its own, and creates
// cluster c0 (one control-plane machine, no workers) there. It returns the
// namespace, the Kubernetes version of the cluster and a client of its
// simulated workload cluster.
func simulatedCluster(t *testing.T) (string, string, client.Client) {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	ns := env.Namespace(t)
	mgr, err := manager.New(env.Config, manager.Options{MetricsAddr: "0", ProbeAddr: "0", AllowRestartInProcess: true,
		Namespace: ns, InMemory: &inmemory.Options{Delays: inmemory.NoDelays()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	objs, err := bench.Manifests(ns, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	version := ""
	for _, o := range objs[1:] { // the namespace exists
		if o.GetKind() == "KubeadmControlPlane" {
			version, _, _ = unstructured.NestedString(o.Object, "spec", "version")
		}
		fx.Create(t, env.Client, o)
	}
	var wl client.Client
	fx.Eventually(t, "the workload cluster answers", 90*time.Second, func(ctx context.Context) string {
		secret := &corev1.Secret{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "c0-kubeconfig"}, secret); err != nil {
			return fx.Reason(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
		if err != nil {
			return fx.Reason(err)
		}
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			return fx.Reason(err)
		}
		cluster := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "c0"}, cluster); err != nil {
			return fx.Reason(err)
		}
		wl = c
		return fx.Unless(ptr.Deref(cluster.Status.Initialization.ControlPlaneInitialized, false), "the control plane is not initialized")
	})
	return ns, version, wl
}

// createPool creates a MachinePool of c0 with an InMemoryMachinePool and a
// bootstrap data Secret of its own.
func createPool(t *testing.T, ns, name, version string, replicas int32) *clusterv1.MachinePool {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-bootstrap"},
		Data:       map[string][]byte{"value": []byte("#cloud-config\n"), "format": []byte("cloud-config")},
	}
	pool := &inmemoryv1.InMemoryMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	mp := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: "c0",
			Replicas:    ptr.To(replicas),
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool-member": "yes"}},
				Spec: clusterv1.MachineSpec{
					ClusterName:       "c0",
					Version:           version,
					Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(secret.Name)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: inmemoryv1.GroupVersion.Group, Kind: "InMemoryMachinePool", Name: name},
				},
			},
		},
	}
	fx.Create(t, env.Client, secret, pool, mp)
	return mp
}

// poolState says why the pool is not yet at n ready instances, each with a
// Machine of its own (labelled with the pool, with a Node) and a Node in
// the workload cluster listed in status.nodeRefs.
func poolState(ctx context.Context, wl client.Client, mp *clusterv1.MachinePool, n int) string {
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
		return fx.Reason(err)
	}
	st := mp.Status
	switch {
	case len(mp.Spec.ProviderIDList) != n:
		return fmt.Sprintf("spec.providerIDList %v, want %d entries", mp.Spec.ProviderIDList, n)
	case len(st.NodeRefs) != n:
		return fmt.Sprintf("status.nodeRefs %v, want %d", st.NodeRefs, n)
	case ptr.Deref(st.Replicas, -1) != int32(n) || ptr.Deref(st.ReadyReplicas, -1) != int32(n) || ptr.Deref(st.AvailableReplicas, -1) != int32(n):
		return fmt.Sprintf("replicas %v ready %v available %v, want %d", ptr.Deref(st.Replicas, -1), ptr.Deref(st.ReadyReplicas, -1), ptr.Deref(st.AvailableReplicas, -1), n)
	case st.Phase != string(clusterv1.MachinePoolPhaseRunning):
		return "phase " + st.Phase
	}
	machines, why := poolMachines(ctx, mp)
	if why != "" {
		return why
	}
	if len(machines) != n {
		return fmt.Sprintf("%d Machines, want %d", len(machines), n)
	}
	ids := map[string]bool{}
	for _, id := range mp.Spec.ProviderIDList {
		ids[id] = true
	}
	for _, m := range machines {
		labelled := true
		for k, v := range mp.Spec.Template.Labels {
			labelled = labelled && m.Labels[k] == v
		}
		if m.Status.NodeRef.Name == "" || !ids[m.Spec.ProviderID] || !labelled || !metav1.IsControlledBy(&m, mp) {
			return fmt.Sprintf("Machine %s: node %q, providerID %q, labels %v, owners %v", m.Name, m.Status.NodeRef.Name, m.Spec.ProviderID, m.Labels, m.OwnerReferences)
		}
	}
	nodes := poolNodes(ctx, wl, mp.Name)
	if len(nodes) != n {
		return fmt.Sprintf("workload Nodes of the pool %v, want %d", nodes, n)
	}
	refs := make([]string, 0, n)
	for _, r := range st.NodeRefs {
		refs = append(refs, r.Name)
	}
	sort.Strings(refs)
	if strings.Join(refs, ",") != strings.Join(nodes, ",") {
		return fmt.Sprintf("nodeRefs %v, Nodes %v", refs, nodes)
	}
	return ""
}

func poolMachines(ctx context.Context, mp *clusterv1.MachinePool) ([]clusterv1.Machine, string) {
	list := &clusterv1.MachineList{}
	if err := env.Client.List(ctx, list, client.InNamespace(mp.Namespace), client.MatchingLabels{clusterv1.MachinePoolNameLabel: mp.Name}); err != nil {
		return nil, fx.Reason(err)
	}
	var out []clusterv1.Machine
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() {
			out = append(out, m)
		}
	}
	return out, ""
}

// poolNodes names the workload cluster's Nodes of the pool's instances
// (named after their Machines, which are named pool-xxxxx).
func poolNodes(ctx context.Context, wl client.Client, pool string) []string {
	nodes := &corev1.NodeList{}
	if err := wl.List(ctx, nodes); err != nil {
		return []string{"error: " + err.Error()}
	}
	var out []string
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, pool+"-") {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

func scale(t *testing.T, mp *clusterv1.MachinePool, n int32) {
	t.Helper()
	update(t, mp, func(mp *clusterv1.MachinePool) { mp.Spec.Replicas = ptr.To(n) })
}

func update(t *testing.T, mp *clusterv1.MachinePool, change func(*clusterv1.MachinePool)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(mp), mp); err != nil {
			return err
		}
		change(mp)
		return env.Client.Update(context.Background(), mp)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func conditionIs(obj interface{ GetConditions() []metav1.Condition }, t string, status metav1.ConditionStatus, reason string) string {
	c := conditions.Get(obj, t)
	if c == nil {
		return t + " not set"
	}
	return fx.Unless(c.Status == status && (reason == "" || c.Reason == reason),
		fmt.Sprintf("%s is %s/%s (%s), want %s/%s", t, c.Status, c.Reason, c.Message, status, reason))
}

// TestMachinePoolInMemory runs a MachinePool of in-memory instances through
// its life: it comes up with a Machine and a Node per instance, scales up
// and down (the Nodes of removed instances leave the workload cluster),
// replaces a Machine marked for remediation, holds still while paused, and
// leaves nothing behind when deleted.
func TestMachinePoolInMemory(t *testing.T) {
	ns, version, wl := simulatedCluster(t)
	mp := createPool(t, ns, "pool", version, 2)

	fx.Eventually(t, "two instances up", 60*time.Second, func(ctx context.Context) string {
		return poolState(ctx, wl, mp, 2)
	})
	for _, c := range []struct {
		t      string
		status metav1.ConditionStatus
		reason string
	}{
		{clusterv1.AvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason},
		{clusterv1.BootstrapConfigReadyCondition, metav1.ConditionTrue, "DataSecretProvided"},
		{clusterv1.InfrastructureReadyCondition, metav1.ConditionTrue, ""},
		{clusterv1.MachinesReadyCondition, metav1.ConditionTrue, clusterv1.ReadyReason},
		{clusterv1.MachinesUpToDateCondition, metav1.ConditionTrue, clusterv1.UpToDateReason},
		{clusterv1.ScalingUpCondition, metav1.ConditionFalse, clusterv1.NotScalingUpReason},
		{clusterv1.ScalingDownCondition, metav1.ConditionFalse, clusterv1.NotScalingDownReason},
		{clusterv1.RemediatingCondition, metav1.ConditionFalse, clusterv1.NotRemediatingReason},
		{clusterv1.DeletingCondition, metav1.ConditionFalse, clusterv1.NotDeletingReason},
		{clusterv1.PausedCondition, metav1.ConditionFalse, clusterv1.NotPausedReason},
	} {
		fx.Eventually(t, "condition "+c.t, 10*time.Second, func(ctx context.Context) string {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
				return fx.Reason(err)
			}
			return conditionIs(mp, c.t, c.status, c.reason)
		})
	}
	if !slices.Contains(mp.Finalizers, clusterv1.MachinePoolFinalizer) || mp.Labels[clusterv1.ClusterNameLabel] != "c0" {
		t.Errorf("finalizers %v, labels %v", mp.Finalizers, mp.Labels)
	}
	if len(mp.Status.Versions) != 1 || mp.Status.Versions[0] != (clusterv1.StatusVersion{Version: version, Replicas: 2}) {
		t.Errorf("status.versions %+v", mp.Status.Versions)
	}
	pool := &inmemoryv1.InMemoryMachinePool{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "pool"}, pool); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(pool, mp) {
		t.Errorf("the MachinePool does not control its InMemoryMachinePool: %v", pool.OwnerReferences)
	}

	scale(t, mp, 4)
	fx.Eventually(t, "scaled up to four", 60*time.Second, func(ctx context.Context) string { return poolState(ctx, wl, mp, 4) })

	scale(t, mp, 1)
	fx.Eventually(t, "scaled down to one", 60*time.Second, func(ctx context.Context) string { return poolState(ctx, wl, mp, 1) })

	// A Machine a MachineHealthCheck marked for remediation is deleted; the
	// provider replaces its instance.
	machines, _ := poolMachines(context.Background(), mp)
	sick := machines[0]
	if err := conditions.Apply(context.Background(), env.Client, &sick, clusterv1.GroupVersion.WithKind(clusterv1.MachineKind), metav1.Condition{
		Type: clusterv1.OwnerRemediatedCondition, Status: metav1.ConditionFalse, Reason: "WaitingForRemediation", Message: "test: the node is unhealthy",
	}, "test-machinehealthcheck", time.Now()); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "the remediated Machine replaced", 60*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&sick), &clusterv1.Machine{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("Machine %s still there (%v)", sick.Name, err)
		}
		return poolState(ctx, wl, mp, 1)
	})

	// Paused, the pool acts on nothing: a scale-up waits for the pause to end.
	update(t, mp, func(mp *clusterv1.MachinePool) {
		mp.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	})
	fx.Eventually(t, "paused", 10*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
			return fx.Reason(err)
		}
		return conditionIs(mp, clusterv1.PausedCondition, metav1.ConditionTrue, clusterv1.PausedReason)
	})
	scale(t, mp, 2)
	fx.Consistently(t, "a paused pool keeps its size", 3*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
			return fx.Reason(err)
		}
		machines, why := poolMachines(ctx, mp)
		if why != "" {
			return why
		}
		return fx.Unless(len(mp.Spec.ProviderIDList) == 1 && len(machines) == 1,
			fmt.Sprintf("providerIDList %v, %d Machines", mp.Spec.ProviderIDList, len(machines)))
	})
	update(t, mp, func(mp *clusterv1.MachinePool) { delete(mp.Annotations, clusterv1.PausedAnnotation) })
	fx.Eventually(t, "unpaused, scaled to two", 60*time.Second, func(ctx context.Context) string { return poolState(ctx, wl, mp, 2) })

	// Deleting the pool leaves nothing: no Machines, no InMemoryMachines,
	// no InMemoryMachinePool, no Nodes.
	if err := env.Client.Delete(context.Background(), mp); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "the pool and everything of it gone", 60*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), &clusterv1.MachinePool{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("MachinePool still there (%v)", err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), &inmemoryv1.InMemoryMachinePool{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("InMemoryMachinePool still there (%v)", err)
		}
		machines := &clusterv1.MachineList{}
		imms := &inmemoryv1.InMemoryMachineList{}
		sel := client.MatchingLabels{clusterv1.MachinePoolNameLabel: "pool"}
		if err := env.Client.List(ctx, machines, client.InNamespace(ns), sel); err != nil {
			return fx.Reason(err)
		}
		if err := env.Client.List(ctx, imms, client.InNamespace(ns), sel); err != nil {
			return fx.Reason(err)
		}
		if len(machines.Items)+len(imms.Items) > 0 {
			return fmt.Sprintf("%d Machines and %d InMemoryMachines left", len(machines.Items), len(imms.Items))
		}
		return fx.Unless(len(poolNodes(ctx, wl, "pool")) == 0, fmt.Sprintf("Nodes left: %v", poolNodes(ctx, wl, "pool")))
	})
}

// TestMachinePoolBootstrapConfig: a pool whose template points at a
// KubeadmConfig takes control of it, boots its instances from the data
// secret the config writes (one for the whole pool), and deletes the config
// with itself. Its size comes from the autoscaler's minimum.
func TestMachinePoolBootstrapConfig(t *testing.T) {
	ns, version, wl := simulatedCluster(t)
	cfg := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"},
		Spec: bootstrapv1.KubeadmConfigSpec{JoinConfiguration: bootstrapv1.JoinConfiguration{
			NodeRegistration: bootstrapv1.NodeRegistrationOptions{Name: "{{ ds.meta_data.local_hostname }}"},
		}},
	}
	pool := &inmemoryv1.InMemoryMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"}}
	mp := &clusterv1.MachinePool{
		// Without spec.replicas the autoscaler's minimum size is taken.
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers", Annotations: map[string]string{
			clusterv1.AutoscalerMinSizeAnnotation: "2", clusterv1.AutoscalerMaxSizeAnnotation: "5",
		}},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: "c0",
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName:       "c0",
				Version:           version,
				Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: cfg.Name}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: inmemoryv1.GroupVersion.Group, Kind: "InMemoryMachinePool", Name: pool.Name},
			}},
		},
	}
	fx.Create(t, env.Client, cfg, pool, mp)

	fx.Eventually(t, "two instances up from the config's data", 60*time.Second, func(ctx context.Context) string {
		return poolState(ctx, wl, mp, 2)
	})
	if ptr.Deref(mp.Spec.Replicas, 0) != 2 {
		t.Errorf("spec.replicas %v, want the autoscaler's minimum 2", mp.Spec.Replicas)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cfg), cfg); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(cfg, mp) || cfg.Status.DataSecretName == "" || ptr.Deref(mp.Spec.Template.Spec.Bootstrap.DataSecretName, "") != cfg.Status.DataSecretName {
		t.Errorf("config owners %v, data secret %q; pool's dataSecretName %v", cfg.OwnerReferences, cfg.Status.DataSecretName, mp.Spec.Template.Spec.Bootstrap.DataSecretName)
	}
	if why := conditionIs(mp, clusterv1.BootstrapConfigReadyCondition, metav1.ConditionTrue, ""); why != "" {
		t.Error(why)
	}
	machines, _ := poolMachines(context.Background(), mp)
	for _, m := range machines {
		if ptr.Deref(m.Spec.Bootstrap.DataSecretName, "") != cfg.Status.DataSecretName {
			t.Errorf("Machine %s boots from %v, want the pool's %s", m.Name, m.Spec.Bootstrap.DataSecretName, cfg.Status.DataSecretName)
		}
	}

	if err := env.Client.Delete(context.Background(), mp); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "the pool and its config gone", 60*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), &clusterv1.MachinePool{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("MachinePool still there (%v)", err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), &bootstrapv1.KubeadmConfig{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("KubeadmConfig still there (%v)", err)
		}
		return fx.Unless(len(poolNodes(ctx, wl, "workers")) == 0, fmt.Sprintf("Nodes left: %v", poolNodes(ctx, wl, "workers")))
	})
}

// TestMachinePoolWithoutMachines: a provider that makes no infrastructure
// machines (the test plays it) only reports provider IDs; the pool finds
// their Nodes, counts them, creates no Machines, and when deleted drains
// and deletes the Nodes after its infrastructure pool is gone.
func TestMachinePoolWithoutMachines(t *testing.T) {
	ns, version, wl := simulatedCluster(t)
	ctx := context.Background()
	if err := provider.Install(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	ids := []any{"test://ext-a", "test://ext-b"}
	for _, name := range []string{"ext-a", "ext-b"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "test://" + name}}
		if err := wl.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		node.Status = corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: version},
		}
		if err := wl.Status().Update(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	infra := provider.InfraMachinePool.New(ns, "ext", map[string]any{"providerIDList": ids})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext-bootstrap"}, Data: map[string][]byte{"value": []byte("#cloud-config\n")}}
	mp := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext"},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: "c0",
			Replicas:    ptr.To[int32](2),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName:       "c0",
				Version:           version,
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(secret.Name)},
				InfrastructureRef: provider.InfraMachinePool.Ref("ext"),
			}},
		},
	}
	fx.Create(t, env.Client, secret, infra, mp)
	if err := provider.SetStatus(ctx, env.Client, infra, map[string]any{
		"initialization": map[string]any{"provisioned": true}, "replicas": int64(2),
	}); err != nil {
		t.Fatal(err)
	}

	fx.Eventually(t, "the pool's Nodes found", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
			return fx.Reason(err)
		}
		st := mp.Status
		var refs []string
		for _, r := range st.NodeRefs {
			refs = append(refs, r.Name)
		}
		if strings.Join(refs, ",") != "ext-a,ext-b" || ptr.Deref(st.ReadyReplicas, 0) != 2 || ptr.Deref(st.AvailableReplicas, 0) != 2 ||
			ptr.Deref(st.UpToDateReplicas, 0) != 2 || st.Phase != string(clusterv1.MachinePoolPhaseRunning) {
			return fmt.Sprintf("nodeRefs %v, ready %v, available %v, up to date %v, phase %s", refs,
				ptr.Deref(st.ReadyReplicas, 0), ptr.Deref(st.AvailableReplicas, 0), ptr.Deref(st.UpToDateReplicas, 0), st.Phase)
		}
		if why := conditionIs(mp, clusterv1.MachinesReadyCondition, metav1.ConditionTrue, clusterv1.ReadyReason); why != "" {
			return why
		}
		return conditionIs(mp, clusterv1.AvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason)
	})
	if machines, _ := poolMachines(ctx, mp); len(machines) != 0 {
		t.Errorf("Machines made for a provider without infrastructure machines: %d", len(machines))
	}

	// One Node stops being ready: the pool says so.
	node := &corev1.Node{}
	if err := wl.Get(ctx, client.ObjectKey{Name: "ext-b"}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions[0].Status = corev1.ConditionFalse
	if err := wl.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "a Node not ready counted", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
			return fx.Reason(err)
		}
		if ptr.Deref(mp.Status.ReadyReplicas, 0) != 1 {
			return fmt.Sprintf("readyReplicas %v", ptr.Deref(mp.Status.ReadyReplicas, 0))
		}
		return conditionIs(mp, clusterv1.MachinesReadyCondition, metav1.ConditionFalse, clusterv1.NotReadyReason)
	})

	if err := env.Client.Delete(ctx, mp); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "the pool, its infrastructure and its Nodes gone", 60*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), &clusterv1.MachinePool{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("MachinePool still there (%v)", err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(infra), infra.DeepCopy()); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("TestMachinePool still there (%v)", err)
		}
		nodes := &corev1.NodeList{}
		if err := wl.List(ctx, nodes); err != nil {
			return fx.Reason(err)
		}
		for _, n := range nodes.Items {
			if strings.HasPrefix(n.Name, "ext-") {
				return "Node " + n.Name + " still there"
			}
		}
		return ""
	})
}

// TestClusterDeletionTakesMachinePools: deleting a Cluster deletes its
// MachinePools with its other workers, and with them their Machines,
// instances and infrastructure pools, before the control plane goes.
func TestClusterDeletionTakesMachinePools(t *testing.T) {
	ns, version, wl := simulatedCluster(t)
	mp := createPool(t, ns, "pool", version, 1)
	fx.Eventually(t, "one instance up", 60*time.Second, func(ctx context.Context) string { return poolState(ctx, wl, mp, 1) })
	fx.Eventually(t, "the Cluster counts the pool", 20*time.Second, func(ctx context.Context) string {
		c := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "c0"}, c); err != nil {
			return fx.Reason(err)
		}
		w := c.Status.Workers
		if w == nil || ptr.Deref(w.DesiredReplicas, 0) != 1 || ptr.Deref(w.Replicas, 0) != 1 {
			return fmt.Sprintf("workers %+v", w)
		}
		return conditionIs(c, clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason)
	})

	if err := env.Client.Delete(context.Background(), &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c0"}}); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "the Cluster and its pool gone", 90*time.Second, func(ctx context.Context) string {
		for _, list := range []client.ObjectList{&clusterv1.ClusterList{}, &clusterv1.MachinePoolList{}, &clusterv1.MachineList{},
			&inmemoryv1.InMemoryMachinePoolList{}, &inmemoryv1.InMemoryMachineList{}} {
			if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return fx.Reason(err)
			}
			if n := meta.LenList(list); n > 0 {
				return fmt.Sprintf("%d %T left", n, list)
			}
		}
		return ""
	})
}
