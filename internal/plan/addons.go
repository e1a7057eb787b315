package plan

import (
	addonsv1 "capstan.dev/capstan/api/addons/v1beta2"
)

// AddonResource is one resource a ClusterResourceSet names, as read now.
type AddonResource struct {
	Ref addonsv1.ResourceRef
	// Hash is the digest of the resource's data; empty when the resource
	// cannot be applied at all (missing, malformed, a Secret of the wrong
	// type): nothing of it is applied anywhere then.
	Hash string
}

// AddonRecord is what a ClusterResourceSetBinding says of one resource in
// one Cluster.
type AddonRecord struct {
	Applied bool
	Hash    string
}

// AddonCluster is one Cluster a ClusterResourceSet selects.
type AddonCluster struct {
	Name string
	// ControlPlaneInitialized: the workload cluster's API server can take
	// objects.
	ControlPlaneInitialized bool
	// Deleting: the Cluster has a deletion timestamp.
	Deleting bool
	// Records are the Cluster's binding entries for the ClusterResourceSet;
	// nil when it has none yet.
	Records map[addonsv1.ResourceRef]AddonRecord
}

// AddonPlan is what a ClusterResourceSet does now.
type AddonPlan struct {
	// Apply lists, per Cluster name, the resources to apply there, in the
	// order spec.resources names them. Clusters with nothing to apply are
	// absent.
	Apply map[string][]addonsv1.ResourceRef
	// Waiting are the Clusters whose control plane is not initialised yet,
	// in the order given: they get their resources once it is.
	Waiting []string
}

// PlanAddons decides which resources go to which Clusters. A deleting
// Cluster gets nothing. Under ApplyOnce (and an unset strategy, which the
// API defaults to it) a resource is applied to a Cluster until one attempt
// succeeds, and never again, whatever its content becomes; under Reconcile
// it is applied again whenever its hash differs from the one recorded at the
// last application, or that application failed.
func PlanAddons(strategy addonsv1.ClusterResourceSetStrategy, resources []AddonResource, clusters []AddonCluster) AddonPlan {
	p := AddonPlan{Apply: map[string][]addonsv1.ResourceRef{}}
	for _, c := range clusters {
		if c.Deleting {
			continue
		}
		if !c.ControlPlaneInitialized {
			p.Waiting = append(p.Waiting, c.Name)
			continue
		}
		for _, r := range resources {
			if r.Hash == "" {
				continue
			}
			rec, found := c.Records[r.Ref]
			due := !found || !rec.Applied
			if strategy == addonsv1.ClusterResourceSetStrategyReconcile && !due {
				due = rec.Hash != r.Hash
			}
			if due {
				p.Apply[c.Name] = append(p.Apply[c.Name], r.Ref)
			}
		}
	}
	return p
}
