// Package desired computes every object a Cluster's managed topology wants:
// the infrastructure cluster, the control plane and its machine template,
// one MachineDeployment (with bootstrap and infrastructure templates and a
// MachineHealthCheck) per workers.machineDeployments entry, MachinePools
// likewise, and the Cluster's own references. A pure function of the class,
// the Cluster and what exists; the topology controller applies the result.
package desired

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/names"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/topology/patches"
)

// Input is everything the computation reads.
type Input struct {
	Cluster *clusterv1.Cluster
	Class   *clusterv1.ClusterClass
	// ClassTemplates are the templates the class references, keyed by
	// TemplateKey of the reference (KeyOf gives it).
	ClassTemplates map[TemplateKey]*unstructured.Unstructured
	// Current is what the topology made before (empty on the first reconcile).
	Current Current
	// FieldManager is the field manager the topology applies its objects
	// with. When set, a cloned template whose current copy holds a spec
	// field this manager applied and the desired one no longer has is
	// rotated too (a patch switched off, say); without it only added or
	// changed fields rotate a template.
	FieldManager string
	// Random supplies the random parts of new names (five characters);
	// nil means utilrand.String. Tests inject a known sequence.
	Random names.Random
}

// TemplateKey identifies a class template: group, kind, namespace, name (the
// version is not part of it: references are version-less).
type TemplateKey struct {
	Group, Kind, Namespace, Name string
}

// KeyOf is the key of the template ref points at, in the class's namespace.
func KeyOf(ref clusterv1.ClusterClassTemplateReference, namespace string) TemplateKey {
	return TemplateKey{Group: ref.GroupVersionKind().Group, Kind: ref.Kind, Namespace: namespace, Name: ref.Name}
}

// Current is what exists of the topology.
type Current struct {
	InfrastructureCluster *unstructured.Unstructured
	ControlPlane          *unstructured.Unstructured
	// ControlPlaneMachineInfrastructure is the template the control plane's
	// machineTemplate references.
	ControlPlaneMachineInfrastructure *unstructured.Unstructured
	ControlPlaneHealthCheck           *clusterv1.MachineHealthCheck
	// MachineDeployments and MachinePools are keyed by topology name (the
	// deployment-name and pool-name topology labels).
	MachineDeployments map[string]*MachineDeployment
	MachinePools       map[string]*MachinePool
}

// MachineDeployment is a topology MachineDeployment with its templates and
// health check (current or desired).
type MachineDeployment struct {
	Object         *clusterv1.MachineDeployment
	Bootstrap      *unstructured.Unstructured
	Infrastructure *unstructured.Unstructured
	HealthCheck    *clusterv1.MachineHealthCheck
}

// MachinePool is a topology MachinePool with the objects it references
// (current or desired).
type MachinePool struct {
	Object         *clusterv1.MachinePool
	Bootstrap      *unstructured.Unstructured
	Infrastructure *unstructured.Unstructured
}

// UpgradeStepAnnotation on a managed Cluster holds the version of the
// upgrade step under way (Cluster API's own annotation: KubeadmControlPlanes
// and MachineSets read it to create Machines during a chained upgrade).
const UpgradeStepAnnotation = "topology.internal.cluster.x-k8s.io/upgrade-step"

// State is the desired topology.
type State struct {
	// Cluster carries the references the topology sets on the Cluster
	// (spec.infrastructureRef, spec.controlPlaneRef) and its topology labels.
	Cluster                           *clusterv1.Cluster
	InfrastructureCluster             *unstructured.Unstructured
	ControlPlane                      *unstructured.Unstructured
	ControlPlaneMachineInfrastructure *unstructured.Unstructured
	ControlPlaneHealthCheck           *clusterv1.MachineHealthCheck
	// MachineDeployments and MachinePools are keyed by topology name. A
	// topology entry whose creation must wait (the control plane is not
	// stable at the topology's version) is not there:
	// Upgrade.MachineDeploymentsCreatePending and
	// Upgrade.MachinePoolsCreatePending list it.
	MachineDeployments map[string]*MachineDeployment
	MachinePools       map[string]*MachinePool
	// Upgrade is the version decision the state was computed with.
	Upgrade plan.TopologyUpgrade
}

// Compute returns the desired state. An error names what in the class or
// topology makes it impossible (a missing template, a worker class the class
// does not define, a patch that fails).
//
// The steps: resolve the class's templates for each part of the topology;
// decide the versions; name every object (an existing one keeps its name);
// hand copies of the templates, each with the variables its part sees, to
// the class's patches; build the objects from the patched templates; give a
// cloned template whose content changed a new name.
func Compute(in Input) (*State, error) {
	if in.Cluster == nil || in.Class == nil {
		return nil, fmt.Errorf("computing a topology needs its Cluster and its ClusterClass")
	}
	if in.Random == nil {
		in.Random = utilrand.String
	}
	bp, err := resolve(in)
	if err != nil {
		return nil, err
	}
	upgrade := plan.PlanTopologyUpgrade(upgradeInput(in))
	if upgrade.Err != nil {
		return nil, fmt.Errorf("no upgrade can be planned: %w", upgrade.Err)
	}
	bp.dropPendingCreates(in, upgrade)
	n, err := nameObjects(in, bp)
	if err != nil {
		return nil, err
	}

	// The builtin variables describe the objects as they are before the
	// patches run (names, versions, replicas, metadata), so a first build
	// from the class's own templates gives them.
	unpatched, err := build(in, bp, n, upgrade)
	if err != nil {
		return nil, err
	}
	templates, err := patchInputs(in, bp, unpatched)
	if err != nil {
		return nil, err
	}
	if err := patches.Apply(in.Class.Spec.Patches, templates); err != nil {
		return nil, fmt.Errorf("applying the patches of ClusterClass %s/%s: %w", in.Class.Namespace, in.Class.Name, err)
	}

	rotate(in, bp, &n)
	return build(in, bp, n, upgrade)
}
