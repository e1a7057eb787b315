package chaos

import (
	"math/rand/v2"
	"time"
)

// Target is the process a fault ends.
type Target string

const (
	// Manager is the `capstan manager` process running every controller
	// and the in-memory provider.
	Manager Target = "manager"
	// Plane is the `capstan up` process holding etcd and the API server.
	Plane Target = "plane"
)

// Kill is one fault of the schedule: After the previous one (or the start
// of its phase) the Target is killed with SIGKILL and, Down later, started
// again.
type Kill struct {
	Phase  int
	After  time.Duration
	Down   time.Duration
	Target Target
}

// Gaps bound the schedule's waits: between faults (long enough for the
// manager to get some work done, short enough to land mid-way) and how long
// a killed process stays down.
type Gaps struct {
	MinAfter, MaxAfter time.Duration
	MaxDown            time.Duration
}

// Plan is the kill schedule a seed gives: managerKills spread as evenly as
// they go over the phases (the earlier phases take the remainder), and
// planeKills each put in a random phase at a random place. The same seed
// gives the same schedule, so that a failing run can be repeated.
func Plan(seed int64, phases, managerKills, planeKills int, g Gaps) [][]Kill {
	if phases <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	out := make([][]Kill, phases)
	for p := range phases {
		n := managerKills / phases
		if p < managerKills%phases {
			n++
		}
		for range n {
			out[p] = append(out[p], Kill{Phase: p, Target: Manager})
		}
	}
	for range planeKills {
		p := rng.IntN(phases)
		at := rng.IntN(len(out[p]) + 1)
		out[p] = append(out[p][:at], append([]Kill{{Phase: p, Target: Plane}}, out[p][at:]...)...)
	}
	for p := range out {
		for i := range out[p] {
			out[p][i].After = between(g.MinAfter, g.MaxAfter)
			out[p][i].Down = between(0, g.MaxDown)
		}
	}
	return out
}
