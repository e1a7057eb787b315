package machinecreate

import (
	"context"
	"fmt"

	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/plan"
)

// Creator creates one owner's Machines and their objects.
type Creator struct {
	// Writer creates Machines with the owner's field manager.
	Writer client.Client
	// FieldManager is the owner's field manager: the managed fields it
	// leaves on a Machine's references tell Repair the owner created it.
	FieldManager string
	// Machines reads Machines from the manager's cache.
	Machines client.Reader
	// Objects reads the objects made for Machines from the cache that will
	// show them to the owner's next reconcile.
	Objects client.Reader
}

// Created is what Create did, and where it stopped.
type Created struct {
	// Machines are the Machines created, in order.
	Machines []*clusterv1.Machine
	// Objects are the objects made for them.
	Objects []client.Object

	// MachineErr is why a Machine could not be created. The ones before it
	// were, and got their objects.
	MachineErr error
	// CacheErr is why the new Machines were not seen in the cache; none of
	// them got objects.
	CacheErr error
	// ObjectsErr is why Machine Unfinished did not get all its objects;
	// the Machines after it got none. Repair creates them later.
	ObjectsErr error
	Unfinished *clusterv1.Machine
}

// Create creates up to n Machines, each one newMachine returns with its
// references set to what makers make for it, then, once the cache shows
// them, their objects. A Machine that cannot be created ends the Machine
// creates, and an object that cannot be created ends the object creates.
// Create waits until the cache shows the objects made, so that the next
// reconcile does not take them for missing. The error it returns holds
// every failure.
//
// A Machine whose objects could not be made stays: Repair makes them on a
// later reconcile, as after a crash between the creates. Deleting it instead
// would be a second way to recover, and not one a crash could not
// interrupt either.
func (c *Creator) Create(ctx context.Context, n int, newMachine func() (*clusterv1.Machine, error), makers Makers) (Created, error) {
	log := ctrl.LoggerFrom(ctx)
	var out Created
	for range n {
		m, err := c.createMachine(ctx, newMachine, makers)
		if err != nil {
			out.MachineErr = err
			break
		}
		log.Info("Created Machine", "Machine", m.Name)
		out.Machines = append(out.Machines, m)
	}
	// The objects are created only once the cache shows their Machines: the
	// controllers that act on a new object (the bootstrap and
	// infrastructure providers) look up its Machine in the same cache when
	// the object appears, and may not look again.
	out.CacheErr = kit.WaitForCache(ctx, c.Machines, kit.Created, out.Machines...)
	if out.CacheErr == nil {
		for _, m := range out.Machines {
			made, err := makeObjects(ctx, m, makers, plan.BootstrapObject, plan.InfrastructureObject)
			out.Objects = append(out.Objects, made...)
			if err != nil {
				out.ObjectsErr, out.Unfinished = err, m
				break
			}
		}
	}
	seen := kit.WaitForCache(ctx, c.Objects, kit.Created, out.Objects...)
	return out, kerrors.NewAggregate([]error{out.MachineErr, out.CacheErr, out.ObjectsErr, seen})
}

// createMachine creates the next Machine with references to the objects
// makers make for it.
func (c *Creator) createMachine(ctx context.Context, newMachine func() (*clusterv1.Machine, error), makers Makers) (*clusterv1.Machine, error) {
	m, err := newMachine()
	if err != nil {
		return nil, err
	}
	m.Spec.Bootstrap.ConfigRef = makers.reference(plan.BootstrapObject, m.Name)
	m.Spec.InfrastructureRef = makers.reference(plan.InfrastructureObject, m.Name)
	if err := c.Writer.Create(ctx, m); err != nil {
		return nil, fmt.Errorf("creating Machine %s: %w", m.Name, err)
	}
	return m, nil
}

// makeObjects makes the objects of m in slots, in order, up to the first
// failure; a slot without a maker is skipped.
func makeObjects(ctx context.Context, m *clusterv1.Machine, makers Makers, slots ...plan.MachineObjectSlot) ([]client.Object, error) {
	var made []client.Object
	for _, slot := range slots {
		mk := makers.maker(slot)
		if mk == nil {
			continue
		}
		obj, err := mk.Make(ctx, m)
		if err != nil {
			return made, err
		}
		made = append(made, obj)
	}
	return made, nil
}
