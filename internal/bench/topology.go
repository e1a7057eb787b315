package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
)

// topologyClassName is the ClusterClass every cluster of a topology run
// uses.
const topologyClassName = "bench"

// topologyShared is what the clusters of a topology run share: the
// namespace, the ClusterClass and its templates, of the same shape as
// perCluster's objects (one in-memory machine template for the control
// plane and the workers alike).
const topologyShared = `
apiVersion: v1
kind: Namespace
metadata:
  name: NS
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: InMemoryClusterTemplate
metadata: {name: bench, namespace: NS}
spec: {template: {spec: {}}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: InMemoryMachineTemplate
metadata: {name: bench, namespace: NS}
spec: {template: {spec: {}}}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlaneTemplate
metadata: {name: bench, namespace: NS}
spec:
  template:
    spec:
      kubeadmConfigSpec:
        initConfiguration: {nodeRegistration: {name: "{{ ds.meta_data.local_hostname }}"}}
        joinConfiguration: {nodeRegistration: {name: "{{ ds.meta_data.local_hostname }}"}}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: bench-worker, namespace: NS}
spec: {template: {spec: {joinConfiguration: {nodeRegistration: {name: "{{ ds.meta_data.local_hostname }}"}}}}}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: ClusterClass
metadata: {name: bench, namespace: NS}
spec:
  infrastructure:
    templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: InMemoryClusterTemplate, name: bench}
  controlPlane:
    templateRef: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, name: bench}
    machineInfrastructure:
      templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: InMemoryMachineTemplate, name: bench}
  workers:
    machineDeployments:
    - class: worker
      bootstrap:
        templateRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, name: bench-worker}
      infrastructure:
        templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: InMemoryMachineTemplate, name: bench}
`

// topologyCluster is one cluster of a topology run: the Cluster alone.
const topologyCluster = `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: NAME, namespace: NS}
spec:
  clusterNetwork: {pods: {cidrBlocks: ["10.244.0.0/16"]}, services: {cidrBlocks: ["10.96.0.0/12"]}}
  topology:
    classRef: {name: bench}
    version: VERSION
    controlPlane: {replicas: 1}
    workers:
      machineDeployments:
      - {class: worker, name: md, replicas: WORKERS}
`

// TopologyManifests are a topology run's objects: the shared ones (their
// count is returned too), then every cluster's Cluster (c0, c1, ...).
func TopologyManifests(ns string, clusters, workers int) ([]*unstructured.Unstructured, int, error) {
	var out []*unstructured.Unstructured
	add := func(doc string) error {
		for _, part := range strings.Split(doc, "\n---\n") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(part), &u.Object); err != nil {
				return err
			}
			out = append(out, u)
		}
		return nil
	}
	if err := add(strings.ReplaceAll(topologyShared, "NS", ns)); err != nil {
		return nil, 0, err
	}
	shared := len(out)
	r := strings.NewReplacer("NS", ns, "VERSION", kubernetesVersion(), "WORKERS", fmt.Sprint(workers))
	for i := 0; i < clusters; i++ {
		if err := add(strings.ReplaceAll(r.Replace(topologyCluster), "NAME", fmt.Sprintf("c%d", i))); err != nil {
			return nil, 0, err
		}
	}
	return out, shared, nil
}

// waitClassReconciled waits until the ClusterClass controller has checked
// the run's class.
func waitClassReconciled(ctx context.Context, c client.Reader, ns string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		class := &clusterv1.ClusterClass{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: topologyClassName}, class); err != nil {
			return false, nil
		}
		return class.Status.ObservedGeneration == class.Generation && conditions.IsTrue(class, clusterv1.ClusterClassVariablesReadyCondition), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for ClusterClass %s to be reconciled: %w", topologyClassName, err)
	}
	return nil
}
