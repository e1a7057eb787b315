package plan

import (
	"slices"
	"testing"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestMachineObjectsToCreate(t *testing.T) {
	bootRef := clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.example.com", Kind: "Config", Name: "m"}
	infraRef := clusterv1.ContractVersionedObjectReference{APIGroup: "infra.example.com", Kind: "Machine", Name: "m"}
	// crashed is a Machine its owner created before stopping: both
	// references name the clones the owner would make, neither exists.
	crashed := func() MachineObjects {
		return MachineObjects{
			Bootstrap:      MachineObject{Ref: bootRef, Clone: bootRef, RefSetByOwner: true},
			Infrastructure: MachineObject{Ref: infraRef, Clone: infraRef, RefSetByOwner: true},
		}
	}
	both := []MachineObjectSlot{BootstrapObject, InfrastructureObject}
	tests := []struct {
		name   string
		change func(*MachineObjects)
		check  []MachineObjectSlot
		create []MachineObjectSlot
	}{
		{name: "crashed between the creates", check: both, create: both},
		{name: "complete", change: func(m *MachineObjects) { m.Bootstrap.Exists, m.Infrastructure.Exists = true, true }, check: both},
		{name: "only the infrastructure missing", change: func(m *MachineObjects) { m.Bootstrap.Exists = true },
			check: both, create: []MachineObjectSlot{InfrastructureObject}},
		{name: "adopting", change: func(m *MachineObjects) { m.Adopting = true }},
		{name: "deleting", change: func(m *MachineObjects) { m.Deleting = true }},
		{name: "infrastructure provisioned", change: func(m *MachineObjects) { m.InfrastructureProvisioned = true }},
		{name: "bootstrap data secret set", change: func(m *MachineObjects) { m.BootstrapDataSecretSet = true },
			check: []MachineObjectSlot{InfrastructureObject}, create: []MachineObjectSlot{InfrastructureObject}},
		{name: "references written by someone else", change: func(m *MachineObjects) {
			m.Bootstrap.RefSetByOwner, m.Infrastructure.RefSetByOwner = false, false
		}, check: both},
		{name: "template changed since the Machine was created", change: func(m *MachineObjects) {
			m.Infrastructure.Clone.Kind = "OtherMachine"
		}, check: []MachineObjectSlot{BootstrapObject}, create: []MachineObjectSlot{BootstrapObject}},
		{name: "template not read", change: func(m *MachineObjects) { m.Infrastructure.Clone = clusterv1.ContractVersionedObjectReference{} },
			check: []MachineObjectSlot{BootstrapObject}, create: []MachineObjectSlot{BootstrapObject}},
		{name: "no bootstrap reference, no bootstrap template", change: func(m *MachineObjects) {
			m.Bootstrap = MachineObject{}
		}, check: []MachineObjectSlot{InfrastructureObject}, create: []MachineObjectSlot{InfrastructureObject}},
		{name: "reference renamed by hand", change: func(m *MachineObjects) { m.Bootstrap.Ref.Name = "other" },
			check: []MachineObjectSlot{InfrastructureObject}, create: []MachineObjectSlot{InfrastructureObject}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := crashed()
			if tt.change != nil {
				tt.change(&m)
			}
			if got := m.ObjectsToCheck(); !slices.Equal(got, tt.check) {
				t.Errorf("ObjectsToCheck = %v, want %v", got, tt.check)
			}
			if got := m.ObjectsToCreate(); !slices.Equal(got, tt.create) {
				t.Errorf("ObjectsToCreate = %v, want %v", got, tt.create)
			}
		})
	}
}

// TestMachineObjectsToCheckIgnoresLookups: what a caller has not looked up
// yet cannot change which objects it must look up.
func TestMachineObjectsToCheckIgnoresLookups(t *testing.T) {
	ref := clusterv1.ContractVersionedObjectReference{Kind: "Machine", Name: "m"}
	for _, exists := range []bool{false, true} {
		for _, setByOwner := range []bool{false, true} {
			m := MachineObjects{Infrastructure: MachineObject{Ref: ref, Clone: ref, Exists: exists, RefSetByOwner: setByOwner}}
			if got := m.ObjectsToCheck(); !slices.Equal(got, []MachineObjectSlot{InfrastructureObject}) {
				t.Errorf("exists %v, set by owner %v: ObjectsToCheck = %v", exists, setByOwner, got)
			}
		}
	}
}
