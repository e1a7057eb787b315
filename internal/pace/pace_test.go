package pace_test

import (
	"testing"

	"capstan.dev/capstan/internal/pace"
)

// AllButTexts gates on fields and on conditions turning True, not on the
// phase nor on a condition's reason, message, or False against Unknown.
func TestAllButTexts(t *testing.T) {
	cond := func(status string) map[string]any {
		return map[string]any{"type": "Ready", "status": status, "reason": status, "message": "m-" + status}
	}
	for _, tc := range []struct {
		name          string
		before, after map[string]any
		gated         bool
	}{
		{"phase alone", map[string]any{"phase": "Pending"}, map[string]any{"phase": "Provisioning"}, false},
		{"first write without a True condition", nil, map[string]any{"phase": "Pending", "conditions": []any{cond("False")}, "observedGeneration": 1.0}, false},
		{"False to Unknown", map[string]any{"conditions": []any{cond("False")}}, map[string]any{"conditions": []any{cond("Unknown")}}, false},
		{"turning True", map[string]any{"conditions": []any{cond("False")}}, map[string]any{"conditions": []any{cond("True")}}, true},
		{"ceasing to be True", map[string]any{"conditions": []any{cond("True")}}, map[string]any{"conditions": []any{cond("Unknown")}}, true},
		{"a field", map[string]any{"addresses": []any{}}, map[string]any{"addresses": []any{"10.0.0.1"}}, true},
	} {
		if got := pace.Changed(pace.AllButTexts, tc.before, tc.after); got != tc.gated {
			t.Errorf("%s: gated %v, want %v", tc.name, got, tc.gated)
		}
	}
}
