package plan_test

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
)

const (
	random = clusterv1.RandomMachineSetDeletionOrder
	newest = clusterv1.NewestMachineSetDeletionOrder
	oldest = clusterv1.OldestMachineSetDeletionOrder
)

// machine builds a Machine created the given number of hours after epoch.
func machine(name string, hour int, flags ...string) plan.Machine {
	m := plan.Machine{Name: name, Created: epoch.Add(time.Duration(hour) * time.Hour)}
	for _, f := range flags {
		switch f {
		case "annotated":
			m.DeleteAnnotation = true
		case "unhealthy":
			m.Unhealthy = true
		case "notready":
			m.NotReady = true
		case "deleting":
			m.Deleting = true
		default:
			panic(f)
		}
	}
	return m
}

func TestMachinesToDelete(t *testing.T) {
	tests := []struct {
		name     string
		machines []plan.Machine
		n        int
		order    clusterv1.MachineSetDeletionOrder
		want     []string
	}{
		{
			name:     "Oldest deletes the oldest first",
			machines: []plan.Machine{machine("b", 2), machine("a", 3), machine("c", 1)},
			n:        2, order: oldest,
			want: []string{"c", "b"},
		},
		{
			name:     "Newest deletes the newest first",
			machines: []plan.Machine{machine("b", 2), machine("a", 3), machine("c", 1)},
			n:        2, order: newest,
			want: []string{"a", "b"},
		},
		{
			name:     "equal creation times fall back to the name",
			machines: []plan.Machine{machine("y", 1), machine("x", 1), machine("z", 1)},
			n:        2, order: oldest,
			want: []string{"x", "y"},
		},
		{
			name:     "Machines being deleted count towards n",
			machines: []plan.Machine{machine("a", 1), machine("b", 2, "deleting"), machine("c", 3)},
			n:        2, order: oldest,
			want: []string{"a"},
		},
		{
			name:     "Machines being deleted are never chosen again",
			machines: []plan.Machine{machine("a", 1, "deleting", "annotated"), machine("b", 2, "deleting")},
			n:        2, order: oldest,
			want: nil,
		},
		{
			name:     "more Machines being deleted than n",
			machines: []plan.Machine{machine("a", 1, "deleting"), machine("b", 2, "deleting"), machine("c", 3)},
			n:        1, order: oldest,
			want: nil,
		},
		{
			name:     "n above the Machines there are",
			machines: []plan.Machine{machine("a", 1), machine("b", 2, "deleting")},
			n:        5, order: newest,
			want: []string{"a"},
		},
		{
			name:     "n of 0 deletes nothing",
			machines: []plan.Machine{machine("a", 1, "annotated")},
			n:        0, order: oldest,
			want: nil,
		},
		{
			name:     "negative n deletes nothing",
			machines: []plan.Machine{machine("a", 1, "annotated")},
			n:        -1, order: oldest,
			want: nil,
		},
		{
			name: "annotated Machines go first, whatever their state or age",
			machines: []plan.Machine{
				machine("old-unhealthy", 1, "unhealthy"), machine("old-notready", 2, "notready"), machine("new-annotated", 9, "annotated"),
			},
			n: 1, order: oldest,
			want: []string{"new-annotated"},
		},
		{
			name: "unhealthy Machines go before Machines that are not ready",
			machines: []plan.Machine{
				machine("old-notready", 1, "notready"), machine("new-unhealthy", 9, "unhealthy"), machine("oldest", 0),
			},
			n: 2, order: oldest,
			want: []string{"new-unhealthy", "old-notready"},
		},
		{
			name:     "Machines that are not ready go before ready ones",
			machines: []plan.Machine{machine("oldest", 0), machine("new-notready", 9, "notready")},
			n:        1, order: oldest,
			want: []string{"new-notready"},
		},
		{
			name: "the order applies within each group",
			machines: []plan.Machine{
				machine("a1", 1, "annotated"), machine("a2", 2, "annotated"), machine("u1", 1, "unhealthy"), machine("u2", 2, "unhealthy"),
			},
			n: 4, order: newest,
			want: []string{"a2", "a1", "u2", "u1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan.MachinesToDelete(tt.machines, tt.n, tt.order)
			if !slices.Equal(got, tt.want) {
				t.Errorf("MachinesToDelete = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMachinesToDeleteRandom(t *testing.T) {
	var machines []plan.Machine
	var byName []string
	for i := range 20 {
		name := fmt.Sprintf("md-0-abcde-%02d", i)
		machines = append(machines, machine(name, i))
		byName = append(byName, name)
	}
	got := plan.MachinesToDelete(machines, 20, random)
	if slices.Equal(got, byName) || slices.Equal(got, reversed(byName)) {
		t.Errorf("Random deletes in name or age order: %v", got)
	}
	for _, order := range []clusterv1.MachineSetDeletionOrder{"", "Unknown"} {
		if other := plan.MachinesToDelete(machines, 20, order); !slices.Equal(other, got) {
			t.Errorf("order %q = %v, want Random's %v", order, other, got)
		}
	}
	// The same Machine is chosen whatever else the set holds, so that a
	// reconciler that sees a Machine appear does not change its mind.
	first := got[0]
	for i := range machines {
		if machines[i].Name == first {
			continue
		}
		rest := slices.Delete(slices.Clone(machines), i, i+1)
		if pick := plan.MachinesToDelete(rest, 1, random); !slices.Equal(pick, []string{first}) {
			t.Fatalf("without %s, Random picks %v, want [%s]", machines[i].Name, pick, first)
		}
	}
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// deletionRank is the test's own statement of the priority rules: the group
// a Machine belongs to, then its place in the order.
func deletionRank(m plan.Machine, order clusterv1.MachineSetDeletionOrder) func(plan.Machine) int {
	group := func(m plan.Machine) int {
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
	hash := func(name string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(name))
		return h.Sum64()
	}
	// The returned function compares m with another Machine: negative when
	// m must go first.
	return func(o plan.Machine) int {
		if c := cmp.Compare(group(m), group(o)); c != 0 {
			return c
		}
		var c int
		switch order {
		case newest:
			c = o.Created.Compare(m.Created)
		case oldest:
			c = m.Created.Compare(o.Created)
		default:
			c = cmp.Compare(hash(m.Name), hash(o.Name))
		}
		if c != 0 {
			return c
		}
		return cmp.Compare(m.Name, o.Name)
	}
}

func TestMachinesToDeleteProperties(t *testing.T) {
	orders := []clusterv1.MachineSetDeletionOrder{"", random, newest, oldest}
	flags := []string{"annotated", "unhealthy", "notready", "deleting"}
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 5))
		var machines []plan.Machine
		deleting := 0
		for i := range rng.IntN(12) {
			var fs []string
			for _, f := range flags {
				if rng.IntN(4) == 0 {
					fs = append(fs, f)
				}
			}
			m := machine(fmt.Sprintf("m-%d", i), rng.IntN(5), fs...)
			if m.Deleting {
				deleting++
			}
			machines = append(machines, m)
		}
		n := rng.IntN(14) - 1
		order := orders[rng.IntN(len(orders))]

		got := plan.MachinesToDelete(machines, n, order)

		if want := max(0, min(n-deleting, len(machines)-deleting)); len(got) != want {
			t.Fatalf("seed %d: chose %d Machines, want %d (n %d, %d of %d being deleted)", seed, len(got), want, n, deleting, len(machines))
		}
		chosen := map[string]bool{}
		byName := map[string]plan.Machine{}
		for _, m := range machines {
			byName[m.Name] = m
		}
		for i, name := range got {
			m, ok := byName[name]
			switch {
			case !ok:
				t.Fatalf("seed %d: chose unknown Machine %s", seed, name)
			case chosen[name]:
				t.Fatalf("seed %d: chose %s twice", seed, name)
			case m.Deleting:
				t.Fatalf("seed %d: chose %s, which is already being deleted", seed, name)
			case i > 0 && deletionRank(byName[got[i-1]], order)(m) > 0:
				t.Fatalf("seed %d: %s is listed before %s, which must go first", seed, got[i-1], name)
			}
			chosen[name] = true
		}
		for _, kept := range machines {
			if kept.Deleting || chosen[kept.Name] {
				continue
			}
			for _, name := range got {
				if deletionRank(kept, order)(byName[name]) < 0 {
					t.Fatalf("seed %d: chose %s but kept %s, which must go first (order %q)", seed, name, kept.Name, order)
				}
			}
		}

		rng.Shuffle(len(machines), func(i, j int) { machines[i], machines[j] = machines[j], machines[i] })
		if again := plan.MachinesToDelete(machines, n, order); !slices.Equal(again, got) {
			t.Fatalf("seed %d: the choice depends on input order: %v, then %v", seed, got, again)
		}
	}
}
