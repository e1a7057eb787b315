package plan_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"capstan.dev/capstan/internal/plan"
)

// The properties below are checked over seeded random inputs, so a failure
// names the seed that reproduces it.

var (
	surgeChoices       = []intstr.IntOrString{i0, i1, i2, p25, intstr.FromString("50%")}
	unavailableChoices = []intstr.IntOrString{i0, i1, i2, p25, intstr.FromString("50%")}
)

// randomStrategy picks a RollingUpdate strategy that the API accepts and
// that never resolves both limits to 0.
func randomStrategy(rng *rand.Rand) plan.RolloutStrategy {
	s := surgeChoices[rng.IntN(len(surgeChoices))]
	u := unavailableChoices[rng.IntN(len(unavailableChoices))]
	if s == i0 {
		u = []intstr.IntOrString{i1, i2}[rng.IntN(2)]
	}
	return rolling(s, u)
}

func footprint(s plan.MachineSetState, replicas int32) int32 { return max(replicas, s.Machines) }

func keptAvailable(s plan.MachineSetState, replicas int32) int32 {
	return min(min(s.Available, s.Machines-s.Deleting), replicas)
}

// TestPlanRolloutProperties checks every plan over arbitrary states, not
// only those a rollout passes through: it is deterministic whatever the
// order of its input, it is a fixed point (applying it and planning again
// changes nothing), and it never trades away the limits: old sets never
// grow, the up-to-date set never past replicas, the Machines the sets may
// hold never newly exceed replicas+maxSurge, the available Machines they
// keep never newly drop below replicas-maxUnavailable, and neither do the
// Machines they keep.
func TestPlanRolloutProperties(t *testing.T) {
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 1))
		in := plan.RolloutInput{Replicas: int32(rng.IntN(9)), Strategy: randomStrategy(rng)}
		if rng.IntN(3) == 0 {
			in.Strategy = onDelete
		}
		for i := range rng.IntN(5) {
			r, m := int32(rng.IntN(8)), int32(rng.IntN(8))
			x := int32(rng.IntN(int(m) + 1))
			a := int32(rng.IntN(int(m-x) + 1))
			in.MachineSets = append(in.MachineSets, set(fmt.Sprintf("ms-%d", i), rng.IntN(3), rng.IntN(3) == 0, r, m, a, x))
		}
		p, err := plan.PlanRollout(in)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}

		shuffled := in
		shuffled.MachineSets = append([]plan.MachineSetState(nil), in.MachineSets...)
		rng.Shuffle(len(shuffled.MachineSets), func(i, j int) {
			shuffled.MachineSets[i], shuffled.MachineSets[j] = shuffled.MachineSets[j], shuffled.MachineSets[i]
		})
		if p2, _ := plan.PlanRollout(shuffled); !reflect.DeepEqual(p, p2) {
			t.Fatalf("seed %d: the plan depends on input order:\n%+v\n%+v", seed, p, p2)
		}

		applied := applyPlan(in, p, "created")
		if again, err := plan.PlanRollout(applied); err != nil || !again.Empty() {
			t.Fatalf("seed %d: planning again after applying %+v gives %+v (%v)", seed, p, again, err)
		}

		checkPlanLimits(t, seed, in, p, applied)
	}
}

// applyPlan returns the state right after a controller applied p, before any
// Machine changed; a created MachineSet gets the given name.
func applyPlan(in plan.RolloutInput, p plan.RolloutPlan, newName string) plan.RolloutInput {
	to := targets(p)
	out := in
	out.MachineSets = nil
	for _, s := range in.MachineSets {
		s.Replicas = to[s.Name]
		out.MachineSets = append(out.MachineSets, s)
	}
	if p.Create != nil {
		out.MachineSets = append(out.MachineSets, set(newName, 10, true, p.Create.Replicas, 0, 0, 0))
	}
	return out
}

// currentName is the MachineSet a plan treats as up to date: the oldest
// marked so.
func currentName(in plan.RolloutInput) string {
	var best *plan.MachineSetState
	for i, s := range in.MachineSets {
		if !s.UpToDate {
			continue
		}
		if best == nil || s.Created.Before(best.Created) || (s.Created.Equal(best.Created) && s.Name < best.Name) {
			best = &in.MachineSets[i]
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

func checkPlanLimits(t *testing.T, seed uint64, before plan.RolloutInput, p plan.RolloutPlan, after plan.RolloutInput) {
	t.Helper()
	current := currentName(after)
	if p.Create != nil && p.Create.Replicas > before.Replicas {
		t.Fatalf("seed %d: creates a MachineSet with %d replicas, above %d", seed, p.Create.Replicas, before.Replicas)
	}
	var fpBefore, fpAfter, availBefore, availAfter, existingBefore, existingAfter, total int32
	for i, s := range after.MachineSets {
		from := s.Replicas
		if i < len(before.MachineSets) {
			from = before.MachineSets[i].Replicas
			fpBefore += footprint(s, from)
			availBefore += keptAvailable(s, from)
			existingBefore += min(s.Machines-s.Deleting, from)
		}
		existingAfter += min(s.Machines-s.Deleting, s.Replicas)
		if s.Name != current && s.Replicas > from {
			t.Fatalf("seed %d: old MachineSet %s grows from %d to %d", seed, s.Name, from, s.Replicas)
		}
		if s.Name == current && s.Replicas > max(from, before.Replicas) {
			t.Fatalf("seed %d: the up-to-date MachineSet grows past replicas %d to %d", seed, before.Replicas, s.Replicas)
		}
		fpAfter += footprint(s, s.Replicas)
		availAfter += keptAvailable(s, s.Replicas)
		total += s.Replicas
	}
	if before.Strategy.Type == plan.OnDelete {
		if total != before.Replicas {
			t.Fatalf("seed %d: OnDelete plans %d replicas in all, want %d", seed, total, before.Replicas)
		}
		return
	}
	if limit := before.Replicas + p.MaxSurge; fpAfter > max(limit, fpBefore) {
		t.Fatalf("seed %d: the plan allows %d Machines, above %d (and %d before)", seed, fpAfter, limit, fpBefore)
	}
	floor := before.Replicas - p.MaxUnavailable
	if availAfter < min(floor, availBefore) {
		t.Fatalf("seed %d: the plan keeps %d available Machines, below %d (and %d before)", seed, availAfter, floor, availBefore)
	}
	// Machines still starting are what the floor will be reached with, so
	// enough of them stay.
	if existingAfter < min(floor, existingBefore) {
		t.Fatalf("seed %d: the plan keeps %d Machines, too few to reach %d available (and %d before)", seed, existingAfter, floor, existingBefore)
	}
}
