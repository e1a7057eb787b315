package chaos

import (
	"reflect"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	g := Gaps{MinAfter: time.Second, MaxAfter: 4 * time.Second, MaxDown: 500 * time.Millisecond}
	tests := []struct {
		name                         string
		phases, managerKills, planes int
		wantPerPhase                 []int // manager kills per phase
	}{
		{name: "even", phases: 4, managerKills: 8, planes: 1, wantPerPhase: []int{2, 2, 2, 2}},
		{name: "remainder to the early phases", phases: 4, managerKills: 10, planes: 1, wantPerPhase: []int{3, 3, 2, 2}},
		{name: "fewer kills than phases", phases: 4, managerKills: 1, planes: 0, wantPerPhase: []int{1, 0, 0, 0}},
		{name: "plane kills only", phases: 2, managerKills: 0, planes: 3, wantPerPhase: []int{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Plan(42, tt.phases, tt.managerKills, tt.planes, g)
			if len(got) != tt.phases {
				t.Fatalf("%d phases, want %d", len(got), tt.phases)
			}
			planes := 0
			for p, kills := range got {
				managers := 0
				for _, k := range kills {
					if k.Phase != p {
						t.Errorf("kill %+v listed in phase %d", k, p)
					}
					if k.After < g.MinAfter || k.After > g.MaxAfter || k.Down < 0 || k.Down > g.MaxDown {
						t.Errorf("kill %+v outside the gaps %+v", k, g)
					}
					switch k.Target {
					case Manager:
						managers++
					case Plane:
						planes++
					default:
						t.Errorf("kill %+v of no known target", k)
					}
				}
				if managers != tt.wantPerPhase[p] {
					t.Errorf("phase %d: %d manager kills, want %d", p, managers, tt.wantPerPhase[p])
				}
			}
			if planes != tt.planes {
				t.Errorf("%d plane kills, want %d", planes, tt.planes)
			}
		})
	}
}

func TestPlanIsTheSeeds(t *testing.T) {
	g := Gaps{MinAfter: time.Second, MaxAfter: 10 * time.Second, MaxDown: time.Second}
	a, b := Plan(7, 4, 20, 1, g), Plan(7, 4, 20, 1, g)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("the same seed gave two schedules:\n%v\n%v", a, b)
	}
	if c := Plan(8, 4, 20, 1, g); reflect.DeepEqual(a, c) {
		t.Fatalf("seeds 7 and 8 gave the same schedule %v", a)
	}
}
