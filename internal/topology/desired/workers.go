package desired

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
)

// workerMetadata is a worker's labels and annotations: the class's,
// overridden by the topology's, plus the cluster name, topology owned and
// nameLabel (deployment-name or pool-name) labels. The annotations that
// steer upgrades are the topology's own business and never copied.
func workerMetadata(in Input, class, topology clusterv1.ObjectMeta, nameLabel, topologyName string) (labels, annotations map[string]string) {
	labels = merged(class.Labels, topology.Labels)
	labels[clusterv1.ClusterNameLabel] = in.Cluster.Name
	labels[clusterv1.ClusterTopologyOwnedLabel] = ""
	labels[nameLabel] = topologyName
	annotations = merged(class.Annotations, topology.Annotations)
	delete(annotations, clusterv1.ClusterTopologyHoldUpgradeSequenceAnnotation)
	delete(annotations, clusterv1.ClusterTopologyDeferUpgradeAnnotation)
	return labels, annotations
}

func buildMachineDeployment(in Input, md *deploymentBlueprint, n *workerNames, version string) *MachineDeployment {
	topology, class := md.topology, md.class
	nameLabel := map[string]string{clusterv1.ClusterTopologyMachineDeploymentNameLabel: topology.Name}
	bootstrap := templateFromTemplate(in, md.bootstrap, n.bootstrap, nameLabel)
	infrastructure := templateFromTemplate(in, md.infrastructure, n.infrastructure, nameLabel)
	labels, annotations := workerMetadata(in, class.Metadata, topology.Metadata, clusterv1.ClusterTopologyMachineDeploymentNameLabel, topology.Name)

	// A topology's rollout replaces the class's as a whole.
	var rollout clusterv1.MachineDeploymentRolloutSpec
	if class.Rollout != (clusterv1.MachineDeploymentClassRolloutSpec{}) {
		rollout.Strategy = rolloutStrategy(class.Rollout.Strategy)
	}
	if topology.Rollout != (clusterv1.MachineDeploymentTopologyRolloutSpec{}) {
		rollout = clusterv1.MachineDeploymentRolloutSpec{After: topology.Rollout.After, Strategy: rolloutStrategy(topology.Rollout.Strategy)}
	}
	order := class.Deletion.Order
	if topology.Deletion.Order != "" {
		order = topology.Deletion.Order
	}

	template := machineTemplate(in, labels, annotations, version, bootstrap, infrastructure)
	template.Spec.FailureDomain = firstNonEmpty(topology.FailureDomain, class.FailureDomain)
	template.Spec.MinReadySeconds = firstPtr(topology.MinReadySeconds, class.MinReadySeconds)
	template.Spec.ReadinessGates = firstSet(topology.ReadinessGates, class.ReadinessGates)
	template.Spec.Taints = firstSet(topology.Taints, class.Taints)
	template.Spec.Deletion = deletionTimeouts(deploymentTimeouts(topology.Deletion), deploymentTimeouts(class.Deletion))
	obj := &clusterv1.MachineDeployment{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: clusterv1.MachineDeploymentKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.object,
			Namespace:   in.Cluster.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: in.Cluster.Name,
			Replicas:    topology.Replicas,
			Rollout:     rollout,
			// The selector holds what every Machine of this topology entry
			// carries, so that the MachineDeployment adds no label of its own.
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{
				clusterv1.ClusterNameLabel:                          in.Cluster.Name,
				clusterv1.ClusterTopologyOwnedLabel:                 "",
				clusterv1.ClusterTopologyMachineDeploymentNameLabel: topology.Name,
			}},
			Remediation: clusterv1.MachineDeploymentRemediationSpec{
				MaxInFlight: firstPtr(topology.HealthCheck.Remediation.MaxInFlight, class.HealthCheck.Remediation.MaxInFlight),
			},
			Deletion: clusterv1.MachineDeploymentDeletionSpec{Order: order},
			Template: template,
		},
	}
	return &MachineDeployment{
		Object:         obj,
		Bootstrap:      bootstrap,
		Infrastructure: infrastructure,
		HealthCheck:    deploymentHealthCheck(in, md, n.object),
	}
}

func rolloutStrategy(s clusterv1.MachineDeploymentTopologyRolloutStrategy) clusterv1.MachineDeploymentRolloutStrategy {
	return clusterv1.MachineDeploymentRolloutStrategy{
		Type: s.Type,
		RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
			MaxUnavailable: s.RollingUpdate.MaxUnavailable,
			MaxSurge:       s.RollingUpdate.MaxSurge,
		},
	}
}

func buildMachinePool(in Input, mp *poolBlueprint, n *workerNames, version string) (*MachinePool, error) {
	topology, class := mp.topology, mp.class
	nameLabel := map[string]string{clusterv1.ClusterTopologyMachinePoolNameLabel: topology.Name}
	// A pool refers to a bootstrap config and an infrastructure machine pool,
	// not to templates: they are made from the class's templates and
	// changed in place.
	bootstrap, err := objectFromTemplate(in, mp.bootstrap, n.bootstrap, nameLabel, nil, true)
	if err != nil {
		return nil, err
	}
	infrastructure, err := objectFromTemplate(in, mp.infrastructure, n.infrastructure, nameLabel, nil, true)
	if err != nil {
		return nil, err
	}
	labels, annotations := workerMetadata(in, class.Metadata, topology.Metadata, clusterv1.ClusterTopologyMachinePoolNameLabel, topology.Name)
	template := machineTemplate(in, labels, annotations, version, bootstrap, infrastructure)
	template.Spec.MinReadySeconds = firstPtr(topology.MinReadySeconds, class.MinReadySeconds)
	template.Spec.Taints = firstSet(topology.Taints, class.Taints)
	template.Spec.Deletion = deletionTimeouts(clusterv1.MachineDeletionSpec(topology.Deletion), clusterv1.MachineDeletionSpec(class.Deletion))
	obj := &clusterv1.MachinePool{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: clusterv1.MachinePoolKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.object,
			Namespace:   in.Cluster.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName:    in.Cluster.Name,
			Replicas:       topology.Replicas,
			FailureDomains: firstSet(topology.FailureDomains, class.FailureDomains),
			Template:       template,
		},
	}
	return &MachinePool{Object: obj, Bootstrap: bootstrap, Infrastructure: infrastructure}, nil
}

// machineTemplate is what a worker's Machines are made from: the worker's
// metadata, the version and the references to its bootstrap and
// infrastructure objects; the caller adds what its kind supports.
func machineTemplate(in Input, labels, annotations map[string]string, version string, bootstrap, infrastructure *unstructured.Unstructured) clusterv1.MachineTemplateSpec {
	return clusterv1.MachineTemplateSpec{
		ObjectMeta: clusterv1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec: clusterv1.MachineSpec{
			ClusterName:       in.Cluster.Name,
			Version:           version,
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: contract.ReferenceTo(bootstrap)},
			InfrastructureRef: contract.ReferenceTo(infrastructure),
		},
	}
}

// deletionTimeouts are the Machines' deletion timeouts: the topology's, each
// one the class's where the topology leaves it unset.
func deletionTimeouts(topology, class clusterv1.MachineDeletionSpec) clusterv1.MachineDeletionSpec {
	return clusterv1.MachineDeletionSpec{
		NodeDrainTimeoutSeconds:        firstPtr(topology.NodeDrainTimeoutSeconds, class.NodeDrainTimeoutSeconds),
		NodeVolumeDetachTimeoutSeconds: firstPtr(topology.NodeVolumeDetachTimeoutSeconds, class.NodeVolumeDetachTimeoutSeconds),
		NodeDeletionTimeoutSeconds:     firstPtr(topology.NodeDeletionTimeoutSeconds, class.NodeDeletionTimeoutSeconds),
	}
}

// deploymentTimeouts are the timeouts of a worker class's or topology's
// deletion settings (the order goes on the MachineDeployment).
func deploymentTimeouts(d clusterv1.MachineDeploymentTopologyMachineDeletionSpec) clusterv1.MachineDeletionSpec {
	return clusterv1.MachineDeletionSpec{
		NodeDrainTimeoutSeconds:        d.NodeDrainTimeoutSeconds,
		NodeVolumeDetachTimeoutSeconds: d.NodeVolumeDetachTimeoutSeconds,
		NodeDeletionTimeoutSeconds:     d.NodeDeletionTimeoutSeconds,
	}
}
