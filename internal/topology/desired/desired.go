// Package desired computes every object a Cluster's managed topology wants:
// the infrastructure cluster, the control plane and its machine template,
// one MachineDeployment (with bootstrap and infrastructure templates and a
// MachineHealthCheck) per workers.machineDeployments entry, MachinePools
// likewise, and the Cluster's own references. A pure function of the class,
// the Cluster and what exists; the topology controller applies the result.
package desired

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
)

// Input is everything the computation reads.
type Input struct {
	Cluster *clusterv1.Cluster
	Class   *clusterv1.ClusterClass
	// ClassTemplates are the templates the class references, keyed by
	// TemplateKey of the reference.
	ClassTemplates map[TemplateKey]*unstructured.Unstructured
	// Current is what the topology made before (empty on the first reconcile).
	Current Current
}

// TemplateKey identifies a class template: group, kind, namespace, name (the
// version is not part of it: references are version-less).
type TemplateKey struct {
	Group, Kind, Namespace, Name string
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

// State is the desired topology.
type State struct {
	// Cluster carries the references the topology sets on the Cluster
	// (spec.infrastructureRef, spec.controlPlaneRef).
	Cluster                           *clusterv1.Cluster
	InfrastructureCluster             *unstructured.Unstructured
	ControlPlane                      *unstructured.Unstructured
	ControlPlaneMachineInfrastructure *unstructured.Unstructured
	ControlPlaneHealthCheck           *clusterv1.MachineHealthCheck
	MachineDeployments                map[string]*MachineDeployment
	MachinePools                      map[string]*MachinePool
	// Upgrade is the version decision the state was computed with.
	Upgrade plan.TopologyUpgrade
}

// Compute returns the desired state. An error names what in the class or
// topology makes it impossible (a missing template, a worker class the class
// does not define, a patch that fails).
func Compute(in Input) (*State, error) {
	panic("desired.Compute: not written yet")
}
