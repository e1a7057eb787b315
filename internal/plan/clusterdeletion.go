package plan

import (
	"fmt"
	"slices"
	"strings"
)

// Object is one object that still exists while a Cluster is deleted.
type Object struct {
	// Kind is used only in messages, for objects whose kind varies (the
	// control plane and the infrastructure cluster); it may be empty.
	Kind string
	Name string

	// Deleting is set when the object already has a deletion timestamp.
	Deleting bool
}

// ClusterDescendants is what still exists of a Cluster being deleted.
type ClusterDescendants struct {
	MachineDeployments []Object

	// MachineSets are those that no MachineDeployment owns.
	MachineSets []Object

	MachinePools []Object

	// WorkerMachines are worker Machines that no MachineSet or MachinePool
	// owns; the Cluster deletes them itself.
	WorkerMachines []Object

	// OwnedWorkerMachines are worker Machines that a MachineSet or
	// MachinePool owns. Their owners delete them (and may already be gone,
	// leaving them to the garbage collector), but the control plane must
	// outlive them all.
	OwnedWorkerMachines []Object

	// ControlPlane is the control plane object; nil when the Cluster has
	// none, or it is gone.
	ControlPlane *Object

	// ControlPlaneMachines are the control-plane Machines. While the control
	// plane object exists it removes them; without one, the Cluster does.
	ControlPlaneMachines []Object

	// InfrastructureCluster is the provider's cluster object; nil when the
	// Cluster has none, or it is gone.
	InfrastructureCluster *Object
}

// ClusterDeletionStep is what to do next for a Cluster being deleted.
type ClusterDeletionStep struct {
	// Objects to delete now, by name, each sorted. Objects already being
	// deleted are left out.
	MachineDeployments    []string
	MachineSets           []string
	MachinePools          []string
	Machines              []string
	ControlPlane          bool
	InfrastructureCluster bool

	// Waiting says what the deletion waits for, for the Cluster's Deleting
	// condition; empty when Done.
	Waiting string

	// Done is set when nothing remains and the Cluster's finalizer may go.
	Done bool
}

// NextClusterDeletionStep decides the next step of deleting a Cluster, in
// tiers: workers first (MachineDeployments, MachineSets, MachinePools and
// worker Machines, all at once since none depends on another), then the
// control plane once no worker Machine is left, since draining a worker
// needs the cluster's API server, then the infrastructure cluster once the
// control plane and its Machines are gone, since they run on its network and
// load balancer. Each step deletes every object of the first tier that is
// not empty and waits for that tier to empty.
func NextClusterDeletionStep(d ClusterDescendants) ClusterDeletionStep {
	var step ClusterDeletionStep

	workerMachines := append(append([]Object(nil), d.WorkerMachines...), d.OwnedWorkerMachines...)
	if len(d.MachineDeployments)+len(d.MachineSets)+len(d.MachinePools)+len(workerMachines) > 0 {
		step.MachineDeployments = toDelete(d.MachineDeployments)
		step.MachineSets = toDelete(d.MachineSets)
		step.MachinePools = toDelete(d.MachinePools)
		step.Machines = toDelete(d.WorkerMachines)
		step.Waiting = waitingFor(
			named(d.MachineDeployments, "MachineDeployment"),
			named(d.MachineSets, "MachineSet"),
			named(d.MachinePools, "MachinePool"),
			named(workerMachines, "worker Machine"),
		)
		return step
	}

	if d.ControlPlane != nil || len(d.ControlPlaneMachines) > 0 {
		var what []string
		if cp := d.ControlPlane; cp != nil {
			step.ControlPlane = !cp.Deleting
			what = append(what, describe(*cp, "control plane"))
		} else {
			step.Machines = toDelete(d.ControlPlaneMachines)
		}
		what = append(what, named(d.ControlPlaneMachines, "control plane Machine"))
		step.Waiting = waitingFor(what...)
		return step
	}

	if ic := d.InfrastructureCluster; ic != nil {
		step.InfrastructureCluster = !ic.Deleting
		step.Waiting = waitingFor(describe(*ic, "infrastructure cluster"))
		return step
	}

	step.Done = true
	return step
}

func toDelete(objs []Object) []string {
	var names []string
	for _, o := range objs {
		if !o.Deleting {
			names = append(names, o.Name)
		}
	}
	slices.Sort(names)
	return names
}

func describe(o Object, fallbackKind string) string {
	kind := o.Kind
	if kind == "" {
		kind = fallbackKind
	}
	return kind + " " + o.Name
}

// namedLimit is how many objects of one kind a Deleting message names.
const namedLimit = 5

// named counts objs of noun and names them (the first namedLimit, in
// order), or says nothing when there are none: a deletion that waits says
// exactly for what.
func named(objs []Object, noun string) string {
	if len(objs) == 0 {
		return ""
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	if len(names) > namedLimit {
		names = append(names[:namedLimit], fmt.Sprintf("%d more", len(objs)-namedLimit))
	}
	return fmt.Sprintf("%s (%s)", count(len(objs), noun), joinList(names))
}

// waitingFor joins the non-empty parts into one sentence.
func waitingFor(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return fmt.Sprintf("waiting for %s to be deleted", joinList(kept))
}

// joinList writes "a", "a and b", "a, b and c".
func joinList(items []string) string {
	n := len(items)
	if n < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:n-1], ", ") + " and " + items[n-1]
}
