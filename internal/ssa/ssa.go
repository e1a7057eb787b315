package ssa

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Change returns "" when applying desired over current would change nothing
// at path (no path: the whole object), else names the first change found,
// for logs. owned are the applier's field sets of current (its managedFields
// entries, decoded from fieldsV1, for the whole object); none means only
// the values are compared.
func Change(desired, current map[string]any, owned []map[string]any, path ...string) string {
	path = slices.Clip(path) // the walk appends to it: never into the caller's array
	want, _ := at(desired, path)
	got, _ := at(current, path)
	if why := Missing(want, got, path); why != "" {
		return why
	}
	for _, fields := range owned {
		below, ok := ownedAt(fields, path)
		if !ok {
			continue
		}
		if why := Dropped(below, want, path); why != "" {
			return why
		}
	}
	return ""
}

// at is the value path names in an object.
func at(obj map[string]any, path []string) (any, bool) {
	var v any = obj
	for _, key := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// ownedAt is the part of a field set below path, when it owns anything
// there.
func ownedAt(fields map[string]any, path []string) (map[string]any, bool) {
	for _, key := range path {
		next, ok := fields["f:"+key].(map[string]any)
		if !ok {
			return nil, false
		}
		fields = next
	}
	return fields, true
}

// unorderedLists are the lists other writers add entries to (server-side
// apply merges them), so an object's list may hold more than the applier's;
// elsewhere a list must match the desired one item by item. Paths are from
// the object's root.
var unorderedLists = map[string]bool{
	"metadata.ownerReferences": true,
	"metadata.finalizers":      true,
}

// Missing returns "" when current holds every value desired sets, else the
// first path where it does not. path is where the two values are in their
// objects (nil: they are the objects); it names the difference and finds
// the unordered lists. A null or empty object or list in desired matches an
// absent value in current; fields only current has (a server's defaults,
// another writer's) do not count.
func Missing(desired, current any, path []string) string {
	switch w := desired.(type) {
	case map[string]any:
		g, ok := current.(map[string]any)
		if !ok {
			if len(w) == 0 && current == nil {
				return ""
			}
			return fmt.Sprintf("%s is not an object", dotted(path))
		}
		for k, wv := range w {
			if why := Missing(wv, g[k], append(path, k)); why != "" {
				return why
			}
		}
		return ""
	case []any:
		g, ok := current.([]any)
		if !ok {
			if len(w) == 0 && current == nil {
				return ""
			}
			return fmt.Sprintf("%s is not a list", dotted(path))
		}
		if unorderedLists[dotted(path)] {
			for i, wv := range w {
				if !containsItem(g, wv) {
					return fmt.Sprintf("%s[%d] is missing", dotted(path), i)
				}
			}
			return ""
		}
		if len(w) != len(g) {
			return fmt.Sprintf("%s has %d items, want %d", dotted(path), len(g), len(w))
		}
		for i := range w {
			if why := Missing(w[i], g[i], append(path, strconv.Itoa(i))); why != "" {
				return why
			}
		}
		return ""
	case nil:
		if current == nil {
			return ""
		}
		return fmt.Sprintf("%s is set, want it unset", dotted(path))
	default:
		if sameScalar(desired, current) {
			return ""
		}
		return fmt.Sprintf("%s is %v, want %v", dotted(path), current, desired)
	}
}

// containsItem tells whether one item of list holds every value want sets.
func containsItem(list []any, want any) bool {
	for _, g := range list {
		if Missing(want, g, nil) == "" {
			return true
		}
	}
	return false
}

// equal tells whether two values hold the same values, by Missing both
// ways.
func equal(a, b any) bool {
	return Missing(a, b, nil) == "" && Missing(b, a, nil) == ""
}

// sameScalar compares JSON scalars; numbers by value.
func sameScalar(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// Dropped returns "" when desired still sets every field of owned, else
// names the first one it dropped. owned is a field set in the fieldsV1 form
// of managedFields: "f:name" a field, "k:{...}" a list item by its key
// fields, "v:..." a set item by value, "i:n" a list item by position, "."
// the node itself. path is where desired is in its object (nil: desired is
// the object), for the message. An entry of another form cannot name a
// field, so it does not count (failing on it would make every check ask
// for an apply that cannot remove it).
func Dropped(owned map[string]any, desired any, path []string) string {
	for key, sub := range owned {
		if key == "." {
			continue
		}
		child, known, found := ownedChild(key, desired)
		if !known {
			continue
		}
		here := append(path, strings.TrimPrefix(key, "f:"))
		if !found {
			return fmt.Sprintf("%s is owned but no longer wanted", dotted(here))
		}
		if next, ok := sub.(map[string]any); ok && len(next) > 0 {
			if why := Dropped(next, child, here); why != "" {
				return why
			}
		}
	}
	return ""
}

// ownedChild finds, in desired, the value one fieldsV1 key names. known is
// false for a key of a form fieldsV1 does not define.
func ownedChild(key string, desired any) (child any, known, found bool) {
	kind, rest, ok := strings.Cut(key, ":")
	if !ok {
		return nil, false, false
	}
	switch kind {
	case "f":
		m, ok := desired.(map[string]any)
		if !ok {
			return nil, true, false
		}
		v, ok := m[rest]
		return v, true, ok
	case "k":
		keys := map[string]any{}
		if err := json.Unmarshal([]byte(rest), &keys); err != nil {
			return nil, true, false
		}
		item, found := findItem(desired, func(item any) bool {
			m, ok := item.(map[string]any)
			return ok && Missing(keys, m, nil) == ""
		})
		return item, true, found
	case "v":
		var value any
		if err := json.Unmarshal([]byte(rest), &value); err != nil {
			return nil, true, false
		}
		item, found := findItem(desired, func(item any) bool { return equal(value, item) })
		return item, true, found
	case "i":
		list, _ := desired.([]any)
		i, err := strconv.Atoi(rest)
		if err == nil && i >= 0 && i < len(list) {
			return list[i], true, true
		}
		return nil, true, false
	}
	return nil, false, false
}

// findItem is the first item of a list that matches.
func findItem(list any, match func(any) bool) (any, bool) {
	items, _ := list.([]any)
	for _, item := range items {
		if match(item) {
			return item, true
		}
	}
	return nil, false
}

func dotted(path []string) string {
	if len(path) == 0 {
		return "the object"
	}
	return strings.Join(path, ".")
}
