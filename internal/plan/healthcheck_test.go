package plan

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

var hcNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func readyFalseFor(d time.Duration) []ObservedCondition {
	return []ObservedCondition{{Type: "Ready", Status: "False", LastTransitionTime: hcNow.Add(-d)}}
}

func dur(d time.Duration) *time.Duration { return &d }

func TestJudgeTarget(t *testing.T) {
	checks := HealthChecks{
		NodeConditions: []HealthRule{
			{Type: "Ready", Status: "False", Timeout: 300 * time.Second},
			{Type: "Ready", Status: "Unknown", Timeout: 300 * time.Second},
		},
		MachineConditions: []HealthRule{{Type: "example.com/Broken", Status: "True", Timeout: 60 * time.Second}},
	}
	withNode := func(conds []ObservedCondition) HealthTarget {
		return HealthTarget{Name: "m", HasNodeRef: true, NodeFound: true, NodeConditions: conds, StartedAt: hcNow.Add(-time.Hour)}
	}
	tests := []struct {
		name     string
		checks   *HealthChecks
		target   HealthTarget
		healthy  bool
		reason   string
		failed   string
		nextIn   time.Duration // 0: no next check
		contains string
	}{
		{name: "ready node", target: withNode([]ObservedCondition{{Type: "Ready", Status: "True", LastTransitionTime: hcNow.Add(-time.Hour)}}), healthy: true, reason: HealthyReason},
		{name: "not ready one second before timeout", target: withNode(readyFalseFor(299 * time.Second)), healthy: true, reason: HealthyReason, nextIn: time.Second},
		{name: "not ready exactly at timeout", target: withNode(readyFalseFor(300 * time.Second)), reason: UnhealthyNodeReason, failed: "Ready=False", contains: "Ready has been False"},
		{name: "not ready one second after timeout", target: withNode(readyFalseFor(301 * time.Second)), reason: UnhealthyNodeReason, failed: "Ready=False"},
		{name: "unknown past timeout", target: withNode([]ObservedCondition{{Type: "Ready", Status: "Unknown", LastTransitionTime: hcNow.Add(-400 * time.Second)}}), reason: UnhealthyNodeReason, failed: "Ready=Unknown"},
		{name: "condition type absent", target: withNode(nil), healthy: true, reason: HealthyReason},
		{name: "annotation wins", target: HealthTarget{Name: "m", RemediateAnnotation: true, HasNodeRef: true, NodeFound: true}, reason: RemediateAnnotationReason},
		{name: "node deleted", target: HealthTarget{Name: "m", HasNodeRef: true, StartedAt: hcNow}, reason: NodeDeletedReason},
		{name: "no node one second before startup timeout", target: HealthTarget{Name: "m", StartedAt: hcNow.Add(-599 * time.Second)}, healthy: true, reason: HealthyReason, nextIn: time.Second},
		{name: "no node exactly at startup timeout", target: HealthTarget{Name: "m", StartedAt: hcNow.Add(-600 * time.Second)}, reason: NodeStartupTimeoutReason},
		{name: "no node one second after startup timeout", target: HealthTarget{Name: "m", StartedAt: hcNow.Add(-601 * time.Second)}, reason: NodeStartupTimeoutReason},
		{name: "no node not started yet", target: HealthTarget{Name: "m"}, healthy: true, reason: HealthyReason},
		{name: "startup timeout off", checks: &HealthChecks{NodeStartupTimeout: dur(0)}, target: HealthTarget{Name: "m", StartedAt: hcNow.Add(-time.Hour)}, healthy: true, reason: HealthyReason},
		{name: "custom startup timeout", checks: &HealthChecks{NodeStartupTimeout: dur(30 * time.Second)}, target: HealthTarget{Name: "m", StartedAt: hcNow.Add(-29 * time.Second)}, healthy: true, reason: HealthyReason, nextIn: time.Second},
		{name: "node appeared before nodeRef", target: HealthTarget{Name: "m", NodeFound: true, StartedAt: hcNow.Add(-time.Hour)}, healthy: true, reason: HealthyReason},
		{name: "machine condition exactly at timeout", target: HealthTarget{Name: "m", HasNodeRef: true, NodeFound: true, MachineConditions: []ObservedCondition{{Type: "example.com/Broken", Status: "True", LastTransitionTime: hcNow.Add(-time.Minute)}}}, reason: UnhealthyMachineReason, failed: "example.com/Broken=True"},
		{name: "machine condition before timeout", target: HealthTarget{Name: "m", HasNodeRef: true, NodeFound: true, MachineConditions: []ObservedCondition{{Type: "example.com/Broken", Status: "True", LastTransitionTime: hcNow.Add(-59 * time.Second)}}}, healthy: true, reason: HealthyReason, nextIn: time.Second},
		{name: "machine condition other status", target: HealthTarget{Name: "m", HasNodeRef: true, NodeFound: true, MachineConditions: []ObservedCondition{{Type: "example.com/Broken", Status: "False", LastTransitionTime: hcNow.Add(-time.Hour)}}}, healthy: true, reason: HealthyReason},
		{name: "machine condition applies without a node", target: HealthTarget{Name: "m", StartedAt: hcNow, MachineConditions: []ObservedCondition{{Type: "example.com/Broken", Status: "True", LastTransitionTime: hcNow.Add(-time.Hour)}}}, reason: UnhealthyMachineReason, failed: "example.com/Broken=True"},
		{name: "soonest of two pending", target: HealthTarget{Name: "m", HasNodeRef: true, NodeFound: true,
			NodeConditions:    readyFalseFor(100 * time.Second),
			MachineConditions: []ObservedCondition{{Type: "example.com/Broken", Status: "True", LastTransitionTime: hcNow.Add(-10 * time.Second)}}},
			healthy: true, reason: HealthyReason, nextIn: 50 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := checks
			if tt.checks != nil {
				c = *tt.checks
			}
			d := DecideHealth(HealthInput{Checks: c, Targets: []HealthTarget{tt.target}, Now: hcNow})
			got := d.Targets[0]
			if got.Healthy != tt.healthy || got.Reason != tt.reason || got.FailedCondition != tt.failed {
				t.Fatalf("got %+v, want healthy=%v reason=%s failed=%q", got, tt.healthy, tt.reason, tt.failed)
			}
			if !strings.Contains(got.Message, tt.contains) {
				t.Errorf("message %q does not contain %q", got.Message, tt.contains)
			}
			if gotIn := d.RequeueAfter(hcNow); gotIn != tt.nextIn {
				t.Errorf("requeue after %s, want %s", gotIn, tt.nextIn)
			}
			wantUnhealthy := 0
			if !tt.healthy {
				wantUnhealthy = 1
			}
			if d.Unhealthy != wantUnhealthy || d.Healthy() != 1-wantUnhealthy {
				t.Errorf("unhealthy %d healthy %d", d.Unhealthy, d.Healthy())
			}
		})
	}
}

func TestNextCheckIgnoresUnhealthyTargets(t *testing.T) {
	checks := HealthChecks{NodeConditions: []HealthRule{{Type: "Ready", Status: "False", Timeout: 300 * time.Second}}}
	d := DecideHealth(HealthInput{Checks: checks, Now: hcNow, Targets: []HealthTarget{
		{Name: "a", HasNodeRef: true, NodeFound: true, NodeConditions: readyFalseFor(400 * time.Second)},
		{Name: "b", HasNodeRef: true, NodeFound: true, NodeConditions: readyFalseFor(200 * time.Second)},
		{Name: "c", HasNodeRef: true, NodeFound: true, NodeConditions: readyFalseFor(290 * time.Second)},
	}})
	if d.Unhealthy != 1 || !d.NextCheck.Equal(hcNow.Add(10*time.Second)) {
		t.Fatalf("unhealthy %d next %s", d.Unhealthy, d.NextCheck)
	}
	if d.RequeueAfter(hcNow.Add(20*time.Second)) <= 0 {
		t.Fatal("an overdue check must still requeue")
	}
	if (HealthDecision{}).RequeueAfter(hcNow) != 0 {
		t.Fatal("nothing to wait for must not requeue")
	}
}

func targets(total, unhealthy int) []HealthTarget {
	ts := make([]HealthTarget, total)
	for i := range ts {
		ts[i] = HealthTarget{Name: string(rune('a' + i)), HasNodeRef: true, NodeFound: true, RemediateAnnotation: i < unhealthy}
	}
	return ts
}

func TestRemediationTrigger(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }
	tests := []struct {
		name             string
		trigger          RemediationTrigger
		total, unhealthy int
		short            bool
		allowed          int
		reason           string
		contains         string
	}{
		{name: "no trigger", total: 3, unhealthy: 2, allowed: 1, reason: RemediationAllowedReason, contains: "2 of 3"},
		{name: "no trigger all unhealthy", total: 3, unhealthy: 3, allowed: 0, reason: RemediationAllowedReason},
		{name: "absolute below", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: num(2)}, total: 5, unhealthy: 1, allowed: 1, reason: RemediationAllowedReason},
		{name: "absolute equal", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: num(2)}, total: 5, unhealthy: 2, allowed: 0, reason: RemediationAllowedReason},
		{name: "absolute above", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: num(2)}, total: 5, unhealthy: 3, short: true, reason: TooManyUnhealthyReason, contains: "3 of 5 Machines are unhealthy, more than unhealthyLessThanOrEqualTo 2"},
		{name: "absolute zero none unhealthy", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: num(0)}, total: 3, unhealthy: 0, allowed: 0, reason: RemediationAllowedReason},
		{name: "absolute zero one unhealthy", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: num(0)}, total: 3, unhealthy: 1, short: true, reason: TooManyUnhealthyReason},
		{name: "40% of 3 rounds down to 1: one ok", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: pct("40%")}, total: 3, unhealthy: 1, allowed: 0, reason: RemediationAllowedReason, contains: "40% (1 of 3)"},
		{name: "40% of 3 rounds down to 1: two short", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: pct("40%")}, total: 3, unhealthy: 2, short: true, reason: TooManyUnhealthyReason, contains: "2 of 3 Machines are unhealthy, more than unhealthyLessThanOrEqualTo 40% (1 of 3)"},
		{name: "66% of 3 rounds down to 1", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: pct("66%")}, total: 3, unhealthy: 2, short: true, reason: TooManyUnhealthyReason},
		{name: "67% of 3 is 2", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: pct("67%")}, total: 3, unhealthy: 2, allowed: 0, reason: RemediationAllowedReason},
		{name: "50% of 10", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: pct("50%")}, total: 10, unhealthy: 3, allowed: 2, reason: RemediationAllowedReason},
		{name: "100%", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: pct("100%")}, total: 4, unhealthy: 4, allowed: 0, reason: RemediationAllowedReason},
		{name: "0% none", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: pct("0%")}, total: 4, unhealthy: 0, allowed: 0, reason: RemediationAllowedReason},
		{name: "percent of no targets", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: pct("40%")}, total: 0, unhealthy: 0, allowed: 0, reason: RemediationAllowedReason},
		{name: "bad percent", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: pct("forty%")}, total: 3, unhealthy: 0, short: true, reason: InvalidRemediationTriggerReason, contains: "forty%"},
		{name: "percent without sign", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: pct("40")}, total: 3, short: true, reason: InvalidRemediationTriggerReason},
		{name: "negative percent", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: pct("-4%")}, total: 3, short: true, reason: InvalidRemediationTriggerReason},
		{name: "negative count", trigger: RemediationTrigger{UnhealthyLessThanOrEqualTo: num(-1)}, total: 3, short: true, reason: InvalidRemediationTriggerReason},
		{name: "range below", trigger: RemediationTrigger{UnhealthyInRange: "[2-3]"}, total: 5, unhealthy: 1, short: true, reason: TooManyUnhealthyReason, contains: "1 of 5 Machines are unhealthy, outside unhealthyInRange [2-3]"},
		{name: "range at min", trigger: RemediationTrigger{UnhealthyInRange: "[2-3]"}, total: 5, unhealthy: 2, allowed: 1, reason: RemediationAllowedReason},
		{name: "range at max", trigger: RemediationTrigger{UnhealthyInRange: "[2-3]"}, total: 5, unhealthy: 3, allowed: 0, reason: RemediationAllowedReason},
		{name: "range above", trigger: RemediationTrigger{UnhealthyInRange: "[2-3]"}, total: 5, unhealthy: 4, short: true, reason: TooManyUnhealthyReason},
		{name: "range wins over count", trigger: RemediationTrigger{UnhealthyInRange: "[0-4]", UnhealthyLessThanOrEqualTo: num(1)}, total: 5, unhealthy: 3, allowed: 1, reason: RemediationAllowedReason},
		{name: "range single", trigger: RemediationTrigger{UnhealthyInRange: "[1-1]"}, total: 5, unhealthy: 1, allowed: 0, reason: RemediationAllowedReason},
		{name: "range syntax", trigger: RemediationTrigger{UnhealthyInRange: "1-3"}, total: 5, unhealthy: 1, short: true, reason: InvalidRemediationTriggerReason, contains: "[min-max]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DecideHealth(HealthInput{Trigger: tt.trigger, Targets: targets(tt.total, tt.unhealthy), Now: hcNow})
			if d.Unhealthy != tt.unhealthy {
				t.Fatalf("unhealthy %d, want %d", d.Unhealthy, tt.unhealthy)
			}
			if d.ShortCircuited != tt.short || d.RemediationsAllowed != tt.allowed || d.Reason != tt.reason {
				t.Fatalf("got short=%v allowed=%d reason=%s (%s), want short=%v allowed=%d reason=%s",
					d.ShortCircuited, d.RemediationsAllowed, d.Reason, d.Message, tt.short, tt.allowed, tt.reason)
			}
			if (d.TriggerErr != nil) != (tt.reason == InvalidRemediationTriggerReason) {
				t.Errorf("trigger error %v", d.TriggerErr)
			}
			if !strings.Contains(d.Message, tt.contains) {
				t.Errorf("message %q does not contain %q", d.Message, tt.contains)
			}
		})
	}
}

func TestParseUnhealthyRange(t *testing.T) {
	good := map[string][2]int{"[0-0]": {0, 0}, "[1-3]": {1, 3}, "[3-5]": {3, 5}, "[10-200]": {10, 200}}
	for s, want := range good {
		lo, hi, err := ParseUnhealthyRange(s)
		if err != nil || lo != want[0] || hi != want[1] {
			t.Errorf("%q: %d %d %v", s, lo, hi, err)
		}
	}
	for _, s := range []string{"", "[]", "[-]", "[1-]", "[-1]", "1-3", "[1-3", "1-3]", "[3-1]", "[a-b]", "[1 - 3]", "[1-2-3]", "[+1-3]", "(1-3)", "[1-99999999999999999999]"} {
		if _, _, err := ParseUnhealthyRange(s); err == nil {
			t.Errorf("%q: want an error", s)
		}
	}
}
