package machinecreate

import (
	"context"

	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/plan"
)

// Owned is one of an owner's Machines, as Repair considers it.
type Owned struct {
	Machine *clusterv1.Machine
	// Adopting is set while the owner takes the Machine over from whoever
	// made it.
	Adopting bool
}

// Repaired is what Repair did.
type Repaired struct {
	// Objects are the objects made.
	Objects []client.Object
	// Failed are the Machines whose missing objects could not all be made.
	Failed []Failure
}

// Failure is why one Machine's missing objects could not all be made.
type Failure struct {
	Machine *clusterv1.Machine
	Err     error
}

// Repair creates the objects of the owner's Machines that were never
// created: Create makes a Machine first and its objects right after, so a
// manager stopped in between, or a create that failed, leaves a Machine
// whose references name nothing. plan.MachineObjects decides which objects
// are missing; found says which exist. Repair waits until the cache shows
// what it made, and returns an error holding every failure, including the
// lookups that failed (their objects are not created on a guess).
func (c *Creator) Repair(ctx context.Context, machines []Owned, makers Makers, found Finder) (Repaired, error) {
	var out Repaired
	var errs []error
	for _, o := range machines {
		m := o.Machine
		missing, lookupErrs := c.missing(ctx, o, makers, found)
		errs = append(errs, lookupErrs...)
		if len(missing) == 0 {
			continue
		}
		made, err := c.repairMachine(ctx, m, makers, missing)
		out.Objects = append(out.Objects, made...)
		if err != nil {
			out.Failed = append(out.Failed, Failure{Machine: m, Err: err})
			errs = append(errs, err)
		}
	}
	return out, kerrors.NewAggregate(append(errs, kit.WaitForCache(ctx, c.Objects, kit.Created, out.Objects...)))
}

// missing lists the objects of one Machine that the owner must create.
func (c *Creator) missing(ctx context.Context, o Owned, makers Makers, found Finder) ([]plan.MachineObjectSlot, []error) {
	m := o.Machine
	state := machineObjects(m)
	state.Adopting = o.Adopting
	state.Bootstrap.Clone = makers.reference(plan.BootstrapObject, m.Name)
	state.Infrastructure.Clone = makers.reference(plan.InfrastructureObject, m.Name)
	var errs []error
	for _, slot := range state.ObjectsToCheck() {
		obj := state.Object(slot)
		exists, err := found.Exists(ctx, m, slot, obj.Ref)
		if err != nil {
			errs = append(errs, err)
			obj.Exists = true // unknown: nothing is created on a guess
			continue
		}
		obj.Exists = exists
		// Reading managed fields costs a JSON decode, so it is left for the
		// rare Machine whose object is missing.
		obj.RefSetByOwner = !exists && contract.SetByManager(m, c.FieldManager, referencePath(slot)...)
	}
	return state.ObjectsToCreate(), errs
}

// machineObjects is what plan.MachineObjects learns from the Machine alone.
func machineObjects(m *clusterv1.Machine) plan.MachineObjects {
	return plan.MachineObjects{
		Deleting:                  !m.DeletionTimestamp.IsZero(),
		InfrastructureProvisioned: ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false),
		BootstrapDataSecretSet:    ptr.Deref(m.Spec.Bootstrap.DataSecretName, "") != "",
		Bootstrap:                 plan.MachineObject{Ref: m.Spec.Bootstrap.ConfigRef},
		Infrastructure:            plan.MachineObject{Ref: m.Spec.InfrastructureRef},
	}
}

// referencePath is where a Machine holds its reference in slot.
func referencePath(slot plan.MachineObjectSlot) []string {
	if slot == plan.BootstrapObject {
		return []string{"spec", "bootstrap", "configRef"}
	}
	return []string{"spec", "infrastructureRef"}
}

// repairMachine makes the missing objects of one Machine, after reading the
// Machine again: the Machine controller deletes a Machine's objects only
// once the shared cache shows the Machine deleting, so a fresh read tells a
// deletion in progress from objects never created.
func (c *Creator) repairMachine(ctx context.Context, m *clusterv1.Machine, makers Makers, missing []plan.MachineObjectSlot) ([]client.Object, error) {
	fresh := &clusterv1.Machine{}
	if err := c.Machines.Get(ctx, client.ObjectKeyFromObject(m), fresh); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if fresh.UID != m.UID || !machineObjects(fresh).Repairable() {
		return nil, nil
	}
	log := ctrl.LoggerFrom(ctx)
	state := machineObjects(m)
	var made []client.Object
	for _, slot := range missing {
		objs, err := makeObjects(ctx, m, makers, slot)
		made = append(made, objs...)
		if err != nil {
			return made, err
		}
		ref := state.Object(slot).Ref
		log.Info("Created a missing object of a Machine", "Machine", m.Name, "object", slot.String(), "kind", ref.Kind, "name", ref.Name)
	}
	return made, nil
}
