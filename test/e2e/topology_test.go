package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/bench"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/test/fixture"
)

// inMemoryClass is a ClusterClass of the in-memory provider's kinds, with
// one worker class, and a Cluster using it.
const inMemoryClass = `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: InMemoryClusterTemplate
metadata:
  name: sim-cluster
  namespace: default
spec:
  template:
    spec:
      delays:
        machine: 1s
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: InMemoryMachineTemplate
metadata:
  name: sim-control-plane
  namespace: default
spec:
  template:
    spec: {}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlaneTemplate
metadata:
  name: sim-control-plane
  namespace: default
spec:
  template:
    spec:
      kubeadmConfigSpec:
        initConfiguration:
          nodeRegistration:
            name: "{{ ds.meta_data.local_hostname }}"
        joinConfiguration:
          nodeRegistration:
            name: "{{ ds.meta_data.local_hostname }}"
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: InMemoryMachineTemplate
metadata:
  name: sim-worker
  namespace: default
spec:
  template:
    spec: {}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata:
  name: sim-worker
  namespace: default
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          name: "{{ ds.meta_data.local_hostname }}"
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: ClusterClass
metadata:
  name: sim
  namespace: default
spec:
  infrastructure:
    templateRef:
      apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
      kind: InMemoryClusterTemplate
      name: sim-cluster
  controlPlane:
    templateRef:
      apiVersion: controlplane.cluster.x-k8s.io/v1beta2
      kind: KubeadmControlPlaneTemplate
      name: sim-control-plane
    machineInfrastructure:
      templateRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
        kind: InMemoryMachineTemplate
        name: sim-control-plane
  workers:
    machineDeployments:
    - class: default-worker
      bootstrap:
        templateRef:
          apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
          kind: KubeadmConfigTemplate
          name: sim-worker
      infrastructure:
        templateRef:
          apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
          kind: InMemoryMachineTemplate
          name: sim-worker
  variables:
  - name: workerBootDelay
    required: false
    schema:
      openAPIV3Schema:
        type: string
        default: 1s
  patches:
  - name: worker-boot-delay
    definitions:
    - selector:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
        kind: InMemoryMachineTemplate
        matchResources:
          machineDeploymentClass:
            names: [default-worker]
      jsonPatches:
      - op: add
        path: /spec/template/spec/delays
        value: {}
      - op: add
        path: /spec/template/spec/delays/machine
        valueFrom:
          variable: workerBootDelay
`

const inMemoryTopologyCluster = `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: topo
  namespace: default
spec:
  clusterNetwork:
    pods:
      cidrBlocks: ["10.244.0.0/16"]
    services:
      cidrBlocks: ["10.96.0.0/12"]
  topology:
    classRef:
      name: sim
    version: v1.35.8
    controlPlane:
      replicas: 1
    workers:
      machineDeployments:
      - class: default-worker
        name: md-0
        replicas: 2
`

// A Cluster with a managed topology of the in-memory provider's kinds comes
// up through `capstan up`'s controllers: the topology makes the objects, the
// core and the provider run them, every Machine runs; scaling through the
// topology scales the MachineDeployment; deleting the Cluster leaves
// nothing.
func TestTopologyClusterOnTheInMemoryProvider(t *testing.T) {
	t.Parallel()
	p := newPlane(t)
	p.up()
	c := p.client()
	ctx := context.Background()

	if err := apply(c, inMemoryClass); err != nil {
		t.Fatal(err)
	}
	classReconciled(t, c, "default", "sim")
	if err := apply(c, inMemoryTopologyCluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: "default", Name: "topo"}
	fixture.Eventually(t, "the topology Cluster Available with 3 running Machines", 3*time.Minute, func(ctx context.Context) string {
		cluster := &clusterv1.Cluster{}
		if err := c.Get(ctx, key, cluster); err != nil {
			return err.Error()
		}
		if why := fixture.Condition(cluster.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition, metav1.ConditionTrue); why != "" {
			return why
		}
		if why := fixture.Condition(cluster.Status.Conditions, clusterv1.AvailableCondition, metav1.ConditionTrue); why != "" {
			return why
		}
		return runningMachines(ctx, c, 3)
	})
	// What `kubectl get clusters` shows of it: the class and the version.
	if row := tableRow(t, planeConfig(t, p), "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/clusters/topo"); row["ClusterClass"] != "sim" || row["Version"] != "v1.35.8" {
		t.Errorf("kubectl get clusters columns %v, want ClusterClass sim and Version v1.35.8", row)
	}
	// Once up, the topology has nothing to apply: no server-side apply of
	// an object (only the Machines' condition applies of their MachineSet
	// go to a status) while the cluster runs on.
	before, err := bench.ScrapeRequests(ctx, planeConfig(t, p))
	if err != nil {
		t.Fatal(err)
	}
	// A change the topology does not act on makes it reconcile all the same.
	poke := `{"metadata":{"annotations":{"example.com/poke":"1"}}}`
	if err := c.Patch(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "topo"}}, client.RawPatch(types.MergePatchType, []byte(poke))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	after, err := bench.ScrapeRequests(ctx, planeConfig(t, p))
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range after.Minus(before).ByVerbResource {
		if strings.HasPrefix(k, "APPLY ") && !strings.Contains(k, "/status") {
			t.Errorf("%.0f %s requests with nothing to change", n, k)
		}
	}

	md := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: deploymentOf(t, c, "md-0")}, md); err != nil {
		t.Fatal(err)
	}
	if md.Labels[clusterv1.ClusterTopologyOwnedLabel] != "" || ptr.Deref(md.Spec.Replicas, 0) != 2 {
		t.Errorf("MachineDeployment %s: labels %v, replicas %v", md.Name, md.Labels, md.Spec.Replicas)
	}

	// A variable a patch puts in the workers' machine template changes:
	// the template rotates, the workers roll to it, and the old template
	// goes once its MachineSet has.
	oldTemplate := md.Spec.Template.Spec.InfrastructureRef.Name
	vars := `{"spec":{"topology":{"variables":[{"name":"workerBootDelay","value":"2s"}]}}}`
	if err := c.Patch(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "topo"}}, client.RawPatch(types.MergePatchType, []byte(vars))); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the workers rolled to a rotated template", 3*time.Minute, func(ctx context.Context) string {
		if err := c.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
			return err.Error()
		}
		newTemplate := md.Spec.Template.Spec.InfrastructureRef.Name
		if newTemplate == oldTemplate {
			return "the MachineDeployment still uses " + oldTemplate
		}
		tmpl := &unstructured.Unstructured{}
		tmpl.SetGroupVersionKind(schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "InMemoryMachineTemplate"})
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: newTemplate}, tmpl); err != nil {
			return err.Error()
		}
		if d, _, _ := unstructured.NestedString(tmpl.Object, "spec", "template", "spec", "delays", "machine"); d != "2s" {
			return "the new template's delay is " + d
		}
		return runningMachines(ctx, c, 3)
	})
	// The old template stays while a MachineSet kept for rollback
	// references it.
	if !referencedByMachineSet(t, c, oldTemplate) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: oldTemplate}, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "InMemoryMachineTemplate",
		}}); !apierrors.IsNotFound(err) {
			t.Errorf("the old template %s, which no MachineSet references: %v", oldTemplate, err)
		}
	}

	// An upgrade: the control plane first, then the workers.
	upgrade := `{"spec":{"topology":{"version":"v1.35.9"}}}`
	if err := c.Patch(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "topo"}}, client.RawPatch(types.MergePatchType, []byte(upgrade))); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "every Machine upgraded, control plane first", 3*time.Minute, func(ctx context.Context) string {
		machines := &clusterv1.MachineList{}
		if err := c.List(ctx, machines, client.InNamespace("default")); err != nil {
			return err.Error()
		}
		oldControlPlane, newWorkers, old := 0, 0, 0
		for i := range machines.Items {
			m := &machines.Items[i]
			_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
			switch {
			case m.Spec.Version != "v1.35.9":
				old++
				if cp {
					oldControlPlane++
				}
			case !cp:
				newWorkers++
			}
		}
		if oldControlPlane > 0 && newWorkers > 0 {
			t.Fatalf("a worker Machine runs v1.35.9 while %d control plane Machines do not", oldControlPlane)
		}
		if old > 0 {
			return fmt.Sprintf("%d Machines not at v1.35.9", old)
		}
		return runningMachines(ctx, c, 3)
	})

	// The upgrade's rollout leaves the MachineSet of the first revision
	// beyond the history kept: with it goes the template only it used.
	fixture.Eventually(t, "the first worker template gone with its MachineSet", 2*time.Minute, func(ctx context.Context) string {
		err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: oldTemplate}, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "InMemoryMachineTemplate",
		}})
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprintf("%s: %v (referenced by a MachineSet: %v)", oldTemplate, err, referencedByMachineSet(t, c, oldTemplate)))
	})

	// Scale through the topology.
	body := `{"spec":{"topology":{"workers":{"machineDeployments":[{"class":"default-worker","name":"md-0","replicas":3}]}}}}`
	if err := c.Patch(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "topo"}}, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "4 running Machines after scaling the workers", 2*time.Minute, func(ctx context.Context) string {
		return runningMachines(ctx, c, 4)
	})

	// A MachineDeployment added to the topology comes; removed, it goes
	// with its templates.
	setWorkers := func(workers string) {
		t.Helper()
		body := `{"spec":{"topology":{"workers":{"machineDeployments":` + workers + `}}}}`
		if err := c.Patch(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "topo"}}, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
			t.Fatal(err)
		}
	}
	setWorkers(`[{"class":"default-worker","name":"md-0","replicas":3},{"class":"default-worker","name":"md-1","replicas":1}]`)
	fixture.Eventually(t, "5 running Machines with a second MachineDeployment", 2*time.Minute, func(ctx context.Context) string {
		return runningMachines(ctx, c, 5)
	})
	setWorkers(`[{"class":"default-worker","name":"md-0","replicas":3}]`)
	fixture.Eventually(t, "the second MachineDeployment gone with its Machine and templates", 2*time.Minute, func(ctx context.Context) string {
		mds := &clusterv1.MachineDeploymentList{}
		if err := c.List(ctx, mds, client.MatchingLabels{clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md-1"}); err != nil {
			return err.Error()
		}
		if len(mds.Items) > 0 {
			return "MachineDeployment " + mds.Items[0].Name + " is still there"
		}
		for _, kind := range []string{"InMemoryMachineTemplate", "KubeadmConfigTemplate"} {
			n, err := countOwned(ctx, c, kind, map[string]string{clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md-1"})
			if err != nil {
				return err.Error()
			}
			if n > 0 {
				return fmt.Sprintf("%d %s of md-1 left", n, kind)
			}
		}
		return runningMachines(ctx, c, 4)
	})

	if err := c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "topo"}}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "nothing left of the topology Cluster", 3*time.Minute, func(ctx context.Context) string {
		clusters, machines, mds := &clusterv1.ClusterList{}, &clusterv1.MachineList{}, &clusterv1.MachineDeploymentList{}
		for _, l := range []client.ObjectList{clusters, machines, mds} {
			if err := c.List(ctx, l); err != nil {
				return err.Error()
			}
		}
		left := len(clusters.Items) + len(machines.Items) + len(mds.Items)
		for _, kind := range []string{"InMemoryCluster", "InMemoryMachineTemplate", "KubeadmControlPlane", "KubeadmConfigTemplate"} {
			n, err := countOwned(ctx, c, kind, nil)
			if err != nil {
				return err.Error()
			}
			left += n
		}
		return fixture.Unless(left == 0, fmt.Sprintf("%d objects left", left))
	})
}

// classReconciled waits until the ClusterClass controller has checked a
// class and found its variables in order.
func classReconciled(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	fixture.Eventually(t, "ClusterClass "+name+" reconciled", time.Minute, func(ctx context.Context) string {
		class := &clusterv1.ClusterClass{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, class); err != nil {
			return err.Error()
		}
		if class.Status.ObservedGeneration != class.Generation {
			return fmt.Sprintf("observedGeneration %d, generation %d", class.Status.ObservedGeneration, class.Generation)
		}
		return fixture.Condition(class.Status.Conditions, clusterv1.ClusterClassVariablesReadyCondition, metav1.ConditionTrue)
	})
}

func runningMachines(ctx context.Context, c client.Client, want int) string {
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace("default")); err != nil {
		return err.Error()
	}
	running := 0
	for i := range machines.Items {
		if machines.Items[i].Status.Phase == string(clusterv1.MachinePhaseRunning) && conditions.IsTrue(&machines.Items[i], clusterv1.ReadyCondition) {
			running++
		}
	}
	return fixture.Unless(running == want && len(machines.Items) == want, fmt.Sprintf("%d of %d Machines running, want %d", running, len(machines.Items), want))
}

// deploymentOf is the name of the topology's MachineDeployment for a
// workers.machineDeployments entry.
func deploymentOf(t *testing.T, c client.Client, topologyName string) string {
	t.Helper()
	list := &clusterv1.MachineDeploymentList{}
	if err := c.List(context.Background(), list, client.MatchingLabels{clusterv1.ClusterTopologyMachineDeploymentNameLabel: topologyName}); err != nil || len(list.Items) != 1 {
		t.Fatalf("MachineDeployments of topology %s: %d, %v", topologyName, len(list.Items), err)
	}
	return list.Items[0].Name
}

// countOwned counts the objects of an in-memory, bootstrap or control plane
// kind the topology made (with the extra labels given).
func countOwned(ctx context.Context, c client.Client, kind string, extra map[string]string) (int, error) {
	groups := map[string]string{
		"InMemoryCluster": "infrastructure.cluster.x-k8s.io", "InMemoryMachineTemplate": "infrastructure.cluster.x-k8s.io",
		"KubeadmControlPlane": "controlplane.cluster.x-k8s.io", "KubeadmConfigTemplate": "bootstrap.cluster.x-k8s.io",
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: groups[kind], Version: "v1beta2", Kind: kind + "List"})
	labels := client.MatchingLabels{clusterv1.ClusterTopologyOwnedLabel: ""}
	maps.Copy(labels, extra)
	if err := c.List(ctx, list, labels); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

func planeConfig(t *testing.T, p *plane) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// referencedByMachineSet tells whether a MachineSet clones the named
// infrastructure template.
func referencedByMachineSet(t *testing.T, c client.Client, template string) bool {
	t.Helper()
	sets := &clusterv1.MachineSetList{}
	if err := c.List(context.Background(), sets, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, ms := range sets.Items {
		if ms.Spec.Template.Spec.InfrastructureRef.Name == template {
			return true
		}
	}
	return false
}

// tableRow reads path as kubectl get does (the API server's Table form, its
// columns from the CRD's printer columns) and returns the row's cells by
// column name.
func tableRow(t *testing.T, cfg *rest.Config, path string) map[string]any {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	table := &metav1.Table{}
	if err := json.NewDecoder(resp.Body).Decode(table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("GET %s as a table: %d rows, want 1", path, len(table.Rows))
	}
	row := map[string]any{}
	for i, col := range table.ColumnDefinitions {
		if i < len(table.Rows[0].Cells) {
			row[col.Name] = table.Rows[0].Cells[i]
		}
	}
	return row
}
