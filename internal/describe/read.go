package describe

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
)

// ClusterNotFoundError says the Cluster Read was asked for does not exist.
type ClusterNotFoundError struct{ Namespace, Name string }

func (e *ClusterNotFoundError) Error() string {
	return fmt.Sprintf("cluster %s not found in namespace %s: list the clusters with kubectl get clusters -A, and pass -n NAMESPACE", e.Name, e.Namespace)
}

// Read gathers the Objects of the Cluster namespace/name through r: the
// Cluster, its infrastructure and control plane, its MachineDeployments,
// MachineSets, MachinePools and Machines, and their provider objects.
// Provider objects that cannot be read are left out (the tree then says
// they do not exist) and reported to warn, unless they are simply missing;
// only a Cluster that cannot be read, or core lists that fail, are errors.
// Both `capstan describe` and the web console build their tree from it.
//
// discovery (may be nil) finds the versions of provider kinds when r may
// not read their CRDs, which app teams' read-only roles often forbid: give
// the RESTMapper of the client behind r, which asks the API server with
// the same credentials.
func Read(ctx context.Context, r client.Reader, discovery meta.RESTMapper, namespace, name string, warn func(what string, err error)) (Objects, error) {
	o := Objects{Cluster: &clusterv1.Cluster{},
		InfrastructureMachines: map[string]*unstructured.Unstructured{}, BootstrapConfigs: map[string]*unstructured.Unstructured{},
		InfrastructureMachinePools: map[string]*unstructured.Unstructured{}}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, o.Cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return o, &ClusterNotFoundError{Namespace: namespace, Name: name}
		}
		return o, fmt.Errorf("reading Cluster %s/%s: %w", namespace, name, err)
	}
	resolver := &contract.Resolver{Reader: r, Discovery: discovery}
	report := func(what string, err error) {
		if warn != nil && !apierrors.IsNotFound(err) {
			warn(what, err)
		}
	}
	if ref := o.Cluster.Spec.InfrastructureRef; ref.Name != "" {
		obj, err := resolver.Get(ctx, r, ref, namespace)
		if err != nil {
			report("reading the cluster's infrastructure "+ref.Kind+" "+ref.Name, err)
		} else {
			o.Infrastructure = obj
		}
	}
	if ref := o.Cluster.Spec.ControlPlaneRef; ref.Name != "" {
		obj, err := resolver.Get(ctx, r, ref, namespace)
		if err != nil {
			report("reading the cluster's control plane "+ref.Kind+" "+ref.Name, err)
		} else {
			o.ControlPlane = obj
		}
	}
	inCluster := []client.ListOption{client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}}
	mds := &clusterv1.MachineDeploymentList{}
	if err := r.List(ctx, mds, inCluster...); err != nil {
		return o, fmt.Errorf("listing MachineDeployments: %w", err)
	}
	o.MachineDeployments = mds.Items
	sets := &clusterv1.MachineSetList{}
	if err := r.List(ctx, sets, inCluster...); err != nil {
		return o, fmt.Errorf("listing MachineSets: %w", err)
	}
	o.MachineSets = sets.Items
	pools := &clusterv1.MachinePoolList{}
	if err := r.List(ctx, pools, inCluster...); err != nil {
		return o, fmt.Errorf("listing MachinePools: %w", err)
	}
	o.MachinePools = pools.Items
	machines := &clusterv1.MachineList{}
	if err := r.List(ctx, machines, inCluster...); err != nil {
		return o, fmt.Errorf("listing Machines: %w", err)
	}
	o.Machines = machines.Items

	// One list per provider kind rather than one read per Machine.
	byKind := map[schema.GroupKind]map[string]*unstructured.Unstructured{}
	lookup := func(ref clusterv1.ContractVersionedObjectReference) *unstructured.Unstructured {
		if ref.Name == "" {
			return nil
		}
		gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
		objs, seen := byKind[gk]
		if !seen {
			objs = map[string]*unstructured.Unstructured{}
			byKind[gk] = objs
			gvk, err := resolver.GroupVersionKind(ctx, ref)
			if err != nil {
				report("resolving "+ref.Kind, err)
				return nil
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
				report("listing "+ref.Kind+"s", err)
				return nil
			}
			for i := range list.Items {
				objs[list.Items[i].GetName()] = &list.Items[i]
			}
		}
		return objs[ref.Name]
	}
	for _, mp := range o.MachinePools {
		if obj := lookup(mp.Spec.Template.Spec.InfrastructureRef); obj != nil {
			o.InfrastructureMachinePools[mp.Name] = obj
		}
	}
	for _, m := range o.Machines {
		if obj := lookup(m.Spec.InfrastructureRef); obj != nil {
			o.InfrastructureMachines[m.Name] = obj
		}
		if obj := lookup(m.Spec.Bootstrap.ConfigRef); obj != nil {
			o.BootstrapConfigs[m.Name] = obj
		}
	}
	return o, nil
}
