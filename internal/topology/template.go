package topology

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Role is what a class template becomes in a Cluster's topology.
type Role string

const (
	// InfrastructureCluster: the class's infrastructure cluster template.
	InfrastructureCluster Role = "InfrastructureCluster"
	// ControlPlane: the class's control plane template.
	ControlPlane Role = "ControlPlane"
	// ControlPlaneMachineInfrastructure: the machine template of the control plane.
	ControlPlaneMachineInfrastructure Role = "ControlPlaneMachineInfrastructure"
	// MachineDeploymentBootstrap and MachineDeploymentInfrastructure: a
	// MachineDeployment class's bootstrap and infrastructure templates.
	MachineDeploymentBootstrap      Role = "MachineDeploymentBootstrap"
	MachineDeploymentInfrastructure Role = "MachineDeploymentInfrastructure"
	// MachinePoolBootstrap and MachinePoolInfrastructure: a MachinePool
	// class's bootstrap and infrastructure templates.
	MachinePoolBootstrap      Role = "MachinePoolBootstrap"
	MachinePoolInfrastructure Role = "MachinePoolInfrastructure"
)

// Template is one class template as a Cluster's topology uses it: a copy of
// the template object that patches change in place (paths such as
// /spec/template/spec/... address it exactly as upstream's patches do).
type Template struct {
	Role Role
	// Class is the worker class (workers.machineDeployments[].class or
	// machinePools[].class) for the worker roles, empty otherwise.
	Class string
	// Topology is the worker topology's name (workers.machineDeployments[].name),
	// empty for the cluster-wide roles.
	Topology string
	// Object is the template (kind FooTemplate, spec.template...).
	Object *unstructured.Unstructured
	// Variables are the values this template's patches see: the Cluster's
	// variables with the worker topology's or control plane's overrides
	// applied, defaults filled, and "builtin" holding the builtin variables.
	Variables map[string]apiextensionsv1.JSON
}
