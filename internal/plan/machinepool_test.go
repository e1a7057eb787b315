package plan

import (
	"reflect"
	"testing"
)

func TestNextPoolStep(t *testing.T) {
	ready := func(name string) PoolInstance { return PoolInstance{Name: name, UpToDate: true, Ready: true} }
	old := func(name string) PoolInstance { return PoolInstance{Name: name, Ready: true} }
	for _, tc := range []struct {
		name      string
		instances []PoolInstance
		replicas  int
		strategy  PoolStrategy
		want      PoolStep
	}{
		{name: "empty pool scales up", replicas: 2, want: PoolStep{Create: 2}},
		{name: "steady", instances: []PoolInstance{ready("a"), ready("b")}, replicas: 2, want: PoolStep{}},
		{name: "scale up 2 to 4", instances: []PoolInstance{ready("a"), ready("b")}, replicas: 4, want: PoolStep{Create: 2}},
		{name: "scale down 4 to 1 by name", instances: []PoolInstance{ready("d"), ready("a"), ready("c"), ready("b")}, replicas: 1,
			want: PoolStep{Delete: []string{"a", "b", "c"}}},
		{name: "scale down takes the annotated, then unhealthy, then not ready",
			instances: []PoolInstance{ready("a"), {Name: "b", UpToDate: true}, {Name: "c", UpToDate: true, Ready: true, Unhealthy: true},
				{Name: "d", UpToDate: true, Ready: true, DeleteAnnotation: true}},
			replicas: 1, want: PoolStep{Delete: []string{"d", "c", "b"}}},
		{name: "instances being deleted do not count", instances: []PoolInstance{ready("a"), {Name: "b", Deleting: true}}, replicas: 2,
			want: PoolStep{Create: 1}},
		{name: "scale to zero", instances: []PoolInstance{ready("a"), old("b")}, replicas: 0, want: PoolStep{Delete: []string{"b", "a"}}},
		{name: "negative replicas are zero", instances: []PoolInstance{ready("a")}, replicas: -1, want: PoolStep{Delete: []string{"a"}}},
		// Rollouts.
		{name: "rollout starts with one surge", instances: []PoolInstance{old("a"), old("b")}, replicas: 2,
			strategy: PoolStrategy{MaxSurge: 1}, want: PoolStep{Create: 1}},
		{name: "surged instance not ready yet: wait", instances: []PoolInstance{old("a"), old("b"), {Name: "c", UpToDate: true}}, replicas: 2,
			strategy: PoolStrategy{MaxSurge: 1}, want: PoolStep{}},
		{name: "surged instance ready: one old goes", instances: []PoolInstance{old("a"), old("b"), ready("c")}, replicas: 2,
			strategy: PoolStrategy{MaxSurge: 1}, want: PoolStep{Delete: []string{"a"}}},
		{name: "old one going: the next surges", instances: []PoolInstance{{Name: "a", Deleting: true}, old("b"), ready("c")}, replicas: 2,
			strategy: PoolStrategy{MaxSurge: 1}, want: PoolStep{Create: 1}},
		{name: "max unavailable without surge deletes first", instances: []PoolInstance{old("a"), old("b")}, replicas: 2,
			strategy: PoolStrategy{MaxUnavailable: 1}, want: PoolStep{Delete: []string{"a"}}},
		{name: "zero strategy means surge one", instances: []PoolInstance{old("a")}, replicas: 1, want: PoolStep{Create: 1}},
		{name: "not-ready old instance is replaced at no cost", instances: []PoolInstance{{Name: "a"}, ready("b"), ready("c")}, replicas: 2,
			strategy: PoolStrategy{MaxSurge: 1}, want: PoolStep{Delete: []string{"a"}}},
		{name: "scale down during rollout drops old ones", instances: []PoolInstance{old("a"), old("b"), ready("c")}, replicas: 1,
			strategy: PoolStrategy{MaxSurge: 1}, want: PoolStep{Delete: []string{"a", "b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NextPoolStep(tc.instances, tc.replicas, tc.strategy)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestNextPoolStepRollsOut runs a pool through a whole rollout, making each
// step's new instances ready and its deletions complete at once, and checks
// that the rollout ends with only new instances, never more than the surge
// over, never fewer ready than allowed.
func TestNextPoolStepRollsOut(t *testing.T) {
	for _, strategy := range []PoolStrategy{{MaxSurge: 1}, {MaxSurge: 2}, {MaxUnavailable: 1}, {MaxSurge: 1, MaxUnavailable: 1}} {
		pool := []PoolInstance{{Name: "old-0", Ready: true}, {Name: "old-1", Ready: true}, {Name: "old-2", Ready: true}}
		const replicas = 3
		made := 0
		for round := 0; ; round++ {
			if round > 20 {
				t.Fatalf("%+v: no end to the rollout: %+v", strategy, pool)
			}
			step := NextPoolStep(pool, replicas, strategy)
			if step.Create == 0 && len(step.Delete) == 0 {
				break
			}
			gone := map[string]bool{}
			for _, n := range step.Delete {
				gone[n] = true
			}
			var next []PoolInstance
			readyLeft := 0
			for _, in := range pool {
				if !gone[in.Name] {
					next = append(next, in)
					if in.Ready {
						readyLeft++
					}
				}
			}
			if readyLeft < replicas-strategy.MaxUnavailable {
				t.Fatalf("%+v: round %d leaves %d ready", strategy, round, readyLeft)
			}
			for i := 0; i < step.Create; i++ {
				next = append(next, PoolInstance{Name: "new-" + string(rune('a'+made)), UpToDate: true, Ready: true})
				made++
			}
			if len(next) > replicas+max(strategy.MaxSurge, 0) {
				t.Fatalf("%+v: round %d has %d instances", strategy, round, len(next))
			}
			pool = next
		}
		if len(pool) != replicas {
			t.Fatalf("%+v: ended with %+v", strategy, pool)
		}
		for _, in := range pool {
			if !in.UpToDate {
				t.Errorf("%+v: %s left out of date", strategy, in.Name)
			}
		}
	}
}

func TestPoolMachines(t *testing.T) {
	create, orphaned := PoolMachines([]string{"c", "a", "b"}, []PoolMachine{
		{Name: "a", InfraMachine: "a"},
		{Name: "x", InfraMachine: "x"},
		{Name: "y", InfraMachine: "y", Deleting: true},
	})
	if !reflect.DeepEqual(create, []string{"b", "c"}) || !reflect.DeepEqual(orphaned, []string{"x"}) {
		t.Errorf("create %v, orphaned %v", create, orphaned)
	}
}
