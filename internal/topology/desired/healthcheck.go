package desired

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
)

// controlPlaneHealthCheck is the control plane's MachineHealthCheck, nil
// when there is none: a control plane without Machines never has one; else
// one exists when the class or the topology defines checks or remediation,
// unless the topology's enabled turns it off. A topology that defines any
// part of the health check replaces the class's whole (checks and
// remediation together), as the API documents.
func controlPlaneHealthCheck(in Input, bp *blueprint, name string) *clusterv1.MachineHealthCheck {
	if bp.controlPlaneMachineInfrastructure == nil {
		return nil
	}
	class, topology := in.Class.Spec.ControlPlane.HealthCheck, in.Cluster.Spec.Topology.ControlPlane.HealthCheck
	if !enabled(class.IsDefined(), topology.IsDefined(), topology.Enabled) {
		return nil
	}
	checks, remediation := class.Checks, class.Remediation
	if topology.IsDefined() {
		checks, remediation = topology.Checks, topology.Remediation
	}
	selector := map[string]string{clusterv1.ClusterTopologyOwnedLabel: "", clusterv1.MachineControlPlaneLabel: ""}
	return healthCheck(in, name, selector,
		clusterv1.MachineHealthCheckChecks(checks),
		clusterv1.MachineHealthCheckRemediation{
			TriggerIf:   clusterv1.MachineHealthCheckRemediationTriggerIf(remediation.TriggerIf),
			TemplateRef: remediation.TemplateRef,
		})
}

// deploymentHealthCheck is a MachineDeployment's MachineHealthCheck, by the
// same rules as the control plane's (maxInFlight counts as defining one; it
// goes on the MachineDeployment itself).
func deploymentHealthCheck(in Input, md *deploymentBlueprint, name string) *clusterv1.MachineHealthCheck {
	class, topology := md.class.HealthCheck, md.topology.HealthCheck
	if !enabled(class.IsDefined(), topology.IsDefined(), topology.Enabled) {
		return nil
	}
	checks, remediation := class.Checks, class.Remediation
	if topology.IsDefined() {
		checks, remediation = topology.Checks, topology.Remediation
	}
	// The selector is what every Machine of the MachineDeployment carries,
	// whatever the class or topology adds to their labels.
	selector := map[string]string{clusterv1.ClusterTopologyOwnedLabel: "", clusterv1.ClusterTopologyMachineDeploymentNameLabel: md.topology.Name}
	return healthCheck(in, name, selector,
		clusterv1.MachineHealthCheckChecks(checks),
		clusterv1.MachineHealthCheckRemediation{
			TriggerIf:   clusterv1.MachineHealthCheckRemediationTriggerIf(remediation.TriggerIf),
			TemplateRef: remediation.TemplateRef,
		})
}

func enabled(classDefined, topologyDefined bool, topologyEnabled *bool) bool {
	if !classDefined && !topologyDefined {
		return false
	}
	return topologyEnabled == nil || *topologyEnabled
}

// healthCheck is a MachineHealthCheck named after the object it watches,
// owned by the Cluster, with the defaults the API gives (cluster name label,
// node startup timeout) already filled so that the desired and stored
// objects compare equal.
func healthCheck(in Input, name string, selector map[string]string, checks clusterv1.MachineHealthCheckChecks, remediation clusterv1.MachineHealthCheckRemediation) *clusterv1.MachineHealthCheck {
	if checks.NodeStartupTimeoutSeconds == nil {
		timeout := clusterv1.DefaultNodeStartupTimeoutSeconds
		checks.NodeStartupTimeoutSeconds = &timeout
	}
	return &clusterv1.MachineHealthCheck{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: clusterv1.MachineHealthCheckKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: in.Cluster.Namespace,
			Labels: map[string]string{
				clusterv1.ClusterTopologyOwnedLabel: "",
				clusterv1.ClusterNameLabel:          in.Cluster.Name,
			},
			OwnerReferences: []metav1.OwnerReference{contract.ClusterOwner(in.Cluster)},
		},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: in.Cluster.Name,
			Selector:    metav1.LabelSelector{MatchLabels: selector},
			Checks:      checks,
			Remediation: remediation,
		},
	}
}
