package variables

import "k8s.io/apimachinery/pkg/types"

// BuiltinsName is the variable that holds the builtin variables.
const BuiltinsName = "builtin"

// Builtins are the builtin variables (builtin.cluster.*, builtin.controlPlane.*,
// builtin.machineDeployment.*, builtin.machinePool.*) with upstream's JSON
// names; a template sees cluster always, controlPlane in the control plane's
// templates, machineDeployment or machinePool in a worker's.
//
// The JSON shape is a contract: patches address these fields by name
// (valueFrom.variable: builtin.cluster.topology.version) and external patch
// extensions written for upstream decode them, so a field left unknown is
// omitted rather than sent empty, exactly as upstream does.
type Builtins struct {
	Cluster           *ClusterBuiltins           `json:"cluster,omitempty"`
	ControlPlane      *ControlPlaneBuiltins      `json:"controlPlane,omitempty"`
	MachineDeployment *MachineDeploymentBuiltins `json:"machineDeployment,omitempty"`
	MachinePool       *MachinePoolBuiltins       `json:"machinePool,omitempty"`
}

// BuiltinMetadata is the labels and annotations an object carries, as
// builtin.*.metadata shows them.
type BuiltinMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ClusterBuiltins is builtin.cluster: the Cluster the templates belong to.
type ClusterBuiltins struct {
	Name      string                   `json:"name,omitempty"`
	Namespace string                   `json:"namespace,omitempty"`
	UID       types.UID                `json:"uid,omitempty"`
	Metadata  *BuiltinMetadata         `json:"metadata,omitempty"`
	Topology  *ClusterTopologyBuiltins `json:"topology,omitempty"`
	Network   *ClusterNetworkBuiltins  `json:"network,omitempty"`
}

// ClusterTopologyBuiltins is builtin.cluster.topology.
type ClusterTopologyBuiltins struct {
	// Version is the Cluster's spec.topology.version: where the Cluster is
	// going, which the control plane and workers may not have reached yet.
	Version string `json:"version,omitempty"`
	// ClassRef is always present (both keys, even empty) once the topology
	// is: upstream marks it required.
	ClassRef ClusterClassRefBuiltins `json:"classRef"`
	// Class and ClassNamespace repeat ClassRef under the names older
	// patches use; upstream keeps both, deprecated.
	Class          string `json:"class,omitempty"`
	ClassNamespace string `json:"classNamespace,omitempty"`
}

// ClusterClassRefBuiltins is builtin.cluster.topology.classRef.
type ClusterClassRefBuiltins struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// ClusterNetworkBuiltins is builtin.cluster.network, from the Cluster's
// spec.clusterNetwork.
type ClusterNetworkBuiltins struct {
	ServiceDomain *string  `json:"serviceDomain,omitempty"`
	Services      []string `json:"services,omitempty"`
	Pods          []string `json:"pods,omitempty"`
}

// ControlPlaneBuiltins is builtin.controlPlane, seen only by the control
// plane's templates.
type ControlPlaneBuiltins struct {
	// Version is the version the control plane is being taken to in this
	// reconcile, which may lag the Cluster's topology version.
	Version  string           `json:"version,omitempty"`
	Metadata *BuiltinMetadata `json:"metadata,omitempty"`
	Name     string           `json:"name,omitempty"`
	// Replicas is nil when the topology leaves the count to the control
	// plane provider.
	Replicas        *int32                               `json:"replicas,omitempty"`
	MachineTemplate *ControlPlaneMachineTemplateBuiltins `json:"machineTemplate,omitempty"`
}

// ControlPlaneMachineTemplateBuiltins is builtin.controlPlane.machineTemplate.
type ControlPlaneMachineTemplateBuiltins struct {
	InfrastructureRef ControlPlaneMachineInfrastructureRefBuiltins `json:"infrastructureRef,omitempty"`
}

// ControlPlaneMachineInfrastructureRefBuiltins names the control plane's
// machine infrastructure template.
type ControlPlaneMachineInfrastructureRefBuiltins struct {
	Name string `json:"name,omitempty"`
}

// MachineDeploymentBuiltins is builtin.machineDeployment, seen only by one
// MachineDeployment topology's templates.
type MachineDeploymentBuiltins = WorkerBuiltins

// MachinePoolBuiltins is builtin.machinePool, seen only by one MachinePool
// topology's templates.
type MachinePoolBuiltins = WorkerBuiltins

// WorkerBuiltins are the builtin variables of one worker topology: upstream
// gives MachineDeployments and MachinePools the same fields.
type WorkerBuiltins struct {
	// Version is the version this worker is being taken to in this
	// reconcile, which may lag the Cluster's topology version.
	Version  string           `json:"version,omitempty"`
	Metadata *BuiltinMetadata `json:"metadata,omitempty"`
	// Class is the worker class (workers.machineDeployments[].class or
	// workers.machinePools[].class).
	Class string `json:"class,omitempty"`
	// Name is the MachineDeployment's or MachinePool's object name.
	Name string `json:"name,omitempty"`
	// TopologyName is the worker topology's name
	// (workers.machineDeployments[].name).
	TopologyName      string                            `json:"topologyName,omitempty"`
	Replicas          *int64                            `json:"replicas,omitempty"`
	Bootstrap         *MachineBootstrapBuiltins         `json:"bootstrap,omitempty"`
	InfrastructureRef *MachineInfrastructureRefBuiltins `json:"infrastructureRef,omitempty"`
}

// MachineBootstrapBuiltins is builtin.machineDeployment.bootstrap (and
// builtin.machinePool.bootstrap): the bootstrap config template a worker
// uses.
type MachineBootstrapBuiltins struct {
	ConfigRef *MachineBootstrapConfigRefBuiltins `json:"configRef,omitempty"`
}

// MachineBootstrapConfigRefBuiltins names the bootstrap config template.
type MachineBootstrapConfigRefBuiltins struct {
	Name string `json:"name,omitempty"`
}

// MachineInfrastructureRefBuiltins names a worker's infrastructure machine
// template.
type MachineInfrastructureRefBuiltins struct {
	Name string `json:"name,omitempty"`
}
