package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func cpm(name, fd string, age int, upToDate bool) ControlPlaneMachine {
	return ControlPlaneMachine{Name: name, FailureDomain: fd, Created: t0.Add(time.Duration(age) * time.Minute),
		UpToDate: upToDate, EtcdMember: true, EtcdHealthy: true, ComponentsHealthy: true}
}

func TestDecideControlPlane(t *testing.T) {
	sick := cpm("b", "", 2, true)
	sick.EtcdHealthy = false
	deleting := cpm("b", "", 2, true)
	deleting.Deleting = true
	marked := cpm("c", "", 3, true)
	marked.MarkedForDeletion = true
	joining := cpm("b", "", 2, true)
	joining.EtcdMember, joining.EtcdHealthy = false, false
	tests := []struct {
		name     string
		state    ControlPlaneState
		kind     ControlPlaneActionKind
		machine  string
		domain   string
		rolling  bool
		inReason string
	}{
		{name: "no machines, none wanted", state: ControlPlaneState{}, kind: ControlPlaneSteady},
		{name: "first machine initialises", state: ControlPlaneState{Replicas: 3, FailureDomains: []string{"b", "a"}}, kind: ControlPlaneInit, domain: "a"},
		{name: "no join before initialized", state: ControlPlaneState{Replicas: 3, Machines: []ControlPlaneMachine{cpm("a", "", 1, true)}},
			kind: ControlPlaneWait, inReason: "initialise"},
		{name: "scale up", state: ControlPlaneState{Replicas: 3, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "a", 1, true)}, FailureDomains: []string{"a", "b", "c"}, EtcdMembers: 1},
			kind: ControlPlaneScaleUp, domain: "b"},
		{name: "no scale up while a member is sick", state: ControlPlaneState{Replicas: 3, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, true), sick}, EtcdMembers: 2},
			kind: ControlPlaneWait, inReason: "etcd member of Machine b is not healthy"},
		{name: "no scale up while a machine has not joined etcd", state: ControlPlaneState{Replicas: 3, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, true), joining}, EtcdMembers: 1},
			kind: ControlPlaneWait, inReason: "no etcd member yet"},
		{name: "no scale up with an orphan etcd member", state: ControlPlaneState{Replicas: 3, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, true)}, EtcdMembers: 2},
			kind: ControlPlaneWait, inReason: "1 members that belong to no Machine"},
		{name: "nothing while deleting", state: ControlPlaneState{Replicas: 1, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, true), deleting}},
			kind: ControlPlaneWait, inReason: "Machine b to be deleted"},
		{name: "scale down takes the marked machine", state: ControlPlaneState{Replicas: 1, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, true), cpm("b", "", 2, true), marked}, EtcdMembers: 3},
			kind: ControlPlaneScaleDown, machine: "c"},
		{name: "scale down takes from the fullest domain, then oldest", state: ControlPlaneState{Replicas: 2, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "x", 1, true), cpm("b", "y", 2, true), cpm("c", "y", 3, true)}, EtcdMembers: 3},
			kind: ControlPlaneScaleDown, machine: "b"},
		{name: "scale down refused without quorum after", state: ControlPlaneState{Replicas: 2, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, true), sick, cpm("c", "", 3, true)}, EtcdMembers: 3},
			kind: ControlPlaneWait, inReason: "no quorum"},
		{name: "scale down of the sick member keeps quorum", state: ControlPlaneState{Replicas: 2, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, true), func() ControlPlaneMachine { m := sick; m.MarkedForDeletion = true; return m }(), cpm("c", "", 3, true)}, EtcdMembers: 3},
			kind: ControlPlaneScaleDown, machine: "b"},
		{name: "rollout surges first", state: ControlPlaneState{Replicas: 1, MaxSurge: 1, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, false)}, EtcdMembers: 1},
			kind: ControlPlaneScaleUp, rolling: true},
		{name: "rollout then removes the outdated machine", state: ControlPlaneState{Replicas: 1, MaxSurge: 1, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, false), cpm("b", "", 2, true)}, EtcdMembers: 2},
			kind: ControlPlaneScaleDown, machine: "a", rolling: true},
		{name: "rollout without surge removes first", state: ControlPlaneState{Replicas: 3, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, false), cpm("b", "", 2, false), cpm("c", "", 3, false)}, EtcdMembers: 3},
			kind: ControlPlaneScaleDown, machine: "a", rolling: true},
		{name: "no surge with one machine", state: ControlPlaneState{Replicas: 1, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, false)}, EtcdMembers: 1},
			kind: ControlPlaneWait, rolling: true, inReason: "maxSurge to 1"},
		{name: "steady", state: ControlPlaneState{Replicas: 1, Initialized: true, Machines: []ControlPlaneMachine{cpm("a", "", 1, true)}, EtcdMembers: 1}, kind: ControlPlaneSteady},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := DecideControlPlane(tc.state)
			if got.Kind != tc.kind || got.Machine != tc.machine || got.FailureDomain != tc.domain || got.RollingOut != tc.rolling {
				t.Fatalf("got %+v, want kind %s machine %q domain %q rolling %v", got, tc.kind, tc.machine, tc.domain, tc.rolling)
			}
			if !strings.Contains(got.Reason, tc.inReason) {
				t.Errorf("reason %q does not contain %q", got.Reason, tc.inReason)
			}
		})
	}
}

// TestControlPlaneSimulation applies every decision to a simulated control
// plane (a join takes effect at once, a deletion completes at once) and
// checks that scale changes and rollouts converge, never take more than
// Replicas+MaxSurge Machines, never leave etcd without a majority, and
// spread Machines across failure domains.
func TestControlPlaneSimulation(t *testing.T) {
	for _, tc := range []struct {
		from, to, surge int
		upgrade         bool
		domains         []string
	}{
		{from: 0, to: 1}, {from: 0, to: 3, domains: []string{"a", "b", "c"}}, {from: 1, to: 3}, {from: 3, to: 1},
		{from: 1, to: 1, surge: 1, upgrade: true}, {from: 3, to: 3, surge: 1, upgrade: true, domains: []string{"a", "b", "c"}},
		{from: 3, to: 3, surge: 0, upgrade: true}, {from: 5, to: 5, surge: 1, upgrade: true}, {from: 3, to: 5, surge: 1, upgrade: true},
	} {
		t.Run(fmt.Sprintf("%d-to-%d-surge%d-upgrade%v-fd%d", tc.from, tc.to, tc.surge, tc.upgrade, len(tc.domains)), func(t *testing.T) {
			var machines []ControlPlaneMachine
			for i := range tc.from {
				m := cpm(fmt.Sprintf("old-%d", i), "", i, !tc.upgrade)
				if len(tc.domains) > 0 {
					m.FailureDomain = tc.domains[i%len(tc.domains)]
				}
				machines = append(machines, m)
			}
			initialized := tc.from > 0
			for step := 0; ; step++ {
				if step > 50 {
					t.Fatal("did not converge in 50 steps")
				}
				s := ControlPlaneState{Replicas: tc.to, MaxSurge: tc.surge, Initialized: initialized, Machines: machines, FailureDomains: tc.domains, EtcdMembers: len(machines)}
				a := DecideControlPlane(s)
				switch a.Kind {
				case ControlPlaneSteady:
					if len(machines) != tc.to {
						t.Fatalf("steady with %d machines, want %d", len(machines), tc.to)
					}
					for _, m := range machines {
						if !m.UpToDate {
							t.Fatalf("steady with outdated machine %s", m.Name)
						}
					}
					if len(tc.domains) > 0 {
						per := map[string]int{}
						for _, m := range machines {
							per[m.FailureDomain]++
						}
						lo, hi := len(machines), 0
						for _, d := range tc.domains {
							lo, hi = min(lo, per[d]), max(hi, per[d])
						}
						if hi-lo > 1 {
							t.Fatalf("machines not spread: %v", per)
						}
					}
					return
				case ControlPlaneWait:
					t.Fatalf("step %d: waits in a healthy simulation: %s", step, a.Reason)
				case ControlPlaneInit, ControlPlaneScaleUp:
					machines = append(machines, cpm(fmt.Sprintf("new-%d", step), a.FailureDomain, 100+step, true))
					initialized = true
				case ControlPlaneScaleDown:
					i := slicesIndex(machines, a.Machine)
					if i < 0 {
						t.Fatalf("deletes unknown machine %s", a.Machine)
					}
					machines = append(machines[:i], machines[i+1:]...)
				}
				if limit := max(tc.from, tc.to+tc.surge); len(machines) > limit {
					t.Fatalf("step %d: %d machines, more than %d", step, len(machines), limit)
				}
				if len(machines) == 0 && tc.to > 0 {
					t.Fatalf("step %d: every machine removed", step)
				}
			}
		})
	}
}

func slicesIndex(ms []ControlPlaneMachine, name string) int {
	for i, m := range ms {
		if m.Name == name {
			return i
		}
	}
	return -1
}

func TestDecideControlPlaneRemediation(t *testing.T) {
	now := t0.Add(time.Hour)
	dead := cpm("b", "", 2, true)
	dead.NeedsRemediation, dead.EtcdHealthy, dead.ComponentsHealthy = true, false, false
	deadNoMember := cpm("c", "", 3, true)
	deadNoMember.NeedsRemediation, deadNoMember.EtcdMember, deadNoMember.EtcdHealthy = true, false, false
	sick := cpm("c", "", 3, true)
	sick.EtcdHealthy = false
	retried := dead
	retried.RemediationRetry = 3
	two := 2
	three := 3
	tests := []struct {
		name     string
		state    ControlPlaneState
		kind     ControlPlaneActionKind
		machine  string
		inReason string
		retryAt  time.Time
	}{
		{name: "one dead of three is remediated", state: ControlPlaneState{Replicas: 3, Initialized: true, EtcdMembers: 3,
			Machines: []ControlPlaneMachine{cpm("a", "", 1, true), dead, cpm("c", "", 3, true)}}, kind: ControlPlaneRemediate, machine: "b"},
		{name: "the machine without an etcd member goes first", state: ControlPlaneState{Replicas: 3, Initialized: true, EtcdMembers: 2,
			Machines: []ControlPlaneMachine{cpm("a", "", 1, true), dead, deadNoMember}}, kind: ControlPlaneRemediate, machine: "c"},
		{name: "quorum would be lost", state: ControlPlaneState{Replicas: 3, Initialized: true, EtcdMembers: 3,
			Machines: []ControlPlaneMachine{cpm("a", "", 1, true), dead, sick}}, kind: ControlPlaneWait, machine: "b", inReason: "1 healthy of 2 members, which is no quorum"},
		{name: "the only machine is not remediated", state: ControlPlaneState{Replicas: 1, Initialized: true, EtcdMembers: 1,
			Machines: []ControlPlaneMachine{func() ControlPlaneMachine { m := dead; return m }()}}, kind: ControlPlaneWait, machine: "b", inReason: "only Machine"},
		{name: "maxRetry exceeded", state: ControlPlaneState{Replicas: 3, Initialized: true, EtcdMembers: 3, Remediation: ControlPlaneRemediation{MaxRetry: &two, Now: now},
			Machines: []ControlPlaneMachine{cpm("a", "", 1, true), retried, cpm("c", "", 3, true)}}, kind: ControlPlaneWait, machine: "b", inReason: "more than spec.remediation.maxRetry (2)"},
		{name: "maxRetry not exceeded", state: ControlPlaneState{Replicas: 3, Initialized: true, EtcdMembers: 3, Remediation: ControlPlaneRemediation{MaxRetry: &three, Now: now},
			Machines: []ControlPlaneMachine{cpm("a", "", 1, true), retried, cpm("c", "", 3, true)}}, kind: ControlPlaneRemediate, machine: "b"},
		{name: "retry period not over", state: ControlPlaneState{Replicas: 3, Initialized: true, EtcdMembers: 3,
			Remediation: ControlPlaneRemediation{RetryPeriod: 10 * time.Minute, Last: now.Add(-time.Minute), Now: now},
			Machines:    []ControlPlaneMachine{cpm("a", "", 1, true), retried, cpm("c", "", 3, true)}}, kind: ControlPlaneWait, machine: "b", inReason: "retryPeriodSeconds", retryAt: now.Add(9 * time.Minute)},
		{name: "retry period over", state: ControlPlaneState{Replicas: 3, Initialized: true, EtcdMembers: 3,
			Remediation: ControlPlaneRemediation{RetryPeriod: 10 * time.Minute, Last: now.Add(-10 * time.Minute), Now: now},
			Machines:    []ControlPlaneMachine{cpm("a", "", 1, true), retried, cpm("c", "", 3, true)}}, kind: ControlPlaneRemediate, machine: "b"},
		{name: "after the remediation the healthy two are joined by a replacement", state: ControlPlaneState{Replicas: 3, Initialized: true, EtcdMembers: 2,
			Machines: []ControlPlaneMachine{cpm("a", "", 1, true), cpm("c", "", 3, true)}}, kind: ControlPlaneScaleUp},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := DecideControlPlane(tc.state)
			if got.Kind != tc.kind || got.Machine != tc.machine || !got.RetryAt.Equal(tc.retryAt) {
				t.Fatalf("got %+v, want kind %s machine %q retryAt %s", got, tc.kind, tc.machine, tc.retryAt)
			}
			if !strings.Contains(got.Reason, tc.inReason) {
				t.Errorf("reason %q does not contain %q", got.Reason, tc.inReason)
			}
		})
	}
}
