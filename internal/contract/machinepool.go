package contract

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The InfraMachinePool contract's own paths; provisioned and replicas are
// shared with the other kinds.
var (
	specProviderIDList              = Path{"spec", "providerIDList"}
	statusInfrastructureMachineKind = Path{"status", "infrastructureMachineKind"}
)

// InfraMachinePool is what the core reads of an infrastructure machine pool
// through the contract.
type InfraMachinePool struct {
	// Provisioned: status.initialization.provisioned (v1beta1:
	// status.ready).
	Provisioned bool
	// ProviderIDList is spec.providerIDList, the pool's instances.
	ProviderIDList []string
	// Replicas is status.replicas; nil when the provider reports none.
	Replicas *int32
	// InfrastructureMachineKind is status.infrastructureMachineKind: set
	// when the provider creates one infrastructure machine per instance
	// (labelled with the pool's name), for which the core creates Machines.
	InfrastructureMachineKind string
}

// ReadInfraMachinePool reads an infrastructure machine pool's contract
// fields.
func ReadInfraMachinePool(u *unstructured.Unstructured) (InfraMachinePool, error) {
	var p InfraMachinePool
	var err error
	if p.Provisioned, err = InfrastructureProvisioned(u); err != nil {
		return p, err
	}
	ids, _, err := unstructured.NestedStringSlice(u.Object, specProviderIDList...)
	if err != nil {
		return p, fmt.Errorf("%s %s: %s: %w", u.GetKind(), u.GetName(), specProviderIDList, err)
	}
	p.ProviderIDList = ids
	if p.Replicas, err = optionalInt32(u, statusReplicas); err != nil {
		return p, err
	}
	if p.InfrastructureMachineKind, err = optionalString(u, statusInfrastructureMachineKind); err != nil {
		return p, err
	}
	return p, nil
}
