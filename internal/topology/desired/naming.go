package desired

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
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

	// An object the Cluster does not refer to yet (a reconcile stopped
	// between creating it and recording it) keeps its name too.
	n.infrastructureCluster = firstNonEmpty(cluster.Spec.InfrastructureRef.Name, nameOf(in.Current.InfrastructureCluster))
	if n.infrastructureCluster == "" {
		if n.infrastructureCluster, err = render(in, "spec.infrastructure.naming.template", spec.Infrastructure.Naming.Template, defaultClusterObjectNameTemplate, clusterData()); err != nil {
			return n, err
		}
	}
	n.controlPlane = firstNonEmpty(cluster.Spec.ControlPlaneRef.Name, nameOf(in.Current.ControlPlane))
	if n.controlPlane == "" {
		if n.controlPlane, err = render(in, "spec.controlPlane.naming.template", spec.ControlPlane.Naming.Template, defaultClusterObjectNameTemplate, clusterData()); err != nil {
			return n, err
		}
	}
	if bp.controlPlaneMachineInfrastructure != nil {
		n.controlPlaneMachineInfrastructure = firstNonEmpty(
			nameOf(in.Current.ControlPlaneMachineInfrastructure),
			controlPlaneInfrastructureRefName(in.Current.ControlPlane),
		)
		if n.controlPlaneMachineInfrastructure == "" {
			n.controlPlaneMachineInfrastructure = names.WithPrefix(cluster.Name+"-", in.Random)
		}
	}

	for _, md := range bp.machineDeployments {
		w := worker{
			topologyName: md.topology.Name, dataKey: "machineDeployment",
			field:        fmt.Sprintf("spec.workers.machineDeployments[class=%s].naming.template", md.class.Class),
			nameTemplate: md.class.Naming.Template, defaultTemplate: defaultDeploymentNameTemplate,
		}
		if current := in.Current.MachineDeployments[md.topology.Name]; current != nil && current.Object != nil {
			w.current = existingNames(current.Object.Name, current.Object.Spec.Template.Spec, current.Bootstrap, current.Infrastructure)
		}
		if n.machineDeployments[md.topology.Name], err = nameWorker(in, w); err != nil {
			return n, err
		}
	}
	for _, mp := range bp.machinePools {
		w := worker{
			topologyName: mp.topology.Name, dataKey: "machinePool",
			field:        fmt.Sprintf("spec.workers.machinePools[class=%s].naming.template", mp.class.Class),
			nameTemplate: mp.class.Naming.Template, defaultTemplate: defaultPoolNameTemplate,
		}
		if current := in.Current.MachinePools[mp.topology.Name]; current != nil && current.Object != nil {
			w.current = existingNames(current.Object.Name, current.Object.Spec.Template.Spec, current.Bootstrap, current.Infrastructure)
		}
		if n.machinePools[mp.topology.Name], err = nameWorker(in, w); err != nil {
			return n, err
		}
	}
	return n, nil
}

// worker is what naming a MachineDeployment or MachinePool topology needs.
type worker struct {
	topologyName string
	// dataKey is where its naming template finds .topologyName
	// (machineDeployment or machinePool).
	dataKey                              string
	field, nameTemplate, defaultTemplate string
	// current holds the names of what exists, nil when nothing does.
	current *workerNames
}

// nameWorker keeps the names of what exists and names the rest: the object
// from the class's naming template, its bootstrap and infrastructure objects
// (or templates) <cluster>-<topology name>-<random>.
func nameWorker(in Input, w worker) (*workerNames, error) {
	out := &workerNames{}
	if w.current != nil {
		*out = *w.current
	}
	if out.object == "" {
		data := map[string]any{
			"cluster": map[string]any{"name": in.Cluster.Name},
			w.dataKey: map[string]any{"topologyName": w.topologyName},
		}
		var err error
		if out.object, err = render(in, w.field, w.nameTemplate, w.defaultTemplate, data); err != nil {
			return nil, err
		}
	}
	prefix := in.Cluster.Name + "-" + w.topologyName + "-"
	if out.bootstrap == "" {
		out.bootstrap = names.WithPrefix(prefix, in.Random)
	}
	if out.infrastructure == "" {
		out.infrastructure = names.WithPrefix(prefix, in.Random)
	}
	return out, nil
}

// existingNames are the names of an existing worker's objects: the ones it
// was given, or those its spec refers to when they were not found.
func existingNames(name string, spec clusterv1.MachineSpec, bootstrap, infrastructure *unstructured.Unstructured) *workerNames {
	return &workerNames{
		object:         name,
		bootstrap:      firstNonEmpty(nameOf(bootstrap), spec.Bootstrap.ConfigRef.Name),
		infrastructure: firstNonEmpty(nameOf(infrastructure), spec.InfrastructureRef.Name),
	}
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

// controlPlaneInfrastructureRefName is the name of the machine template a
// control plane's spec.machineTemplate.spec.infrastructureRef points at.
func controlPlaneInfrastructureRefName(cp *unstructured.Unstructured) string {
	if cp == nil {
		return ""
	}
	ref, _ := contract.ControlPlaneMachineTemplateRef(cp)
	return ref.Name
}
