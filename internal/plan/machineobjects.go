package plan

import clusterv1 "capstan.dev/capstan/api/core/v1beta2"

// MachineObjectSlot names one of the two objects a Machine references that
// its owner creates for it after the Machine itself.
type MachineObjectSlot int

const (
	// BootstrapObject is the object spec.bootstrap.configRef names.
	BootstrapObject MachineObjectSlot = iota
	// InfrastructureObject is the object spec.infrastructureRef names.
	InfrastructureObject
)

func (s MachineObjectSlot) String() string {
	if s == BootstrapObject {
		return "bootstrap"
	}
	return "infrastructure"
}

// MachineObject is what the repair decision needs to know of one object a
// Machine references.
type MachineObject struct {
	// Ref is the Machine's reference to the object.
	Ref clusterv1.ContractVersionedObjectReference
	// Clone is the reference the owner gives a Machine of this name when it
	// creates one now (the clone of its current template, say); zero when
	// the owner cannot make this object at the moment (its template could
	// not be read).
	Clone clusterv1.ContractVersionedObjectReference

	// Exists is set when the object Ref names was found.
	Exists bool
	// RefSetByOwner is set when the owner's field manager wrote Ref, which
	// means the owner created the Machine with it.
	RefSetByOwner bool
}

// MachineObjects is what the repair decision needs to know of one Machine
// of an owner (a MachineSet, a control plane) that creates its Machines
// first and their objects right after.
type MachineObjects struct {
	// Adopting is set while the owner takes the Machine over from whoever
	// made it: its objects are theirs to create.
	Adopting bool
	// Deleting is set when the Machine has a deletion timestamp: its
	// objects go with it, and a missing one may be one already deleted.
	Deleting bool
	// InfrastructureProvisioned is set once the Machine's infrastructure
	// was provisioned: an object missing since was deleted on purpose or
	// went with a failure, and creating a new one would hide that.
	InfrastructureProvisioned bool
	// BootstrapDataSecretSet is set when spec.bootstrap.dataSecretName is:
	// the bootstrap object has done its work and is needed no more.
	BootstrapDataSecretSet bool

	Bootstrap, Infrastructure MachineObject
}

// Object is the slot's object.
func (m *MachineObjects) Object(slot MachineObjectSlot) *MachineObject {
	if slot == BootstrapObject {
		return &m.Bootstrap
	}
	return &m.Infrastructure
}

// Repairable tells whether the Machine may get missing objects at all.
func (m MachineObjects) Repairable() bool {
	return !m.Adopting && !m.Deleting && !m.InfrastructureProvisioned
}

// ObjectsToCheck lists, bootstrap first, the objects of the Machine that
// may need creating: those whose reference names exactly what the owner
// would create for it now, on a Machine that may get missing objects. It
// reads neither Exists nor RefSetByOwner, so that a caller learns those
// (a cache read, a decode of managed fields) only for these objects.
func (m MachineObjects) ObjectsToCheck() []MachineObjectSlot {
	if !m.Repairable() {
		return nil
	}
	var slots []MachineObjectSlot
	if !m.BootstrapDataSecretSet && m.Bootstrap.namesClone() {
		slots = append(slots, BootstrapObject)
	}
	if m.Infrastructure.namesClone() {
		slots = append(slots, InfrastructureObject)
	}
	return slots
}

// ObjectsToCreate lists, bootstrap first, the objects the owner must create
// for the Machine now: among ObjectsToCheck, those that do not exist although
// the owner wrote the reference to them. Such a Machine is what a crash (or
// a failed create) between creating a Machine and its objects leaves.
func (m MachineObjects) ObjectsToCreate() []MachineObjectSlot {
	var slots []MachineObjectSlot
	for _, slot := range m.ObjectsToCheck() {
		if obj := m.Object(slot); !obj.Exists && obj.RefSetByOwner {
			slots = append(slots, slot)
		}
	}
	return slots
}

// namesClone tells whether the reference names the object the owner would
// create now. A reference someone changed, or one to a previous template,
// names an object that is not the owner's to make.
func (o MachineObject) namesClone() bool {
	return o.Clone.IsDefined() && o.Ref == o.Clone
}
