package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/providers/inmemory"
	"capstan.dev/capstan/test/fixture"
)

// The in-memory topology flavor, as docs/clusterclass-quickstart.md uses it,
// with Capstan's controllers running: the generated class and Cluster come
// up; the machineBootDelay variable reaches the InMemoryCluster; scaling,
// a variable the workers' patch reads (their bootstrap template rotates and
// they roll) and an upgrade (control plane first) all go through
// spec.topology; deleting the Cluster leaves nothing but the class.
func TestTopologyFlavorLifecycle(t *testing.T) {
	isolateTemplateVariables(t)
	t.Setenv("MACHINE_BOOT_DELAY", "0s")
	fixture.SetLogger()
	ctx := context.Background()
	c := env.Client
	ns := env.Namespace(t)
	// The plane's controllers for this namespace, with the in-memory
	// provider (no provisioner: its machines are simulated).
	stop, err := (&fixture.Planes{Mgmt: env}).StartControllers(ctx, manager.Options{AllowRestartInProcess: true,
		Namespace: ns, InMemory: &inmemory.Options{Delays: inmemory.NoDelays()}})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	out, _, err := runCapstan(t, "generate", "cluster", "sim", "--infrastructure", "in-memory", "--flavor", "topology",
		"-n", ns, "--kubernetes-version", "v1.35.8", "--worker-machine-count", "1")
	if err != nil {
		t.Fatal(err)
	}
	if err := applyManifests(ctx, c, out); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: ns, Name: "sim"}
	fixture.Eventually(t, "the Cluster built from capstan-in-memory, Available with 2 running Machines", 3*time.Minute, func(ctx context.Context) string {
		cluster := &clusterv1.Cluster{}
		if err := c.Get(ctx, key, cluster); err != nil {
			return err.Error()
		}
		for _, cond := range []string{clusterv1.ClusterTopologyReconciledCondition, clusterv1.AvailableCondition} {
			if why := fixture.Condition(cluster.Status.Conditions, cond, metav1.ConditionTrue); why != "" {
				return why
			}
		}
		return fixture.RunningMachines(ctx, c, ns, 2)
	})
	described, _, err := runCapstan(t, "describe", "cluster", "sim", "-n", ns, "--kubeconfig", envKubeconfig())
	if err != nil || !strings.Contains(described, "Topology - ClusterClass/"+ns+"/capstan-in-memory, v1.35.8") || !strings.Contains(described, "TopologyReconciled: True") {
		t.Errorf("describe cluster: %v\n%s", err, described)
	}

	// The class's patches reached the objects.
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, key, cluster); err != nil {
		t.Fatal(err)
	}
	infra := &inmemoryv1.InMemoryCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Spec.InfrastructureRef.Name}, infra); err != nil {
		t.Fatal(err)
	}
	if d := infra.Spec.Delays; d == nil || d.Machine == nil || d.Machine.Duration != 0 {
		t.Errorf("InMemoryCluster delays %+v, want machine 0s from machineBootDelay", d)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Spec.ControlPlaneRef.Name}, kcp); err != nil {
		t.Fatal(err)
	}
	if s := kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge; s == nil || s.IntValue() != 1 {
		t.Errorf("KubeadmControlPlane maxSurge %v, want 1 from kubeadmControlPlaneMaxSurge", s)
	}
	md := topologyDeployment(t, c, ns, "md-0")
	if args := kubeletArgs(t, bootstrapTemplate(t, c, md)); args != "node-labels=capstan.dev/worker-class=default-worker" {
		t.Errorf("md-0's bootstrap template has kubelet args %q", args)
	}

	// Scale through the topology.
	patchCluster(t, c, key, `{"spec":{"topology":{"workers":{"machineDeployments":[{"class":"default-worker","name":"md-0","replicas":2}]}}}}`)
	fixture.Eventually(t, "3 running Machines after scaling md-0 to 2", 2*time.Minute, func(ctx context.Context) string {
		return fixture.RunningMachines(ctx, c, ns, 3)
	})

	// Change a variable the workers' patch reads: their bootstrap template
	// rotates and the workers roll to it.
	oldTemplate := md.Spec.Template.Spec.Bootstrap.ConfigRef.Name
	patchCluster(t, c, key, `{"spec":{"topology":{"variables":[{"name":"machineBootDelay","value":"0s"},{"name":"workerNodeLabels","value":{"tier":"general"}}]}}}`)
	fixture.Eventually(t, "the workers rolled to a rotated bootstrap template", 3*time.Minute, func(ctx context.Context) string {
		md = topologyDeployment(t, c, ns, "md-0")
		if md.Spec.Template.Spec.Bootstrap.ConfigRef.Name == oldTemplate {
			return "md-0 still uses " + oldTemplate
		}
		if args := kubeletArgs(t, bootstrapTemplate(t, c, md)); args != "node-labels=capstan.dev/worker-class=default-worker,tier=general" {
			return "the new template's kubelet args are " + args
		}
		if ptr.Deref(md.Status.UpToDateReplicas, 0) != 2 || ptr.Deref(md.Status.Replicas, 0) != 2 {
			return fmt.Sprintf("md-0: %d up-to-date of %d replicas", ptr.Deref(md.Status.UpToDateReplicas, 0), ptr.Deref(md.Status.Replicas, 0))
		}
		return fixture.RunningMachines(ctx, c, ns, 3)
	})

	// Upgrade: the control plane first, then the workers.
	patchCluster(t, c, key, `{"spec":{"topology":{"version":"v1.35.9"}}}`)
	fixture.Eventually(t, "every Machine at v1.35.9, the control plane first", 3*time.Minute, func(ctx context.Context) string {
		if why := fixture.UpgradedControlPlaneFirst(ctx, t, c, ns, "v1.35.9"); why != "" {
			return why
		}
		return fixture.RunningMachines(ctx, c, ns, 3)
	})

	if err := c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sim"}}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "nothing left of the Cluster but the class", 3*time.Minute, func(ctx context.Context) string {
		clusters, machines, mds := &clusterv1.ClusterList{}, &clusterv1.MachineList{}, &clusterv1.MachineDeploymentList{}
		for _, l := range []client.ObjectList{clusters, machines, mds} {
			if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
				return err.Error()
			}
		}
		left := len(clusters.Items) + len(machines.Items) + len(mds.Items)
		for _, gk := range []schema.GroupKind{
			{Group: "infrastructure.cluster.x-k8s.io", Kind: "InMemoryCluster"},
			{Group: "infrastructure.cluster.x-k8s.io", Kind: "InMemoryMachineTemplate"},
			{Group: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane"},
			{Group: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate"},
		} {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gk.WithVersion("v1beta2").GroupVersion().WithKind(gk.Kind + "List"))
			if err := c.List(ctx, list, client.InNamespace(ns), client.HasLabels{clusterv1.ClusterTopologyOwnedLabel}); err != nil {
				return err.Error()
			}
			left += len(list.Items)
		}
		return fixture.Unless(left == 0, fmt.Sprintf("%d objects left", left))
	})
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "capstan-in-memory"}, &clusterv1.ClusterClass{}); err != nil {
		t.Errorf("the class went with the Cluster: %v", err)
	}
}

func patchCluster(t *testing.T, c client.Client, key client.ObjectKey, body string) {
	t.Helper()
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := c.Patch(context.Background(), cluster, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		t.Fatalf("patching Cluster %s with %s: %v", key.Name, body, err)
	}
}

// topologyDeployment is the MachineDeployment the topology made for a
// workers.machineDeployments entry.
func topologyDeployment(t *testing.T, c client.Client, ns, name string) *clusterv1.MachineDeployment {
	t.Helper()
	list := &clusterv1.MachineDeploymentList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterTopologyMachineDeploymentNameLabel: name}); err != nil || len(list.Items) != 1 {
		t.Fatalf("MachineDeployments of topology entry %s: %d, %v", name, len(list.Items), err)
	}
	return &list.Items[0]
}

func bootstrapTemplate(t *testing.T, c client.Client, md *clusterv1.MachineDeployment) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("bootstrap.cluster.x-k8s.io/v1beta2")
	u.SetKind("KubeadmConfigTemplate")
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: md.Namespace, Name: md.Spec.Template.Spec.Bootstrap.ConfigRef.Name}, u); err != nil {
		t.Fatal(err)
	}
	return u
}
