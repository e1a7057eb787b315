package desired

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/topology"
	"capstan.dev/capstan/internal/topology/variables"
)

// patchInputs lists the blueprint's templates for the patches, each with the
// variables its part of the topology sees: the Cluster's values with their
// defaults, the part's overrides, and the builtin variables describing the
// objects as built before the patches (unpatched).
func patchInputs(in Input, bp *blueprint, unpatched *State) ([]*topology.Template, error) {
	defs, err := definitions(in.Class)
	if err != nil {
		return nil, err
	}
	// The admission webhook refuses bad values; one that got past it (the
	// webhook was down, the class changed since) stops the computation
	// with the variable and the rule named rather than reach the objects.
	if errs := variables.ValidateCluster(defs, in.Cluster, nil); len(errs) > 0 {
		return nil, fmt.Errorf("the Cluster's variables do not match ClusterClass %s/%s: %w", in.Class.Namespace, in.Class.Name, errs.ToAggregate())
	}
	topo := in.Cluster.Spec.Topology
	values, errs := variables.Default(defs, topo.Variables, field.NewPath("spec", "topology", "variables"))
	if len(errs) > 0 {
		return nil, fmt.Errorf("the Cluster's variables cannot be defaulted: %w", errs.ToAggregate())
	}
	global := variables.Builtins{Cluster: clusterBuiltins(unpatched.Cluster)}
	valuesFor := func(overrides []clusterv1.ClusterVariable, overridesPath *field.Path, builtins variables.Builtins) (map[string]apiextensionsv1.JSON, error) {
		defaulted, errs := variables.DefaultOverrides(defs, overrides, overridesPath)
		if len(errs) > 0 {
			return nil, fmt.Errorf("the overrides cannot be defaulted: %w", errs.ToAggregate())
		}
		return variables.Values(values, defaulted, builtins)
	}

	var out []*topology.Template
	infraVars, err := variables.Values(values, nil, global)
	if err != nil {
		return nil, err
	}
	out = append(out, &topology.Template{Role: topology.InfrastructureCluster, Object: bp.infrastructureCluster, Variables: infraVars})

	cpBuiltins := global
	cpBuiltins.ControlPlane = controlPlaneBuiltins(in, unpatched)
	cpVars, err := valuesFor(topo.ControlPlane.Variables.Overrides, field.NewPath("spec", "topology", "controlPlane", "variables", "overrides"), cpBuiltins)
	if err != nil {
		return nil, err
	}
	out = append(out, &topology.Template{Role: topology.ControlPlane, Object: bp.controlPlane, Variables: cpVars})
	if bp.controlPlaneMachineInfrastructure != nil {
		out = append(out, &topology.Template{Role: topology.ControlPlaneMachineInfrastructure, Object: bp.controlPlaneMachineInfrastructure, Variables: cpVars})
	}

	// A worker's two templates see the same variables.
	pair := func(bootstrapRole, infrastructureRole topology.Role, class, name string, bootstrap, infrastructure *unstructured.Unstructured, vars map[string]apiextensionsv1.JSON) {
		out = append(out,
			&topology.Template{Role: bootstrapRole, Class: class, Topology: name, Object: bootstrap, Variables: vars},
			&topology.Template{Role: infrastructureRole, Class: class, Topology: name, Object: infrastructure, Variables: vars})
	}
	for _, md := range bp.machineDeployments {
		builtins := global
		d := unpatched.MachineDeployments[md.topology.Name]
		builtins.MachineDeployment = workerBuiltins(md.class.Class, md.topology.Name, d.Object.ObjectMeta, d.Object.Spec.Replicas, d.Object.Spec.Template.Spec, d.Bootstrap, d.Infrastructure)
		vars, err := valuesFor(md.topology.Variables.Overrides, field.NewPath("spec", "topology", "workers", "machineDeployments").Index(md.index).Child("variables", "overrides"), builtins)
		if err != nil {
			return nil, fmt.Errorf("MachineDeployment topology %q: %w", md.topology.Name, err)
		}
		pair(topology.MachineDeploymentBootstrap, topology.MachineDeploymentInfrastructure, md.class.Class, md.topology.Name, md.bootstrap, md.infrastructure, vars)
	}
	for _, mp := range bp.machinePools {
		builtins := global
		p := unpatched.MachinePools[mp.topology.Name]
		builtins.MachinePool = workerBuiltins(mp.class.Class, mp.topology.Name, p.Object.ObjectMeta, p.Object.Spec.Replicas, p.Object.Spec.Template.Spec, p.Bootstrap, p.Infrastructure)
		vars, err := valuesFor(mp.topology.Variables.Overrides, field.NewPath("spec", "topology", "workers", "machinePools").Index(mp.index).Child("variables", "overrides"), builtins)
		if err != nil {
			return nil, fmt.Errorf("MachinePool topology %q: %w", mp.topology.Name, err)
		}
		pair(topology.MachinePoolBootstrap, topology.MachinePoolInfrastructure, mp.class.Class, mp.topology.Name, mp.bootstrap, mp.infrastructure, vars)
	}
	return out, nil
}

// definitions are the class's variable definitions: its status, which the
// ClusterClass controller fills, when it describes the class's current
// generation; the class's own inline ones, checked, before it does.
func definitions(class *clusterv1.ClusterClass) ([]clusterv1.ClusterClassStatusVariable, error) {
	if class.Status.ObservedGeneration == class.Generation && (len(class.Status.Variables) > 0 || len(class.Spec.Variables) == 0) {
		return class.Status.Variables, nil
	}
	defs, errs := variables.Definitions(class)
	if len(errs) > 0 {
		return nil, fmt.Errorf("ClusterClass %s/%s has variables that cannot be used: %w", class.Namespace, class.Name, errs.ToAggregate())
	}
	return defs, nil
}

func clusterBuiltins(cluster *clusterv1.Cluster) *variables.ClusterBuiltins {
	class := cluster.GetClassKey()
	b := &variables.ClusterBuiltins{
		Name:      cluster.Name,
		Namespace: cluster.Namespace,
		UID:       cluster.UID,
		Metadata:  builtinMetadata(cluster.Labels, cluster.Annotations),
		Topology: &variables.ClusterTopologyBuiltins{
			Version:        cluster.Spec.Topology.Version,
			ClassRef:       variables.ClusterClassRefBuiltins{Name: class.Name, Namespace: class.Namespace},
			Class:          class.Name,
			ClassNamespace: class.Namespace,
		},
	}
	network := cluster.Spec.ClusterNetwork
	if network.ServiceDomain != "" || network.Services.CIDRBlocks != nil || network.Pods.CIDRBlocks != nil {
		b.Network = &variables.ClusterNetworkBuiltins{Services: network.Services.CIDRBlocks, Pods: network.Pods.CIDRBlocks}
		if network.ServiceDomain != "" {
			b.Network.ServiceDomain = ptr.To(network.ServiceDomain)
		}
	}
	return b
}

func controlPlaneBuiltins(in Input, s *State) *variables.ControlPlaneBuiltins {
	cp := s.ControlPlane
	version, _ := contract.DesiredVersion(cp)
	b := &variables.ControlPlaneBuiltins{
		Version:  version,
		Name:     cp.GetName(),
		Metadata: builtinMetadata(cp.GetLabels(), cp.GetAnnotations()),
		Replicas: in.Cluster.Spec.Topology.ControlPlane.Replicas,
	}
	if s.ControlPlaneMachineInfrastructure != nil {
		b.MachineTemplate = &variables.ControlPlaneMachineTemplateBuiltins{
			InfrastructureRef: variables.ControlPlaneMachineInfrastructureRefBuiltins{Name: s.ControlPlaneMachineInfrastructure.GetName()},
		}
	}
	return b
}

// workerBuiltins are builtin.machineDeployment or builtin.machinePool: the
// worker as built before the patches.
func workerBuiltins(class, topologyName string, meta metav1.ObjectMeta, replicas *int32, spec clusterv1.MachineSpec, bootstrap, infrastructure *unstructured.Unstructured) *variables.WorkerBuiltins {
	b := &variables.WorkerBuiltins{
		Version:           spec.Version,
		Metadata:          builtinMetadata(meta.Labels, meta.Annotations),
		Class:             class,
		Name:              meta.Name,
		TopologyName:      topologyName,
		Bootstrap:         &variables.MachineBootstrapBuiltins{ConfigRef: &variables.MachineBootstrapConfigRefBuiltins{Name: bootstrap.GetName()}},
		InfrastructureRef: &variables.MachineInfrastructureRefBuiltins{Name: infrastructure.GetName()},
	}
	if replicas != nil {
		b.Replicas = ptr.To(int64(*replicas))
	}
	return b
}

// builtinMetadata is an object's labels and annotations as the builtins show
// them, without kubectl's copy of the last applied configuration.
func builtinMetadata(labels, annotations map[string]string) *variables.BuiltinMetadata {
	if labels == nil && annotations == nil {
		return nil
	}
	var cleaned map[string]string
	if annotations != nil {
		cleaned = merged(annotations, nil)
		delete(cleaned, corev1.LastAppliedConfigAnnotation)
	}
	return &variables.BuiltinMetadata{Labels: labels, Annotations: cleaned}
}
