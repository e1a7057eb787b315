package desired

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/names"
)

// rotate gives each cloned template whose desired content differs from its
// current copy a new name: a template in use is never changed in place (the
// Machines made from it would silently disagree with it); a new one makes
// the MachineDeployment or control plane roll to it. Equal content keeps the
// current name. Metadata does not count: it is updated in place.
func rotate(in Input, bp *blueprint, n *objectNames) {
	prefix := in.Cluster.Name + "-"
	if bp.controlPlaneMachineInfrastructure != nil {
		if current := in.Current.ControlPlaneMachineInfrastructure; current != nil && current.GetName() == n.controlPlaneMachineInfrastructure {
			desired := templateFromTemplate(in, bp.controlPlaneMachineInfrastructure, n.controlPlaneMachineInfrastructure, nil)
			if templateChanged(desired, current, in.FieldManager) {
				n.controlPlaneMachineInfrastructure = names.WithPrefix(prefix, in.Random)
			}
		}
	}
	for _, md := range bp.machineDeployments {
		current := in.Current.MachineDeployments[md.topology.Name]
		if current == nil {
			continue
		}
		w := n.machineDeployments[md.topology.Name]
		prefix := in.Cluster.Name + "-" + md.topology.Name + "-"
		for _, t := range []struct {
			class, current *unstructured.Unstructured
			name           *string
		}{
			{md.bootstrap, current.Bootstrap, &w.bootstrap},
			{md.infrastructure, current.Infrastructure, &w.infrastructure},
		} {
			if t.current == nil || t.current.GetName() != *t.name {
				continue
			}
			if templateChanged(templateFromTemplate(in, t.class, *t.name, nil), t.current, in.FieldManager) {
				*t.name = names.WithPrefix(prefix, in.Random)
			}
		}
	}
}

// templateChanged tells whether a template's desired content differs from
// its current copy: another kind, a spec field it sets that the current
// lacks or holds another value, or (with the topology's field manager) a
// spec field the topology applied before that it no longer sets. Fields
// only the current has, that nobody applied (the API server's defaults),
// do not count.
func templateChanged(desired, current *unstructured.Unstructured, manager string) bool {
	if desired.GroupVersionKind().GroupKind() != current.GroupVersionKind().GroupKind() {
		return true
	}
	if !contains(current.Object["spec"], desired.Object["spec"]) {
		return true
	}
	if manager == "" {
		return false
	}
	for _, owned := range contract.FieldsAppliedBy(current, manager) {
		spec, ok := owned["f:spec"].(map[string]any)
		if !ok {
			continue
		}
		if !holds(desired.Object["spec"], spec) {
			return true
		}
	}
	return false
}

// contains tells whether have holds everything want sets, with the same
// values; an empty object or list in want matches an absent field.
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return have == nil && len(w) == 0
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok {
				if isEmpty(wv) {
					continue
				}
				return false
			}
			if !contains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return have == nil && len(w) == 0
		}
		if len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return have == nil
	default:
		return sameScalar(have, want)
	}
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// sameScalar compares JSON scalars, numbers by value whatever their Go type
// (int64 from the API machinery, float64 from JSON decoding).
func sameScalar(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// holds tells whether value has every field of a managed-fields set
// ("f:name" fields, "k:{...}" list items by key, "v:..." set items by
// value, "i:N" items by index).
func holds(value any, fields map[string]any) bool {
	for key, sub := range fields {
		children, _ := sub.(map[string]any)
		var next any
		switch {
		case key == ".":
			continue
		case strings.HasPrefix(key, "f:"):
			m, ok := value.(map[string]any)
			if !ok {
				return false
			}
			if next, ok = m[strings.TrimPrefix(key, "f:")]; !ok {
				return false
			}
		case strings.HasPrefix(key, "k:"):
			var want map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(key, "k:")), &want); err != nil {
				return false
			}
			next = findItem(value, func(item any) bool {
				m, ok := item.(map[string]any)
				if !ok {
					return false
				}
				for k, v := range want {
					if !sameScalar(m[k], v) {
						return false
					}
				}
				return true
			})
		case strings.HasPrefix(key, "v:"):
			var want any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(key, "v:")), &want); err != nil {
				return false
			}
			next = findItem(value, func(item any) bool { return contains(item, want) && contains(want, item) })
		case strings.HasPrefix(key, "i:"):
			i, err := strconv.Atoi(strings.TrimPrefix(key, "i:"))
			list, ok := value.([]any)
			if err != nil || !ok || i >= len(list) {
				return false
			}
			next = list[i]
		default:
			continue
		}
		if next == nil && !strings.HasPrefix(key, "f:") {
			return false
		}
		if !holds(next, children) {
			return false
		}
	}
	return true
}

// findItem is the first item of a list that matches, nil when none does.
func findItem(list any, match func(any) bool) any {
	items, _ := list.([]any)
	for _, item := range items {
		if match(item) {
			return item
		}
	}
	return nil
}
