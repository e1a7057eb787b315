package machine

import (
	"reflect"
	"testing"
)

// The times a Machine began waiting for its deletion hooks are paced like
// texts; the drain and volume wait starts, which timeouts are measured
// from, go out at once; the gate never changes the status it reads.
func TestStatusGateLeavesHookWaitTimesToPacing(t *testing.T) {
	deletion := func(fields ...string) map[string]any {
		d := map[string]any{}
		for _, f := range fields {
			d[f] = "2026-11-25T10:00:00Z"
		}
		return map[string]any{"deletion": d}
	}
	for _, tc := range []struct {
		name          string
		before, after map[string]any
		gated         bool
	}{
		{"pre-drain hook wait begins", nil, deletion("waitForPreDrainHookStartTime"), false},
		{"pre-terminate hook wait begins", deletion("nodeDrainStartTime"), deletion("nodeDrainStartTime", "waitForPreTerminateHookStartTime"), false},
		{"drain begins", deletion("waitForPreDrainHookStartTime"), deletion("waitForPreDrainHookStartTime", "nodeDrainStartTime"), true},
		{"volume wait begins", deletion(), deletion("waitForNodeVolumeDetachStartTime"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before == nil {
				tc.before = map[string]any{}
			}
			want := len(tc.after["deletion"].(map[string]any))
			if got := !reflect.DeepEqual(statusGate(tc.before), statusGate(tc.after)); got != tc.gated {
				t.Errorf("gated = %v, want %v", got, tc.gated)
			}
			if got := len(tc.after["deletion"].(map[string]any)); got != want {
				t.Errorf("the gate changed the status it read: %v", tc.after)
			}
		})
	}
}
