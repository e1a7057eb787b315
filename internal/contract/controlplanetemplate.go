package contract

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// specMachineTemplateInfrastructureRef is where a v1beta2 control plane that
// runs on Machines names the infrastructure template of its Machines.
var specMachineTemplateInfrastructureRef = Path{"spec", "machineTemplate", "spec", "infrastructureRef"}

// ControlPlaneMachineTemplateRef reads the reference a control plane holds to
// its Machines' infrastructure template; empty when it has none (a control
// plane that does not run on Machines).
func ControlPlaneMachineTemplateRef(u *unstructured.Unstructured) (clusterv1.ContractVersionedObjectReference, error) {
	m, found, err := unstructured.NestedStringMap(u.Object, specMachineTemplateInfrastructureRef...)
	if err != nil {
		return clusterv1.ContractVersionedObjectReference{}, fmt.Errorf("%s %s: %s: %w", u.GetKind(), u.GetName(), specMachineTemplateInfrastructureRef, err)
	}
	if !found {
		return clusterv1.ContractVersionedObjectReference{}, nil
	}
	return clusterv1.ContractVersionedObjectReference{APIGroup: m["apiGroup"], Kind: m["kind"], Name: m["name"]}, nil
}

// SetControlPlaneMachineTemplateRef points a control plane at its Machines'
// infrastructure template.
func SetControlPlaneMachineTemplateRef(u *unstructured.Unstructured, ref clusterv1.ContractVersionedObjectReference) error {
	return unstructured.SetNestedStringMap(u.Object, map[string]string{"apiGroup": ref.APIGroup, "kind": ref.Kind, "name": ref.Name}, specMachineTemplateInfrastructureRef...)
}
