package interop

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Kubernetes versions of the in-memory cluster: the simulated machines take
// whatever the Machine says, so any two releases Capstan's control plane
// accepts as an upgrade will do.
const (
	memVersion      = "v1.35.0"
	memUpgradedTo   = "v1.35.1"
	memCluster      = "mem"
	memControlPlane = "mem-control-plane"
	memWorkers      = "mem-md-0"
	memNamespace    = "default"
)

// inMemoryClusterManifest is a cluster on the upstream in-memory provider
// written without ClusterClass, as a user would write it: Cluster,
// DevCluster, KubeadmControlPlane with a DevMachineTemplate, and a
// MachineDeployment with a KubeadmConfigTemplate and a DevMachineTemplate.
// The DevCluster carries an annotation because the provider fails on one
// that has none. The simulated start-up durations are short so that the test
// measures Capstan, not waiting.
func inMemoryClusterManifest() string {
	machine := `
      backend:
        inMemory:
          vm:
            provisioning:
              startupDuration: 2s
              startupJitter: "0.2"
          node:
            provisioning:
              startupDuration: 1s
              startupJitter: "0.2"
          apiServer:
            provisioning:
              startupDuration: 1s
              startupJitter: "0.2"
          etcd:
            provisioning:
              startupDuration: 1s
              startupJitter: "0.2"`
	nodeRegistration := `
          nodeRegistration:
            criSocket: unix:///var/run/containerd/containerd.sock
            kubeletExtraArgs:
            - name: eviction-hard
              value: nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%`
	return strings.NewReplacer("${MACHINE}", machine, "${NODE_REGISTRATION}", nodeRegistration).Replace(`
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: mem
  namespace: default
spec:
  clusterNetwork:
    pods:
      cidrBlocks: [192.168.0.0/16]
    services:
      cidrBlocks: [10.128.0.0/12]
    serviceDomain: cluster.local
  controlPlaneRef:
    apiGroup: controlplane.cluster.x-k8s.io
    kind: KubeadmControlPlane
    name: mem-control-plane
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: DevCluster
    name: mem
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevCluster
metadata:
  name: mem
  namespace: default
  annotations:
    interop.capstan.dev/purpose: upstream in-memory provider under Capstan
spec:
  backend:
    inMemory: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata:
  name: mem-control-plane
  namespace: default
spec:
  template:
    spec:${MACHINE}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata:
  name: mem-control-plane
  namespace: default
spec:
  replicas: 1
  version: v1.35.0
  machineTemplate:
    spec:
      infrastructureRef:
        apiGroup: infrastructure.cluster.x-k8s.io
        kind: DevMachineTemplate
        name: mem-control-plane
  kubeadmConfigSpec:
    clusterConfiguration:
      apiServer:
        certSANs: [localhost, 127.0.0.1]
    initConfiguration:${NODE_REGISTRATION}
    joinConfiguration:${NODE_REGISTRATION}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata:
  name: mem-md-0
  namespace: default
spec:
  template:
    spec:${MACHINE}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata:
  name: mem-md-0
  namespace: default
spec:
  template:
    spec:
      joinConfiguration:${NODE_REGISTRATION}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata:
  name: mem-md-0
  namespace: default
spec:
  clusterName: mem
  replicas: 2
  selector:
    matchLabels: {}
  template:
    spec:
      clusterName: mem
      version: v1.35.0
      bootstrap:
        configRef:
          apiGroup: bootstrap.cluster.x-k8s.io
          kind: KubeadmConfigTemplate
          name: mem-md-0
      infrastructureRef:
        apiGroup: infrastructure.cluster.x-k8s.io
        kind: DevMachineTemplate
        name: mem-md-0
`)
}

// devKinds are the provider's kinds a cluster without MachinePools uses.
var devKinds = []string{"DevCluster", "DevMachine", "DevMachineTemplate"}

// TestUpstreamInMemoryProvider runs upstream's docker provider binary with
// its in-memory backend as the infrastructure provider of a Capstan plane:
// Capstan's core, kubeadm bootstrap and KubeadmControlPlane manage a cluster
// of DevCluster and DevMachines through the v1beta2 contract alone. The
// cluster becomes Available; the control plane scales 1 -> 3 with etcd
// reported healthy with three members; the workers scale 2 -> 3; the control
// plane and then the workers upgrade a patch release and settle with every
// Machine UpToDate; deleting the Cluster leaves no object and no simulated
// server behind.
func TestUpstreamInMemoryProvider(t *testing.T) {
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	ctx := context.Background()

	p := newPlane(t)
	p.up()
	c := p.client()
	t.Cleanup(func() {
		keepLog(t, "capstan.log", p.log())
		if t.Failed() {
			t.Logf("capstan log, last lines:\n%s", tail(p.log(), 80))
			dumpCluster(t, c)
		}
	})
	in := installProvider(t, p)
	pr := startProvider(t, p, in)
	step("plane up, provider installed (capstan provider install), provider ready")

	applyManifest(t, c, inMemoryClusterManifest())

	// The cluster comes up: 1 control-plane Machine, 2 workers.
	waitForCluster(t, c, pr, 1, memVersion, 2, memVersion, 5*time.Minute)
	step("cluster Available: control plane 1, workers 2")
	devCluster := getUnstructured(t, c, "DevCluster", memCluster)
	if devCluster == nil {
		t.Fatal("the DevCluster is gone")
	}
	host, _, _ := unstructured.NestedString(devCluster.Object, "spec", "controlPlaneEndpoint", "host")
	port, _, _ := unstructured.NestedInt64(devCluster.Object, "spec", "controlPlaneEndpoint", "port")
	endpoint := net.JoinHostPort(host, fmt.Sprint(port))
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: memNamespace, Name: memCluster}, cl); err != nil {
		t.Fatal(err)
	}
	if got := net.JoinHostPort(cl.Spec.ControlPlaneEndpoint.Host, fmt.Sprint(cl.Spec.ControlPlaneEndpoint.Port)); got != endpoint {
		t.Errorf("the Cluster's controlPlaneEndpoint is %s, the DevCluster's %s", got, endpoint)
	}

	// Control plane 1 -> 3: three etcd members, all healthy.
	patchSpec(t, c, &controlplanev1.KubeadmControlPlane{}, memControlPlane, func(o client.Object) {
		o.(*controlplanev1.KubeadmControlPlane).Spec.Replicas = ptr.To[int32](3)
	})
	waitForCluster(t, c, pr, 3, memVersion, 2, memVersion, 6*time.Minute)
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: memNamespace, Name: memControlPlane}, kcp); err != nil {
		t.Fatal(err)
	}
	step("control plane scaled to 3, etcd healthy with 3 members: " + describeCondition(kcp.Status.Conditions, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition))

	// Workers 2 -> 3.
	patchSpec(t, c, &clusterv1.MachineDeployment{}, memWorkers, func(o client.Object) {
		o.(*clusterv1.MachineDeployment).Spec.Replicas = ptr.To[int32](3)
	})
	waitForCluster(t, c, pr, 3, memVersion, 3, memVersion, 5*time.Minute)
	step("workers scaled to 3")

	// Upgrade: the control plane first, then the workers.
	upgradeStart := time.Now().Add(-time.Second)
	patchSpec(t, c, &controlplanev1.KubeadmControlPlane{}, memControlPlane, func(o client.Object) {
		o.(*controlplanev1.KubeadmControlPlane).Spec.Version = memUpgradedTo
	})
	waitForCluster(t, c, pr, 3, memUpgradedTo, 3, memVersion, 10*time.Minute)
	for _, m := range machinesOf(t, c, clusterv1.MachineControlPlaneNameLabel, memControlPlane) {
		if !m.CreationTimestamp.After(upgradeStart) {
			t.Errorf("control-plane Machine %s predates the upgrade", m.Name)
		}
	}
	step("control plane upgraded to " + memUpgradedTo)
	upgradeStart = time.Now().Add(-time.Second)
	patchSpec(t, c, &clusterv1.MachineDeployment{}, memWorkers, func(o client.Object) {
		o.(*clusterv1.MachineDeployment).Spec.Template.Spec.Version = memUpgradedTo
	})
	waitForCluster(t, c, pr, 3, memUpgradedTo, 3, memUpgradedTo, 10*time.Minute)
	for _, m := range machinesOf(t, c, clusterv1.MachineDeploymentNameLabel, memWorkers) {
		if !m.CreationTimestamp.After(upgradeStart) {
			t.Errorf("worker Machine %s predates the upgrade", m.Name)
		}
	}
	step("workers upgraded to " + memUpgradedTo)

	// Delete the Cluster: nothing of it stays, in the plane or in the
	// provider.
	if err := c.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Cluster is gone", 5*time.Minute, func() string {
		pr.running(t)
		if err := c.Get(ctx, client.ObjectKeyFromObject(cl), &clusterv1.Cluster{}); err == nil {
			return "Cluster still exists: " + strings.Join(leftovers(t, c), ", ")
		} else if client.IgnoreNotFound(err) != nil {
			return err.Error()
		}
		return ""
	})
	eventually(t, "nothing of the cluster is left", 2*time.Minute, func() string {
		if left := leftovers(t, c); len(left) > 0 {
			return "left behind: " + strings.Join(left, ", ")
		}
		return ""
	})
	eventually(t, "the provider simulates nothing of the cluster", time.Minute, func() string {
		sc, err := simulated(memNamespace, memCluster)
		if err != nil {
			return err.Error()
		}
		if sc != nil {
			return fmt.Sprintf("the provider still simulates the cluster: %+v", *sc)
		}
		l, err := listeners()
		if err != nil {
			return err.Error()
		}
		if len(l) > 0 {
			return fmt.Sprintf("the provider still has listeners %v", l)
		}
		if conn, err := net.DialTimeout("tcp", endpoint, time.Second); err == nil {
			conn.Close()
			return "the simulated API server still answers on " + endpoint
		}
		return ""
	})
	step("Cluster deleted, nothing left")
}

// waitForCluster waits until the cluster is Available with the control plane
// at cpReplicas of cpVersion (etcd healthy with one member per Machine) and
// the workers at workerReplicas of workerVersion, every Machine Running,
// with a Ready node, UpToDate and none being deleted.
func waitForCluster(t testing.TB, c client.Client, pr *provider, cpReplicas int, cpVersion string, workerReplicas int, workerVersion string, timeout time.Duration) {
	t.Helper()
	what := fmt.Sprintf("control plane %d x %s, workers %d x %s", cpReplicas, cpVersion, workerReplicas, workerVersion)
	last := ""
	eventually(t, what, timeout, func() string {
		pr.running(t)
		msg := clusterState(t, c, cpReplicas, cpVersion, workerReplicas, workerVersion)
		if msg != last && msg != "" {
			t.Logf("waiting for %s: %s", what, msg)
			last = msg
		}
		return msg
	})
}

func clusterState(t testing.TB, c client.Client, cpReplicas int, cpVersion string, workerReplicas int, workerVersion string) string {
	ctx := context.Background()
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: memNamespace, Name: memCluster}, cl); err != nil {
		return err.Error()
	}
	for _, cond := range []string{clusterv1.ClusterInfrastructureReadyCondition, clusterv1.ClusterControlPlaneInitializedCondition,
		clusterv1.ClusterControlPlaneAvailableCondition, clusterv1.ClusterWorkersAvailableCondition, clusterv1.ClusterAvailableCondition} {
		if !meta.IsStatusConditionTrue(cl.Status.Conditions, cond) {
			return "Cluster " + describeCondition(cl.Status.Conditions, cond)
		}
	}
	if !ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false) || !ptr.Deref(cl.Status.Initialization.ControlPlaneInitialized, false) {
		return fmt.Sprintf("Cluster initialization %+v", cl.Status.Initialization)
	}

	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: memNamespace, Name: memControlPlane}, kcp); err != nil {
		return err.Error()
	}
	if kcp.Status.ObservedGeneration != kcp.Generation {
		return fmt.Sprintf("KubeadmControlPlane observed generation %d of %d", kcp.Status.ObservedGeneration, kcp.Generation)
	}
	want := ptr.To(int32(cpReplicas))
	for name, got := range map[string]*int32{"replicas": kcp.Status.Replicas, "readyReplicas": kcp.Status.ReadyReplicas,
		"availableReplicas": kcp.Status.AvailableReplicas, "upToDateReplicas": kcp.Status.UpToDateReplicas} {
		if ptr.Deref(got, -1) != *want {
			return fmt.Sprintf("KubeadmControlPlane status.%s %d, want %d", name, ptr.Deref(got, -1), *want)
		}
	}
	if kcp.Status.Version != cpVersion {
		return fmt.Sprintf("KubeadmControlPlane status.version %q, want %s", kcp.Status.Version, cpVersion)
	}
	for _, cond := range []string{controlplanev1.KubeadmControlPlaneAvailableCondition, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition,
		controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition, controlplanev1.KubeadmControlPlaneMachinesUpToDateCondition} {
		if !meta.IsStatusConditionTrue(kcp.Status.Conditions, cond) {
			return "KubeadmControlPlane " + describeCondition(kcp.Status.Conditions, cond)
		}
	}

	md := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: memNamespace, Name: memWorkers}, md); err != nil {
		return err.Error()
	}
	if md.Status.ObservedGeneration != md.Generation {
		return fmt.Sprintf("MachineDeployment observed generation %d of %d", md.Status.ObservedGeneration, md.Generation)
	}
	want = ptr.To(int32(workerReplicas))
	for name, got := range map[string]*int32{"replicas": md.Status.Replicas, "readyReplicas": md.Status.ReadyReplicas,
		"availableReplicas": md.Status.AvailableReplicas, "upToDateReplicas": md.Status.UpToDateReplicas} {
		if ptr.Deref(got, -1) != *want {
			return fmt.Sprintf("MachineDeployment status.%s %d, want %d", name, ptr.Deref(got, -1), *want)
		}
	}

	// Every Machine, as Capstan reports it and as the provider made it.
	machines := clusterMachines(t, c, memCluster)
	cp, workers := 0, 0
	var cpNodes []string
	for _, m := range machines {
		version := workerVersion
		if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
			cp++
			version = cpVersion
			cpNodes = append(cpNodes, m.Status.NodeRef.Name)
		} else {
			workers++
		}
		switch {
		case !m.DeletionTimestamp.IsZero():
			return "Machine " + m.Name + " is being deleted"
		case m.Spec.Version != version:
			return fmt.Sprintf("Machine %s is at %s, want %s", m.Name, m.Spec.Version, version)
		case m.Status.Phase != string(clusterv1.MachinePhaseRunning):
			return fmt.Sprintf("Machine %s is %s", m.Name, m.Status.Phase)
		case !strings.HasPrefix(m.Spec.ProviderID, "in-memory://"):
			return fmt.Sprintf("Machine %s has providerID %q", m.Name, m.Spec.ProviderID)
		case m.Status.NodeRef.Name == "":
			return "Machine " + m.Name + " has no node"
		case m.Status.NodeInfo == nil || m.Status.NodeInfo.KubeletVersion != version:
			return fmt.Sprintf("Machine %s: node info %+v, want kubelet %s", m.Name, m.Status.NodeInfo, version)
		}
		for _, cond := range []string{clusterv1.MachineInfrastructureReadyCondition, clusterv1.MachineBootstrapConfigReadyCondition,
			clusterv1.MachineNodeReadyCondition, clusterv1.MachineReadyCondition, clusterv1.MachineAvailableCondition, clusterv1.MachineUpToDateCondition} {
			if !meta.IsStatusConditionTrue(m.Status.Conditions, cond) {
				return "Machine " + m.Name + " " + describeCondition(m.Status.Conditions, cond)
			}
		}
		dm := getUnstructured(t, c, "DevMachine", m.Spec.InfrastructureRef.Name)
		if dm == nil {
			return "Machine " + m.Name + " has no DevMachine " + m.Spec.InfrastructureRef.Name
		}
		if id, _, _ := unstructured.NestedString(dm.Object, "spec", "providerID"); id != m.Spec.ProviderID {
			return fmt.Sprintf("DevMachine %s has providerID %q, its Machine %q", dm.GetName(), id, m.Spec.ProviderID)
		}
		kc := &bootstrapv1.KubeadmConfig{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: memNamespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, kc); err != nil {
			return fmt.Sprintf("Machine %s: KubeadmConfig: %v", m.Name, err)
		}
		if kc.Status.DataSecretName == "" || ptr.Deref(m.Spec.Bootstrap.DataSecretName, "") != kc.Status.DataSecretName {
			return fmt.Sprintf("Machine %s: bootstrap data secret %q, the KubeadmConfig's %q", m.Name, ptr.Deref(m.Spec.Bootstrap.DataSecretName, ""), kc.Status.DataSecretName)
		}
	}
	if cp != cpReplicas || workers != workerReplicas {
		return fmt.Sprintf("%d control-plane and %d worker Machines, want %d and %d", cp, workers, cpReplicas, workerReplicas)
	}

	// etcd: the simulated cluster has one member per control-plane
	// Machine, each with an API server, and the workload cluster's etcd
	// Pods say the same.
	sc, err := simulated(memNamespace, memCluster)
	if err != nil || sc == nil {
		return fmt.Sprintf("the provider does not report the cluster (%v)", err)
	}
	var wantMembers, wantAPIServers []string
	for _, n := range cpNodes {
		wantMembers = append(wantMembers, "etcd-"+n)
		wantAPIServers = append(wantAPIServers, "kube-apiserver-"+n)
	}
	slices.Sort(wantMembers)
	slices.Sort(wantAPIServers)
	if !slices.Equal(sc.EtcdMembers, wantMembers) || !slices.Equal(sc.APIServers, wantAPIServers) {
		return fmt.Sprintf("the provider simulates etcd members %v and API servers %v, want %v and %v", sc.EtcdMembers, sc.APIServers, wantMembers, wantAPIServers)
	}
	if msg := workloadEtcdPods(t, c, wantMembers); msg != "" {
		return msg
	}
	return ""
}

// workloadEtcdPods checks, through the kubeconfig Capstan wrote, that the
// workload cluster's etcd Pods are exactly want and none is marked removed
// from the etcd cluster (the in-memory etcd's MemberRemove leaves that mark).
func workloadEtcdPods(t testing.TB, c client.Client, want []string) string {
	ctx := context.Background()
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: memNamespace, Name: memCluster + "-kubeconfig"}, s); err != nil {
		return "kubeconfig secret: " + err.Error()
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["value"])
	if err != nil {
		return "kubeconfig secret: " + err.Error()
	}
	cfg.Timeout = 10 * time.Second
	wc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return "workload client: " + err.Error()
	}
	pods := &corev1.PodList{}
	if err := wc.List(ctx, pods, client.InNamespace(metav1.NamespaceSystem), client.MatchingLabels{"component": "etcd"}); err != nil {
		return "listing the workload cluster's etcd Pods: " + err.Error()
	}
	var got []string
	for _, p := range pods.Items {
		for k := range p.Annotations {
			if strings.Contains(k, "member-removed") {
				return "etcd Pod " + p.Name + " is marked removed from etcd"
			}
		}
		got = append(got, p.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return fmt.Sprintf("the workload cluster's etcd Pods are %v, want %v", got, want)
	}
	return ""
}

func describeCondition(conds []metav1.Condition, t string) string {
	c := meta.FindStatusCondition(conds, t)
	if c == nil {
		return t + " not reported"
	}
	return fmt.Sprintf("%s=%s (%s) %s", t, c.Status, c.Reason, c.Message)
}

// machinesOf lists the Machines labelled label=value.
func machinesOf(t testing.TB, c client.Client, label, value string) []clusterv1.Machine {
	t.Helper()
	list := &clusterv1.MachineList{}
	if err := c.List(context.Background(), list, client.InNamespace(memNamespace), client.MatchingLabels{label: value}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// patchSpec changes an object by a merge patch of what change did to it.
func patchSpec(t testing.TB, c client.Client, obj client.Object, name string, change func(client.Object)) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: memNamespace, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	before := obj.DeepCopyObject().(client.Object)
	change(obj)
	if err := c.Patch(context.Background(), obj, client.MergeFrom(before)); err != nil {
		t.Fatalf("patching %s: %v", name, err)
	}
}

// getUnstructured reads one of the provider's objects; nil when absent.
func getUnstructured(t testing.TB, c client.Client, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk("infrastructure.cluster.x-k8s.io", "v1beta2", kind))
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: memNamespace, Name: name}, u); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		t.Fatal(err)
	}
	return u
}

// leftovers lists "Kind/name" of everything in the namespace that belongs
// to the cluster: Cluster API's objects, the provider's and the cluster's
// Secrets.
func leftovers(t testing.TB, c client.Client) []string {
	t.Helper()
	kinds := []struct{ group, version, kind string }{
		{"cluster.x-k8s.io", "v1beta2", "Cluster"},
		{"cluster.x-k8s.io", "v1beta2", "MachineDeployment"},
		{"cluster.x-k8s.io", "v1beta2", "MachineSet"},
		{"cluster.x-k8s.io", "v1beta2", "Machine"},
		{"controlplane.cluster.x-k8s.io", "v1beta2", "KubeadmControlPlane"},
		{"bootstrap.cluster.x-k8s.io", "v1beta2", "KubeadmConfig"},
		{"bootstrap.cluster.x-k8s.io", "v1beta2", "KubeadmConfigTemplate"},
		{"", "v1", "Secret"},
	}
	for _, k := range devKinds {
		kinds = append(kinds, struct{ group, version, kind string }{"infrastructure.cluster.x-k8s.io", "v1beta2", k})
	}
	var out []string
	for _, k := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk(k.group, k.version, k.kind+"List"))
		if err := c.List(context.Background(), list, client.InNamespace(memNamespace)); err != nil {
			t.Fatalf("listing %s: %v", k.kind, err)
		}
		for _, o := range list.Items {
			if k.kind == "Secret" && o.GetLabels()[clusterv1.ClusterNameLabel] != memCluster && !strings.HasPrefix(o.GetName(), memCluster+"-") {
				continue
			}
			out = append(out, k.kind+"/"+o.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// dumpCluster logs the cluster's objects' conditions when the test failed.
func dumpCluster(t testing.TB, c client.Client) {
	ctx := context.Background()
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: memNamespace, Name: memControlPlane}, kcp); err == nil {
		t.Logf("KubeadmControlPlane: spec.replicas %d version %s; status %+v", ptr.Deref(kcp.Spec.Replicas, -1), kcp.Spec.Version, kcp.Status)
	}
	md := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: memNamespace, Name: memWorkers}, md); err == nil {
		t.Logf("MachineDeployment: status %+v", md.Status)
	}
	for _, m := range clusterMachines(t, c, memCluster) {
		t.Logf("Machine %s: phase %s, version %s, node %q, deleting %v, conditions %+v", m.Name, m.Status.Phase, m.Spec.Version, m.Status.NodeRef.Name, !m.DeletionTimestamp.IsZero(), m.Status.Conditions)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk("infrastructure.cluster.x-k8s.io", "v1beta2", "DevMachineList"))
	if err := c.List(ctx, list, client.InNamespace(memNamespace)); err == nil {
		for _, o := range list.Items {
			conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
			t.Logf("DevMachine %s: conditions %v", o.GetName(), conds)
		}
	}
	if sc, err := simulated(memNamespace, memCluster); err == nil && sc != nil {
		t.Logf("the provider simulates: %+v", *sc)
	}
}
