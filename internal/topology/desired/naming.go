package desired

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/names"
)

// The naming templates used when the class sets none (upstream's defaults).
const (
	defaultClusterObjectNameTemplate = "{{ .cluster.name }}-{{ .random }}"
	defaultDeploymentNameTemplate    = "{{ .cluster.name }}-{{ .machineDeployment.topologyName }}-{{ .random }}"
	defaultPoolNameTemplate          = "{{ .cluster.name }}-{{ .machinePool.topologyName }}-{{ .random }}"
)

// objectNames are the names of the topology's objects: an existing object's
// own, a new one's from the class's naming template (or the prefix
// convention for cloned templates).
type objectNames struct {
	infrastructureCluster             string
	controlPlane                      string
	controlPlaneMachineInfrastructure string
	// machineDeployments and machinePools are keyed by topology name.
	machineDeployments map[string]*workerNames
	machinePools       map[string]*workerNames
}

type workerNames struct {
	object, bootstrap, infrastructure string
}

func nameObjects(in Input, bp *blueprint) (objectNames, error) {
	cluster := in.Cluster
	spec := in.Class.Spec
	n := objectNames{machineDeployments: map[string]*workerNames{}, machinePools: map[string]*workerNames{}}
	clusterData := func() map[string]any { return map[string]any{"cluster": map[string]any{"name": cluster.Name}} }
	var err error

	n.infrastructureCluster = cluster.Spec.InfrastructureRef.Name
	if n.infrastructureCluster == "" {
		if n.infrastructureCluster, err = render(in, "spec.infrastructure.naming.template", spec.Infrastructure.Naming.Template, defaultClusterObjectNameTemplate, clusterData()); err != nil {
			return n, err
		}
	}
	n.controlPlane = cluster.Spec.ControlPlaneRef.Name
	if n.controlPlane == "" {
		if n.controlPlane, err = render(in, "spec.controlPlane.naming.template", spec.ControlPlane.Naming.Template, defaultClusterObjectNameTemplate, clusterData()); err != nil {
			return n, err
		}
	}
	if bp.controlPlaneMachineInfrastructure != nil {
		n.controlPlaneMachineInfrastructure = firstName(
			nameOf(in.Current.ControlPlaneMachineInfrastructure),
			controlPlaneInfrastructureRefName(in.Current.ControlPlane),
		)
		if n.controlPlaneMachineInfrastructure == "" {
			n.controlPlaneMachineInfrastructure = names.WithPrefix(cluster.Name+"-", in.Random)
		}
	}

	for _, md := range bp.machineDeployments {
		w := &workerNames{}
		current := in.Current.MachineDeployments[md.topology.Name]
		if current != nil && current.Object != nil {
			w.object = current.Object.Name
			w.bootstrap = firstName(nameOf(current.Bootstrap), current.Object.Spec.Template.Spec.Bootstrap.ConfigRef.Name)
			w.infrastructure = firstName(nameOf(current.Infrastructure), current.Object.Spec.Template.Spec.InfrastructureRef.Name)
		}
		if w.object == "" {
			data := clusterData()
			data["machineDeployment"] = map[string]any{"topologyName": md.topology.Name}
			if w.object, err = render(in, fmt.Sprintf("spec.workers.machineDeployments[class=%s].naming.template", md.class.Class), md.class.Naming.Template, defaultDeploymentNameTemplate, data); err != nil {
				return n, err
			}
		}
		prefix := cluster.Name + "-" + md.topology.Name + "-"
		if w.bootstrap == "" {
			w.bootstrap = names.WithPrefix(prefix, in.Random)
		}
		if w.infrastructure == "" {
			w.infrastructure = names.WithPrefix(prefix, in.Random)
		}
		n.machineDeployments[md.topology.Name] = w
	}

	for _, mp := range bp.machinePools {
		w := &workerNames{}
		current := in.Current.MachinePools[mp.topology.Name]
		if current != nil && current.Object != nil {
			w.object = current.Object.Name
			w.bootstrap = firstName(nameOf(current.Bootstrap), current.Object.Spec.Template.Spec.Bootstrap.ConfigRef.Name)
			w.infrastructure = firstName(nameOf(current.Infrastructure), current.Object.Spec.Template.Spec.InfrastructureRef.Name)
		}
		if w.object == "" {
			data := clusterData()
			data["machinePool"] = map[string]any{"topologyName": mp.topology.Name}
			if w.object, err = render(in, fmt.Sprintf("spec.workers.machinePools[class=%s].naming.template", mp.class.Class), mp.class.Naming.Template, defaultPoolNameTemplate, data); err != nil {
				return n, err
			}
		}
		prefix := cluster.Name + "-" + mp.topology.Name + "-"
		if w.bootstrap == "" {
			w.bootstrap = names.WithPrefix(prefix, in.Random)
		}
		if w.infrastructure == "" {
			w.infrastructure = names.WithPrefix(prefix, in.Random)
		}
		n.machinePools[mp.topology.Name] = w
	}
	return n, nil
}

// render names a new object from the class's naming template, or the
// default one when the class sets none.
func render(in Input, field, nameTemplate, defaultTemplate string, data map[string]any) (string, error) {
	if nameTemplate == "" {
		nameTemplate = defaultTemplate
	}
	name, err := names.Render(nameTemplate, data, in.Random)
	if err != nil {
		return "", fmt.Errorf("ClusterClass %s/%s: %s %q %w (it may use .cluster.name, .random and, for workers, .machineDeployment.topologyName or .machinePool.topologyName)",
			in.Class.Namespace, in.Class.Name, field, nameTemplate, err)
	}
	return name, nil
}

func nameOf(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	return u.GetName()
}

func firstName(candidates ...string) string {
	for _, c := range candidates {
		if c != "" {
			return c
		}
	}
	return ""
}

// controlPlaneInfrastructureRefName is the name of the machine template a
// control plane's spec.machineTemplate.spec.infrastructureRef points at.
func controlPlaneInfrastructureRefName(cp *unstructured.Unstructured) string {
	if cp == nil {
		return ""
	}
	name, _, _ := unstructured.NestedString(cp.Object, pathMachineTemplateInfrastructureRef.with("name")...)
	return name
}
