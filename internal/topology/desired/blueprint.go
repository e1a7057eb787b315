package desired

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
)

// blueprint is the class resolved for one Cluster: a private copy of every
// template the topology uses (the patches change them in place) and the
// worker classes its MachineDeployments and MachinePools name, in the
// topology's order.
type blueprint struct {
	infrastructureCluster *unstructured.Unstructured
	controlPlane          *unstructured.Unstructured
	// controlPlaneMachineInfrastructure is nil for a control plane without
	// Machines.
	controlPlaneMachineInfrastructure *unstructured.Unstructured
	machineDeployments                []*deploymentBlueprint
	machinePools                      []*poolBlueprint
}

type deploymentBlueprint struct {
	// index is the entry's place in workers.machineDeployments.
	index                     int
	topology                  clusterv1.MachineDeploymentTopology
	class                     clusterv1.MachineDeploymentClass
	bootstrap, infrastructure *unstructured.Unstructured
}

type poolBlueprint struct {
	// index is the entry's place in workers.machinePools.
	index                     int
	topology                  clusterv1.MachinePoolTopology
	class                     clusterv1.MachinePoolClass
	bootstrap, infrastructure *unstructured.Unstructured
}

// resolve finds the class's templates and worker classes for the Cluster's
// topology. The errors name the field of the class or topology at fault.
func resolve(in Input) (*blueprint, error) {
	class := in.Class
	bp := &blueprint{}
	var err error
	if bp.infrastructureCluster, err = classTemplate(in, "spec.infrastructure.templateRef", class.Spec.Infrastructure.TemplateRef); err != nil {
		return nil, err
	}
	if bp.controlPlane, err = classTemplate(in, "spec.controlPlane.templateRef", class.Spec.ControlPlane.TemplateRef); err != nil {
		return nil, err
	}
	if ref := class.Spec.ControlPlane.MachineInfrastructure.TemplateRef; ref.IsDefined() {
		if bp.controlPlaneMachineInfrastructure, err = classTemplate(in, "spec.controlPlane.machineInfrastructure.templateRef", ref); err != nil {
			return nil, err
		}
	}

	topology := in.Cluster.Spec.Topology
	for i, md := range topology.Workers.MachineDeployments {
		at := fmt.Sprintf("spec.topology.workers.machineDeployments[%d]", i)
		j := findClass(class.Spec.Workers.MachineDeployments, func(c clusterv1.MachineDeploymentClass) string { return c.Class }, md.Class)
		if j < 0 {
			return nil, unknownClass(in, at, md.Name, md.Class, "spec.workers.machineDeployments", classNames(class.Spec.Workers.MachineDeployments, func(c clusterv1.MachineDeploymentClass) string { return c.Class }))
		}
		mdClass := class.Spec.Workers.MachineDeployments[j]
		classAt := fmt.Sprintf("spec.workers.machineDeployments[%d]", j)
		b := &deploymentBlueprint{index: i, topology: md, class: mdClass}
		if b.bootstrap, err = classTemplate(in, classAt+".bootstrap.templateRef", mdClass.Bootstrap.TemplateRef); err != nil {
			return nil, err
		}
		if b.infrastructure, err = classTemplate(in, classAt+".infrastructure.templateRef", mdClass.Infrastructure.TemplateRef); err != nil {
			return nil, err
		}
		bp.machineDeployments = append(bp.machineDeployments, b)
	}
	for i, mp := range topology.Workers.MachinePools {
		at := fmt.Sprintf("spec.topology.workers.machinePools[%d]", i)
		j := findClass(class.Spec.Workers.MachinePools, func(c clusterv1.MachinePoolClass) string { return c.Class }, mp.Class)
		if j < 0 {
			return nil, unknownClass(in, at, mp.Name, mp.Class, "spec.workers.machinePools", classNames(class.Spec.Workers.MachinePools, func(c clusterv1.MachinePoolClass) string { return c.Class }))
		}
		mpClass := class.Spec.Workers.MachinePools[j]
		classAt := fmt.Sprintf("spec.workers.machinePools[%d]", j)
		b := &poolBlueprint{index: i, topology: mp, class: mpClass}
		if b.bootstrap, err = classTemplate(in, classAt+".bootstrap.templateRef", mpClass.Bootstrap.TemplateRef); err != nil {
			return nil, err
		}
		if b.infrastructure, err = classTemplate(in, classAt+".infrastructure.templateRef", mpClass.Infrastructure.TemplateRef); err != nil {
			return nil, err
		}
		bp.machinePools = append(bp.machinePools, b)
	}
	return bp, nil
}

// classTemplate is a private copy of the template ref points at.
func classTemplate(in Input, field string, ref clusterv1.ClusterClassTemplateReference) (*unstructured.Unstructured, error) {
	if !ref.IsDefined() {
		return nil, fmt.Errorf("ClusterClass %s/%s: %s is not set: name the template to use", in.Class.Namespace, in.Class.Name, field)
	}
	t, ok := in.ClassTemplates[KeyOf(ref, in.Class.Namespace)]
	if !ok || t == nil {
		return nil, fmt.Errorf("ClusterClass %s/%s: %s names %s %s/%s, which does not exist: create it or fix the reference",
			in.Class.Namespace, in.Class.Name, field, ref.Kind, in.Class.Namespace, ref.Name)
	}
	return t.DeepCopy(), nil
}

func findClass[T any](classes []T, name func(T) string, want string) int {
	for i, c := range classes {
		if name(c) == want {
			return i
		}
	}
	return -1
}

func classNames[T any](classes []T, name func(T) string) string {
	var out []string
	for _, c := range classes {
		out = append(out, name(c))
	}
	if len(out) == 0 {
		return "none"
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func unknownClass(in Input, at, topologyName, className, classField, defined string) error {
	return fmt.Errorf("%s (%q) names class %q, which ClusterClass %s/%s does not define in %s (it defines: %s): use one of those or add the class",
		at, topologyName, className, in.Class.Namespace, in.Class.Name, classField, defined)
}

// dropPendingCreates leaves out the workers that do not exist yet and that
// the version decision says not to create yet.
func (bp *blueprint) dropPendingCreates(in Input, upgrade plan.TopologyUpgrade) {
	pending := func(list []string, name string) bool { return slices.Contains(list, name) }
	var mds []*deploymentBlueprint
	for _, md := range bp.machineDeployments {
		current := in.Current.MachineDeployments[md.topology.Name]
		if (current == nil || current.Object == nil) && pending(upgrade.MachineDeploymentsCreatePending, md.topology.Name) {
			continue
		}
		mds = append(mds, md)
	}
	var mps []*poolBlueprint
	for _, mp := range bp.machinePools {
		current := in.Current.MachinePools[mp.topology.Name]
		if (current == nil || current.Object == nil) && pending(upgrade.MachinePoolsCreatePending, mp.topology.Name) {
			continue
		}
		mps = append(mps, mp)
	}
	bp.machineDeployments, bp.machinePools = mds, mps
}
