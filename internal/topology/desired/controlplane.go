package desired

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/plan"
)

// fieldPath is a path in an unstructured object.
type fieldPath []string

func (p fieldPath) with(more ...string) []string {
	return append(append([]string{}, p...), more...)
}

// The control plane fields the topology sets, where the v1beta2 control
// plane contract puts them (KubeadmControlPlane's spec among others).
var (
	pathRolloutAfter                  = fieldPath{"spec", "rollout", "after"}
	pathMachineTemplateMetadata       = fieldPath{"spec", "machineTemplate", "metadata"}
	pathMachineTemplateReadinessGates = fieldPath{"spec", "machineTemplate", "spec", "readinessGates"}
	pathMachineTemplateTaints         = fieldPath{"spec", "machineTemplate", "spec", "taints"}
	pathMachineTemplateDeletion       = fieldPath{"spec", "machineTemplate", "spec", "deletion"}
)

// controlPlaneMetadata is the control plane's labels and annotations: the
// class's, overridden by the topology's, plus the cluster name and topology
// owned labels. Its Machines get them too.
func controlPlaneMetadata(in Input) (labels, annotations map[string]string) {
	class, topology := in.Class.Spec.ControlPlane.Metadata, in.Cluster.Spec.Topology.ControlPlane.Metadata
	labels = merged(class.Labels, topology.Labels)
	labels[clusterv1.ClusterNameLabel] = in.Cluster.Name
	labels[clusterv1.ClusterTopologyOwnedLabel] = ""
	return labels, merged(class.Annotations, topology.Annotations)
}

func buildControlPlane(in Input, bp *blueprint, n objectNames, version string) (*unstructured.Unstructured, error) {
	labels, annotations := controlPlaneMetadata(in)
	cp, err := objectFromTemplate(in, bp.controlPlane, n.controlPlane, labels, annotations, false)
	if err != nil {
		return nil, err
	}
	topology := in.Cluster.Spec.Topology.ControlPlane
	class := in.Class.Spec.ControlPlane
	set := func(value any, path ...string) error {
		if err := setValue(cp, value, path...); err != nil {
			return fmt.Errorf("setting %s on %s %s: %w", contract.Path(path).String(), cp.GetKind(), cp.GetName(), err)
		}
		return nil
	}

	if bp.controlPlaneMachineInfrastructure != nil {
		t := bp.controlPlaneMachineInfrastructure
		ref := clusterv1.ContractVersionedObjectReference{APIGroup: t.GroupVersionKind().Group, Kind: t.GetKind(), Name: n.controlPlaneMachineInfrastructure}
		if err := contract.SetControlPlaneMachineTemplateRef(cp, ref); err != nil {
			return nil, err
		}
		// The Machines carry the control plane's labels and annotations,
		// over whatever the template's machineTemplate.metadata holds.
		for _, field := range []struct {
			name string
			add  map[string]string
		}{{"labels", labels}, {"annotations", annotations}} {
			existing, _, _ := unstructured.NestedStringMap(cp.Object, pathMachineTemplateMetadata.with(field.name)...)
			if all := merged(existing, field.add); len(all) > 0 {
				if err := set(all, pathMachineTemplateMetadata.with(field.name)...); err != nil {
					return nil, err
				}
			}
		}
	}
	if topology.Replicas != nil {
		if err := contract.SetDesiredReplicas(cp, *topology.Replicas); err != nil {
			return nil, err
		}
	}
	if !topology.Rollout.After.IsZero() {
		if err := set(topology.Rollout.After.UTC().Format(time.RFC3339), pathRolloutAfter...); err != nil {
			return nil, err
		}
	}
	// The class's readiness gates and taints apply unless the topology
	// sets its own; when neither does the field is left to the template.
	if gates := firstSet(topology.ReadinessGates, class.ReadinessGates); gates != nil {
		if err := set(gates, pathMachineTemplateReadinessGates...); err != nil {
			return nil, err
		}
	}
	if taints := firstSet(topology.Taints, class.Taints); taints != nil {
		if err := set(taints, pathMachineTemplateTaints...); err != nil {
			return nil, err
		}
	}
	// The deletion timeouts go to the Machines, where the contract puts
	// them; one neither the topology nor the class sets is the template's.
	deletion := deletionTimeouts(clusterv1.MachineDeletionSpec(topology.Deletion), clusterv1.MachineDeletionSpec(class.Deletion))
	for field, v := range map[string]*int32{
		"nodeDrainTimeoutSeconds":        deletion.NodeDrainTimeoutSeconds,
		"nodeVolumeDetachTimeoutSeconds": deletion.NodeVolumeDetachTimeoutSeconds,
		"nodeDeletionTimeoutSeconds":     deletion.NodeDeletionTimeoutSeconds,
	} {
		if v != nil {
			if err := set(*v, pathMachineTemplateDeletion.with(field)...); err != nil {
				return nil, err
			}
		}
	}
	if err := contract.SetDesiredVersion(cp, version); err != nil {
		return nil, err
	}
	return cp, nil
}

// controlPlaneVersionState reads where a control plane is for the version
// decision: its spec.version; provisioning while it reports no version
// (neither status.versions nor status.version: its first Machines are being
// made); upgrading while a version it reports differs from spec.version.
func controlPlaneVersionState(cp *unstructured.Unstructured) plan.ControlPlaneVersionState {
	if cp == nil {
		return plan.ControlPlaneVersionState{}
	}
	state := plan.ControlPlaneVersionState{Exists: true, Kind: cp.GetKind()}
	// A field of the wrong type reads as unset: a compliant provider's
	// schema does not let one be written.
	state.Version, _ = contract.DesiredVersion(cp)
	reported, _ := contract.ReportedVersions(cp)
	state.Provisioning = len(reported) == 0
	for _, v := range reported {
		if v != state.Version {
			state.Upgrading = true
		}
	}
	return state
}
