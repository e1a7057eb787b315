// Package clusterresourceset reconciles ClusterResourceSets and their
// ClusterResourceSetBindings.
//
// A ClusterResourceSet names ConfigMaps and Secrets (of type
// addons.cluster.x-k8s.io/resource-set) in its namespace whose data values
// hold Kubernetes manifests, and selects Clusters of that namespace by
// label. Once a selected Cluster's control plane is initialised, the
// controller creates those objects in its workload cluster, through the
// shared workload cluster cache, and records each resource, with a digest
// of its data, in the Cluster's ClusterResourceSetBinding (named after the
// Cluster, owned by every ClusterResourceSet with an entry). plan.PlanAddons
// decides what to apply: under ApplyOnce a resource once per Cluster, under
// Reconcile again whenever its digest changes, by server-side apply so that
// fields dropped from a manifest are dropped from the object too.
//
// A resource that is missing, not parseable, or a Secret of another type is
// applied nowhere, and the ResourcesApplied condition names it. Deleting a
// ClusterResourceSet removes its entries from the bindings and leaves what
// it applied in the workload clusters; a Cluster's binding is deleted with
// the Cluster (BindingReconciler).
//
// The manager caches neither ConfigMaps nor unlabelled Secrets, so the
// resources are read from the API server when a reconcile needs them, and
// their changes are watched through a cache of their own (NewResourceCache)
// that holds only the metadata the mapping to ClusterResourceSets needs, of
// all ConfigMaps but only of the Secrets of the resource-set type.
package clusterresourceset
