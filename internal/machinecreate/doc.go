// Package machinecreate creates an owner's Machines together with their
// bootstrap and infrastructure objects, Machines first, and creates what a
// crash left missing. Every controller that makes Machines (a MachineSet, a
// control plane, and whatever else comes to own Machines) goes through it,
// so that they all follow the same protocol and the same rules for repairs.
//
// Creator.Create creates a Machine whose references already name its
// objects, waits until the manager's cache shows it, then creates the
// objects with the Machine as their controller: the controllers that act on
// a new object look its Machine up in that cache, and the Machine
// controller finds nothing to take over. Creator.Repair finds the Machines
// whose objects were never created (the manager stopped, or a create
// failed, in between) and creates them; plan.MachineObjects decides which.
//
// An owner says how its objects are made through a Maker per object
// (TemplateClone for one cloned from a provider template) and how it knows
// whether one exists through a Finder (InCache looks it up in a cache).
// docs/machines-first.md tells the protocol at more length.
package machinecreate
