package plan

import (
	"cmp"
	"slices"
)

// PoolInstance is what a machine pool provider's next step needs to know
// of one instance of the pool.
type PoolInstance struct {
	Name string
	// UpToDate: the instance was made from the pool's current template and
	// version.
	UpToDate bool
	// Ready: the instance's Node is ready.
	Ready bool
	// DeleteAnnotation: its Machine carries cluster.x-k8s.io/delete-machine
	// (the cluster autoscaler or a user picked it).
	DeleteAnnotation bool
	// Unhealthy: a MachineHealthCheck marked its Machine for remediation.
	Unhealthy bool
	// Deleting: its deletion has started already.
	Deleting bool
}

// PoolStrategy bounds a pool's rolling replacement: at most MaxSurge
// instances over the wanted number, at most MaxUnavailable of the wanted
// number not ready. Both zero is taken as MaxSurge 1, so that a rollout
// always makes progress.
type PoolStrategy struct {
	MaxSurge, MaxUnavailable int
}

// PoolStep is what a pool provider does next: create Create new (up to date)
// instances and delete the named ones.
type PoolStep struct {
	Create int
	Delete []string
}

// NextPoolStep decides how a machine pool provider brings its instances to
// replicas up-to-date, ready ones.
//
// Instances already being deleted count for nothing: not as instances, not
// as ready, so a provider that acts twice before its deletions show never
// goes below what the strategy allows. Extra instances go first, most
// dispensable first (delete-machine annotation, unhealthy, out of date and
// not ready, out of date, not ready, by name). Out-of-date instances are
// then replaced within the strategy: new ones are surged in up to
// replicas+MaxSurge, and old ones go as long as replicas-MaxUnavailable
// instances stay ready (an old one that is not ready costs nothing to
// remove).
func NextPoolStep(instances []PoolInstance, replicas int, strategy PoolStrategy) PoolStep {
	if strategy.MaxSurge <= 0 && strategy.MaxUnavailable <= 0 {
		strategy.MaxSurge = 1
	}
	replicas = max(replicas, 0)
	var live []PoolInstance
	current, upToDate, ready := 0, 0, 0
	for _, in := range instances {
		if in.Deleting {
			continue
		}
		live = append(live, in)
		current++
		if in.UpToDate {
			upToDate++
		}
		if in.Ready {
			ready++
		}
	}
	slices.SortFunc(live, func(a, b PoolInstance) int {
		return cmp.Or(cmp.Compare(poolRank(a), poolRank(b)), cmp.Compare(a.Name, b.Name))
	})

	var step PoolStep
	drop := func(in PoolInstance) {
		step.Delete = append(step.Delete, in.Name)
		current--
		if in.Ready {
			ready--
		}
		if in.UpToDate {
			upToDate--
		}
	}
	// Out of a rollout the pool holds replicas instances; during one (while
	// new instances are still wanted), up to MaxSurge more.
	limit := replicas
	if upToDate < current && upToDate < replicas {
		limit = replicas + strategy.MaxSurge
	}
	for len(live) > 0 && current > limit {
		// Shed the extra ones, out-of-date ones first: a scale-down during a
		// rollout finishes part of it.
		drop(live[0])
		live = live[1:]
	}
	if upToDate < replicas {
		step.Create = min(max(replicas+strategy.MaxSurge-current, replicas-current, 0), replicas-upToDate)
	}
	// Out-of-date instances go while enough stay ready and enough stay at
	// all (counting the new ones being made).
	minLeft := replicas - strategy.MaxUnavailable
	for _, in := range live {
		if in.UpToDate || current+step.Create-1 < minLeft || (in.Ready && ready-1 < minLeft) {
			continue
		}
		drop(in)
	}
	return step
}

// poolRank orders instances from most to least dispensable.
func poolRank(in PoolInstance) int {
	switch {
	case in.DeleteAnnotation:
		return 0
	case in.Unhealthy:
		return 1
	case !in.UpToDate && !in.Ready:
		return 2
	case !in.UpToDate:
		return 3
	case !in.Ready:
		return 4
	default:
		return 5
	}
}

// PoolMachine is one Machine the core made for an instance of a pool: its
// name and the infrastructure machine it stands for.
type PoolMachine struct {
	Name, InfraMachine string
	Deleting           bool
}

// PoolMachines lines a pool's Machines up with the infrastructure machines
// its provider made: the infrastructure machines that have no Machine yet
// (to create one for, by the same name), and the Machines whose
// infrastructure machine is gone (to delete: the instance no longer
// exists). Both come back sorted.
func PoolMachines(infraMachines []string, machines []PoolMachine) (create, orphaned []string) {
	have := map[string]bool{}
	for _, m := range machines {
		have[m.InfraMachine] = true
	}
	exists := map[string]bool{}
	for _, name := range infraMachines {
		exists[name] = true
		if !have[name] {
			create = append(create, name)
		}
	}
	for _, m := range machines {
		if !exists[m.InfraMachine] && !m.Deleting {
			orphaned = append(orphaned, m.Name)
		}
	}
	slices.Sort(create)
	slices.Sort(orphaned)
	return create, orphaned
}
