package plan_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"capstan.dev/capstan/internal/plan"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// set builds a MachineSetState created on the given day.
func set(name string, day int, upToDate bool, replicas, machines, available, deleting int32) plan.MachineSetState {
	return plan.MachineSetState{
		Name: name, Created: epoch.AddDate(0, 0, day), UpToDate: upToDate,
		Replicas: replicas, Machines: machines, Available: available, Deleting: deleting,
	}
}

func rolling(surge, unavailable intstr.IntOrString) plan.RolloutStrategy {
	return plan.RolloutStrategy{Type: plan.RollingUpdate, MaxSurge: &surge, MaxUnavailable: &unavailable}
}

var (
	i0, i1, i2 = intstr.FromInt32(0), intstr.FromInt32(1), intstr.FromInt32(2)
	p25        = intstr.FromString("25%")
	onDelete   = plan.RolloutStrategy{Type: plan.OnDelete}
)

// targets maps each MachineSet to its planned replicas, with "+new" for a
// MachineSet to create.
func targets(p plan.RolloutPlan) map[string]int32 {
	m := map[string]int32{}
	for _, t := range p.MachineSets {
		m[t.Name] = t.To
	}
	if p.Create != nil {
		m["+new"] = p.Create.Replicas
	}
	return m
}

func TestPlanRolloutScenarios(t *testing.T) {
	tests := []struct {
		name     string
		replicas int32
		strategy plan.RolloutStrategy
		sets     []plan.MachineSetState
		want     map[string]int32
		// reasons holds a fragment expected in the reason of each named change.
		reasons map[string]string
	}{
		{
			name:     "5 replicas, maxSurge 1, maxUnavailable 0: the new set starts with the one surge Machine",
			replicas: 5, strategy: rolling(i1, i0),
			sets:    []plan.MachineSetState{set("old", 1, false, 5, 5, 5, 0)},
			want:    map[string]int32{"old": 5, "+new": 1},
			reasons: map[string]string{"+new": "with 1 of 5 replicas, keeping at most 6 Machines in all (5 replicas, maxSurge 1)"},
		},
		{
			name:     "5/1/0: the new Machine is not available yet, so nothing moves",
			replicas: 5, strategy: rolling(i1, i0),
			sets: []plan.MachineSetState{set("old", 1, false, 5, 5, 5, 0), set("new", 2, true, 1, 1, 0, 0)},
			want: map[string]int32{"old": 5, "new": 1},
		},
		{
			name:     "5/1/0: the new Machine is available, so one old Machine goes",
			replicas: 5, strategy: rolling(i1, i0),
			sets:    []plan.MachineSetState{set("old", 1, false, 5, 5, 5, 0), set("new", 2, true, 1, 1, 1, 0)},
			want:    map[string]int32{"old": 4, "new": 1},
			reasons: map[string]string{"old": "from 5 to 4 replicas: removes 1 available Machine, keeping at least 5 available (5 replicas, maxUnavailable 0)"},
		},
		{
			name:     "5/1/0: the old Machine is still being deleted, so the new set waits",
			replicas: 5, strategy: rolling(i1, i0),
			sets: []plan.MachineSetState{set("old", 1, false, 4, 5, 4, 1), set("new", 2, true, 1, 1, 1, 0)},
			want: map[string]int32{"old": 4, "new": 1},
		},
		{
			name:     "5/1/0: the old Machine is gone, so the new set grows",
			replicas: 5, strategy: rolling(i1, i0),
			sets:    []plan.MachineSetState{set("old", 1, false, 4, 4, 4, 0), set("new", 2, true, 1, 1, 1, 0)},
			want:    map[string]int32{"old": 4, "new": 2},
			reasons: map[string]string{"new": "scale up from 1 to 2 of 5 replicas"},
		},
		{
			name:     "25%/25% of 10 replicas: maxSurge rounds up to 3, maxUnavailable down to 2",
			replicas: 10, strategy: rolling(p25, p25),
			sets: []plan.MachineSetState{set("old", 1, false, 10, 10, 10, 0)},
			want: map[string]int32{"old": 8, "+new": 3},
		},
		{
			name:     "25%/25% of 4 replicas, half way",
			replicas: 4, strategy: rolling(p25, p25),
			sets: []plan.MachineSetState{set("old", 1, false, 2, 2, 2, 0), set("new", 2, true, 2, 2, 2, 0)},
			want: map[string]int32{"old": 1, "new": 3},
		},
		{
			name:     "scale up during a rollout: the new set takes the extra replicas",
			replicas: 8, strategy: rolling(i1, i0),
			sets:    []plan.MachineSetState{set("old", 1, false, 4, 4, 4, 0), set("new", 2, true, 2, 2, 2, 0)},
			want:    map[string]int32{"old": 4, "new": 5},
			reasons: map[string]string{"new": "scale up from 2 to 5 of 8 replicas, keeping at most 9 Machines in all (8 replicas, maxSurge 1)"},
		},
		{
			name:     "scale down during a rollout: old Machines go first",
			replicas: 2, strategy: rolling(i1, i0),
			sets: []plan.MachineSetState{set("old", 1, false, 4, 4, 4, 0), set("new", 2, true, 2, 2, 2, 0)},
			want: map[string]int32{"old": 0, "new": 2},
		},
		{
			name:     "scale down during a rollout: up-to-date Machines not yet created wait for old ones to go",
			replicas: 2, strategy: rolling(i1, i0),
			sets:    []plan.MachineSetState{set("old", 1, false, 2, 2, 2, 0), set("new", 2, true, 2, 1, 1, 0)},
			want:    map[string]int32{"old": 1, "new": 1},
			reasons: map[string]string{"new": "scale down from 2 to 1 of 2 replicas, keeping at most 3 Machines in all (2 replicas, maxSurge 1)"},
		},
		{
			name:     "scale down during a rollout below the new set",
			replicas: 1, strategy: rolling(i1, i0),
			sets:    []plan.MachineSetState{set("old", 1, false, 4, 4, 4, 0), set("new", 2, true, 2, 2, 2, 0)},
			want:    map[string]int32{"old": 0, "new": 1},
			reasons: map[string]string{"new": "scale down from 2 to 1 replicas, the MachineDeployment's replicas"},
		},
		{
			name:     "scale to 0 during a rollout, with percentages that come to 0",
			replicas: 0, strategy: rolling(p25, p25),
			sets: []plan.MachineSetState{set("old", 1, false, 3, 3, 3, 0), set("new", 2, true, 2, 2, 1, 0)},
			want: map[string]int32{"old": 0, "new": 0},
		},
		{
			name:     "scale to 0 without a rollout",
			replicas: 0, strategy: rolling(i1, i0),
			sets: []plan.MachineSetState{set("only", 1, true, 3, 3, 3, 0)},
			want: map[string]int32{"only": 0},
		},
		{
			name:     "scale up without a rollout goes straight to replicas",
			replicas: 7, strategy: rolling(i1, i0),
			sets:    []plan.MachineSetState{set("only", 1, true, 3, 3, 3, 0)},
			want:    map[string]int32{"only": 7},
			reasons: map[string]string{"only": "scale up from 3 to 7 replicas, the MachineDeployment's replicas"},
		},
		{
			name:     "scale down without a rollout goes straight to replicas",
			replicas: 2, strategy: rolling(i1, i0),
			sets: []plan.MachineSetState{set("only", 1, true, 5, 5, 5, 0)},
			want: map[string]int32{"only": 2},
		},
		{
			name:     "first MachineSet of a new MachineDeployment",
			replicas: 3, strategy: rolling(i1, i0),
			want: map[string]int32{"+new": 3},
		},
		{
			name:     "the API defaults when the limits are unset: maxSurge 1, maxUnavailable 0",
			replicas: 3, strategy: plan.RolloutStrategy{},
			sets: []plan.MachineSetState{set("old", 1, false, 3, 3, 3, 0)},
			want: map[string]int32{"old": 3, "+new": 1},
		},
		{
			name:     "several old sets: the oldest shrinks first",
			replicas: 6, strategy: rolling(i0, i2),
			sets: []plan.MachineSetState{
				set("oldest", 1, false, 2, 2, 2, 0), set("older", 2, false, 3, 3, 3, 0), set("new", 3, true, 1, 1, 1, 0),
			},
			want: map[string]int32{"oldest": 0, "older": 3, "new": 1},
		},
		{
			name:     "several old sets: replicas that are not available go before available ones",
			replicas: 6, strategy: rolling(i0, i2),
			sets: []plan.MachineSetState{
				set("oldest", 1, false, 2, 2, 2, 0), set("older", 2, false, 3, 3, 1, 0), set("new", 3, true, 1, 1, 1, 0),
			},
			want:    map[string]int32{"oldest": 2, "older": 1, "new": 1},
			reasons: map[string]string{"older": "removes 2 replicas not available"},
		},
		{
			name:     "old Machines that never become available are replaced as new ones become available",
			replicas: 3, strategy: rolling(i1, i0),
			sets: []plan.MachineSetState{set("old", 1, false, 3, 3, 0, 0), set("new", 2, true, 1, 1, 1, 0)},
			want: map[string]int32{"old": 2, "new": 1},
		},
		{
			name:     "old Machines still starting are kept while the floor is not met",
			replicas: 3, strategy: rolling(i1, i0),
			sets: []plan.MachineSetState{set("old", 1, false, 3, 3, 0, 0)},
			want: map[string]int32{"old": 3, "+new": 1},
		},
		{
			name:     "old replicas without a Machine are not created: the new set takes them",
			replicas: 3, strategy: rolling(i1, i0),
			sets:    []plan.MachineSetState{set("old", 1, false, 3, 1, 0, 0)},
			want:    map[string]int32{"old": 1, "+new": 3},
			reasons: map[string]string{"old": "from 3 to 1 replicas: removes 2 replicas without a Machine"},
		},
		{
			name:     "an old Machine being deleted is not replaced",
			replicas: 3, strategy: rolling(i1, i0),
			sets: []plan.MachineSetState{set("old", 1, false, 3, 3, 2, 1), set("new", 2, true, 0, 0, 0, 0)},
			want: map[string]int32{"old": 2, "new": 1},
		},
		{
			name:     "of two up-to-date sets the oldest is kept",
			replicas: 2, strategy: rolling(i1, i0),
			sets: []plan.MachineSetState{set("twin-b", 2, true, 1, 1, 1, 0), set("twin-a", 1, true, 1, 1, 1, 0)},
			want: map[string]int32{"twin-a": 2, "twin-b": 1},
		},
		{
			name:     "a new Machine being remediated is not replaced twice",
			replicas: 3, strategy: rolling(i1, i0),
			sets: []plan.MachineSetState{set("new", 1, true, 3, 3, 2, 1)},
			want: map[string]int32{"new": 3},
		},
		{
			name:     "OnDelete: the new set starts empty",
			replicas: 3, strategy: onDelete,
			sets:    []plan.MachineSetState{set("old", 1, false, 3, 3, 3, 0)},
			want:    map[string]int32{"old": 3, "+new": 0},
			reasons: map[string]string{"+new": "with 0 of 3 replicas, the rest as old Machines are deleted (OnDelete)"},
		},
		{
			name:     "OnDelete: Machines the user deletes move to the new set",
			replicas: 3, strategy: onDelete,
			sets:    []plan.MachineSetState{set("old", 1, false, 3, 3, 1, 2), set("new", 2, true, 0, 0, 0, 0)},
			want:    map[string]int32{"old": 1, "new": 2},
			reasons: map[string]string{"old": "2 Machines deleted or never created are not replaced (OnDelete)"},
		},
		{
			name:     "OnDelete: a deleted Machine that is already gone",
			replicas: 3, strategy: onDelete,
			sets: []plan.MachineSetState{set("old", 1, false, 3, 2, 2, 0), set("new", 2, true, 0, 0, 0, 0)},
			want: map[string]int32{"old": 2, "new": 1},
		},
		{
			name:     "OnDelete: scaling down takes old Machines first, oldest set first",
			replicas: 2, strategy: onDelete,
			sets: []plan.MachineSetState{
				set("oldest", 1, false, 1, 1, 1, 0), set("older", 2, false, 2, 2, 2, 0), set("new", 3, true, 1, 1, 1, 0),
			},
			want:    map[string]int32{"oldest": 0, "older": 1, "new": 1},
			reasons: map[string]string{"older": "1 more goes to match the MachineDeployment's 2 replicas"},
		},
		{
			name:     "OnDelete: scaling up goes to the new set",
			replicas: 5, strategy: onDelete,
			sets: []plan.MachineSetState{set("old", 1, false, 2, 2, 2, 0), set("new", 2, true, 1, 1, 1, 0)},
			want: map[string]int32{"old": 2, "new": 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := plan.PlanRollout(plan.RolloutInput{Replicas: tt.replicas, Strategy: tt.strategy, MachineSets: tt.sets})
			if err != nil {
				t.Fatal(err)
			}
			if got := targets(p); !equalTargets(got, tt.want) {
				t.Errorf("targets = %v, want %v", got, tt.want)
			}
			reasons := map[string]string{}
			for _, c := range p.Changes() {
				if c.Reason == "" {
					t.Errorf("change of %s has no reason", c.Name)
				}
				reasons[c.Name] = c.Reason
			}
			for _, c := range p.MachineSets {
				if c.From == c.To && c.Reason != "" {
					t.Errorf("unchanged %s has a reason: %q", c.Name, c.Reason)
				}
			}
			if p.Create != nil {
				reasons["+new"] = p.Create.Reason
			}
			for name, want := range tt.reasons {
				if !strings.Contains(reasons[name], want) {
					t.Errorf("reason for %s = %q, want it to contain %q", name, reasons[name], want)
				}
			}
		})
	}
}

func equalTargets(a, b map[string]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestResolvedLimits(t *testing.T) {
	tests := []struct {
		replicas                   int32
		surge, unavailable         intstr.IntOrString
		wantSurge, wantUnavailable int32
	}{
		{10, p25, p25, 3, 2},
		{4, p25, p25, 1, 1},
		{3, intstr.FromString("50%"), intstr.FromString("50%"), 2, 1},
		{1, intstr.FromString("10%"), intstr.FromString("90%"), 1, 0},
		{5, i2, i1, 2, 1},
		{0, p25, p25, 0, 0},
		{0, i0, i0, 0, 0},
	}
	for _, tt := range tests {
		p, err := plan.PlanRollout(plan.RolloutInput{Replicas: tt.replicas, Strategy: rolling(tt.surge, tt.unavailable)})
		if err != nil {
			t.Errorf("%d replicas, %s/%s: %v", tt.replicas, tt.surge.String(), tt.unavailable.String(), err)
			continue
		}
		if p.MaxSurge != tt.wantSurge || p.MaxUnavailable != tt.wantUnavailable {
			t.Errorf("%d replicas, %s/%s: limits %d/%d, want %d/%d", tt.replicas, tt.surge.String(), tt.unavailable.String(),
				p.MaxSurge, p.MaxUnavailable, tt.wantSurge, tt.wantUnavailable)
		}
	}
}

func TestPlanRolloutInputErrors(t *testing.T) {
	neg := intstr.FromInt32(-1)
	tests := []struct {
		name string
		in   plan.RolloutInput
		want string
	}{
		{"both limits 0", plan.RolloutInput{Replicas: 3, Strategy: rolling(i0, i0)}, "raise one of them"},
		{"maxUnavailable rounds to 0", plan.RolloutInput{Replicas: 3, Strategy: rolling(i0, intstr.FromString("10%"))}, "maxUnavailable (10%)"},
		{"maxSurge not a percentage", plan.RolloutInput{Replicas: 3, Strategy: rolling(intstr.FromString("two"), i0)}, "maxSurge \"two\""},
		{"negative maxUnavailable", plan.RolloutInput{Replicas: 3, Strategy: rolling(i1, neg)}, "must not be negative"},
		{"negative replicas", plan.RolloutInput{Replicas: -1}, "replicas is -1"},
		{"unknown strategy", plan.RolloutInput{Replicas: 1, Strategy: plan.RolloutStrategy{Type: "Recreate"}}, "\"Recreate\" is unknown"},
		{"negative count", plan.RolloutInput{Replicas: 1, MachineSets: []plan.MachineSetState{set("a", 1, true, 1, -1, 0, 0)}}, "negative count"},
		{"duplicate name", plan.RolloutInput{Replicas: 1, MachineSets: []plan.MachineSetState{set("a", 1, true, 1, 1, 1, 0), set("a", 2, false, 0, 0, 0, 0)}}, "listed twice"},
		{"no name", plan.RolloutInput{Replicas: 1, MachineSets: []plan.MachineSetState{set("", 1, true, 1, 1, 1, 0)}}, "no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := plan.PlanRollout(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestRolloutTrace follows whole rollouts in a world where every change
// happens at once, and checks each step.
func TestRolloutTrace(t *testing.T) {
	type step struct{ old, new int32 }
	tests := []struct {
		name     string
		replicas int32
		strategy plan.RolloutStrategy
		want     []step
	}{
		{"5 replicas, maxSurge 1, maxUnavailable 0", 5, rolling(i1, i0),
			[]step{{5, 1}, {4, 1}, {4, 2}, {3, 2}, {3, 3}, {2, 3}, {2, 4}, {1, 4}, {1, 5}, {0, 5}}},
		{"4 replicas, 25%/25%", 4, rolling(p25, p25),
			[]step{{3, 1}, {2, 2}, {1, 3}, {0, 4}}},
		{"4 replicas, maxSurge 0, maxUnavailable 2", 4, rolling(i0, i2),
			[]step{{2, 0}, {2, 2}, {0, 2}, {0, 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := set("old", 1, false, tt.replicas, tt.replicas, tt.replicas, 0)
			var current *plan.MachineSetState
			var got []step
			for range 50 {
				sets := []plan.MachineSetState{old}
				if current != nil {
					sets = append(sets, *current)
				}
				p, err := plan.PlanRollout(plan.RolloutInput{Replicas: tt.replicas, Strategy: tt.strategy, MachineSets: sets})
				if err != nil {
					t.Fatal(err)
				}
				if p.Empty() {
					break
				}
				tg := targets(p)
				if p.Create != nil {
					s := set("new", 2, true, 0, 0, 0, 0)
					current = &s
					tg["new"] = tg["+new"]
				}
				old.Replicas, current.Replicas = tg["old"], tg["new"]
				got = append(got, step{old.Replicas, current.Replicas})
				// Machines appear, become available and go at once.
				for _, s := range []*plan.MachineSetState{&old, current} {
					s.Machines, s.Available = s.Replicas, s.Replicas
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("steps (old, new) = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("steps (old, new) = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestOutdatedByRolloutAfter(t *testing.T) {
	after := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name         string
		created, now time.Time
		after        time.Time
		outdated     bool
	}{
		{"no rollout.after", after.Add(-time.Hour), after, time.Time{}, false},
		{"rollout.after ahead", after.Add(-time.Hour), after.Add(-time.Minute), after, false},
		{"created before, moment passed", after.Add(-time.Second), after.Add(time.Minute), after, true},
		{"created in the same second", after, after.Add(time.Minute), after, false},
		{"created after", after.Add(time.Second), after.Add(time.Minute), after, false},
		{"the moment itself", after.Add(-time.Hour), after, after, true},
	} {
		if got := plan.OutdatedByRolloutAfter(c.created, c.after, c.now); got != c.outdated {
			t.Errorf("%s: got %v, want %v", c.name, got, c.outdated)
		}
	}
}
