package plan

import (
	"cmp"
	"hash/fnv"
	"slices"
	"time"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// Machine is what the scale-down choice needs to know of one Machine of a
// MachineSet. Names are unique within the set.
type Machine struct {
	Name    string
	Created time.Time

	// DeleteAnnotation is set when the Machine carries
	// cluster.x-k8s.io/delete-machine: someone (a user, the cluster
	// autoscaler) asked for this one to go first.
	DeleteAnnotation bool

	// Unhealthy is set when a MachineHealthCheck marked the Machine for
	// remediation (its OwnerRemediated condition is False).
	Unhealthy bool

	// NotReady is set when the Machine has no Node yet, or its Node is not
	// ready. Callers should also set it for a Machine that is not yet
	// available, so that a scale-down never costs availability while such a
	// Machine is left.
	NotReady bool

	// Deleting is set when the Machine already has a deletion timestamp.
	Deleting bool
}

// MachinesToDelete chooses which Machines a MachineSet deletes to shed n
// Machines, most dispensable first.
//
// Machines already being deleted count towards n and are never chosen
// again, so a reconciler that runs twice before its deletions show deletes
// nothing extra. The rest go in this order: those with the delete-machine
// annotation, then unhealthy ones, then those without a ready Node, then the
// others; within each group, by order. Random (the default, also used for
// values the API would refuse) ranks Machines by a hash of their names: it
// spreads deletions without favouring age, yet gives the same answer every
// time for the same Machines.
func MachinesToDelete(machines []Machine, n int, order clusterv1.MachineSetDeletionOrder) []string {
	type ranked struct {
		Machine
		group int
		hash  uint64
	}
	var candidates []ranked
	for _, m := range machines {
		if m.Deleting {
			n--
			continue
		}
		candidates = append(candidates, ranked{Machine: m, group: deletionGroup(m), hash: nameHash(m.Name)})
	}
	n = min(n, len(candidates))
	if n <= 0 {
		return nil
	}
	slices.SortFunc(candidates, func(a, b ranked) int {
		if c := cmp.Compare(a.group, b.group); c != 0 {
			return c
		}
		var c int
		switch order {
		case clusterv1.NewestMachineSetDeletionOrder:
			c = b.Created.Compare(a.Created)
		case clusterv1.OldestMachineSetDeletionOrder:
			c = a.Created.Compare(b.Created)
		default:
			c = cmp.Compare(a.hash, b.hash)
		}
		if c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	names := make([]string, n)
	for i := range names {
		names[i] = candidates[i].Name
	}
	return names
}

// deletionGroup ranks why a Machine should go first; lower goes sooner.
func deletionGroup(m Machine) int {
	switch {
	case m.DeleteAnnotation:
		return 0
	case m.Unhealthy:
		return 1
	case m.NotReady:
		return 2
	}
	return 3
}

func nameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}
