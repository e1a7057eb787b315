package clustertopology

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// A server-side apply that would change nothing still costs a request, and
// a dry run costs one too; API requests are what the management plane is
// short of. So before applying, the controller asks two questions of the
// copy it already has in its cache:
//
//   - does the object hold every value the desired object sets (subset)?
//     A user's edit of a managed field, or a changed template, fails this;
//   - does the controller's own apply record (managedFields) own a field the
//     desired object no longer sets (ownedBeyond)? An apply would remove
//     it, so a field dropped from the class fails this.
//
// When both answers are "nothing to do", the controller does not write.

// needsApply tells whether applying want (a JSON-shaped map) over current
// would change current, and names the first difference found, for logs.
// owned are the field sets of the topology's applies of current.
func needsApply(current, want map[string]any, owned []map[string]any) (bool, string) {
	if why := subset(want, current, nil); why != "" {
		return true, why
	}
	if len(owned) == 0 {
		// Made by someone else, or the apply record is gone: one apply makes
		// the ownership ours, so that fields later dropped are removed.
		return true, "the topology does not own the object's fields yet"
	}
	for _, fields := range owned {
		if why := ownedBeyond(fields, want, nil); why != "" {
			return true, why
		}
	}
	return false, ""
}

// unorderedLists are the lists other writers add entries to, so the
// object's list may hold more than the controller's; elsewhere a list must
// match the desired one item by item.
var unorderedLists = map[string]bool{
	"metadata.ownerReferences": true,
	"metadata.finalizers":      true,
}

// subset returns "" when every value want sets is in got, else the first
// path where it is not. Numbers compare by value (JSON decodes them as
// float64, the cache as int64), and a null or empty value in want matches
// an absent one in got.
func subset(want, got any, path []string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			if len(w) == 0 && got == nil {
				return ""
			}
			return fmt.Sprintf("%s is not an object", dotted(path))
		}
		for k, wv := range w {
			if why := subset(wv, g[k], append(path, k)); why != "" {
				return why
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok {
			if len(w) == 0 && got == nil {
				return ""
			}
			return fmt.Sprintf("%s is not a list", dotted(path))
		}
		if unorderedLists[dotted(path)] {
			for i, wv := range w {
				if !containsSubset(g, wv) {
					return fmt.Sprintf("%s[%d] is missing", dotted(path), i)
				}
			}
			return ""
		}
		if len(w) != len(g) {
			return fmt.Sprintf("%s has %d items, want %d", dotted(path), len(g), len(w))
		}
		for i := range w {
			if why := subset(w[i], g[i], append(path, strconv.Itoa(i))); why != "" {
				return why
			}
		}
		return ""
	case nil:
		if got == nil {
			return ""
		}
		return fmt.Sprintf("%s is set, want it unset", dotted(path))
	default:
		if scalarEqual(want, got) {
			return ""
		}
		return fmt.Sprintf("%s is %v, want %v", dotted(path), got, want)
	}
}

func containsSubset(list []any, want any) bool {
	for _, g := range list {
		if subset(want, g, nil) == "" {
			return true
		}
	}
	return false
}

func scalarEqual(a, b any) bool {
	if af, ok := number(a); ok {
		bf, ok := number(b)
		return ok && af == bf
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

// ownedBeyond returns "" when every field of the owned set (managedFields'
// FieldsV1 form: "f:name" for a field, "k:{...}" for a list item by key,
// "v:..." for a set item, "i:n" for an item by position, "." for the node
// itself) is still set by want, else the first one want dropped.
func ownedBeyond(owned map[string]any, want any, path []string) string {
	for key, sub := range owned {
		if key == "." {
			continue
		}
		child, found := ownedChild(key, want)
		here := append(path, strings.TrimPrefix(key, "f:"))
		if !found {
			return fmt.Sprintf("%s is owned but no longer wanted", dotted(here))
		}
		if next, ok := sub.(map[string]any); ok && len(next) > 0 {
			if why := ownedBeyond(next, child, here); why != "" {
				return why
			}
		}
	}
	return ""
}

// ownedChild finds, in want, the value one managedFields key names.
func ownedChild(key string, want any) (any, bool) {
	kind, rest, ok := strings.Cut(key, ":")
	if !ok {
		return nil, false
	}
	switch kind {
	case "f":
		m, ok := want.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok := m[rest]
		return v, ok
	case "k":
		list, _ := want.([]any)
		keys := map[string]any{}
		if err := json.Unmarshal([]byte(rest), &keys); err != nil {
			return nil, false
		}
		for _, item := range list {
			if m, ok := item.(map[string]any); ok && subset(keys, m, nil) == "" {
				return item, true
			}
		}
	case "v":
		list, _ := want.([]any)
		var value any
		if err := json.Unmarshal([]byte(rest), &value); err != nil {
			return nil, false
		}
		for _, item := range list {
			if subset(value, item, nil) == "" {
				return item, true
			}
		}
	case "i":
		list, _ := want.([]any)
		i, err := strconv.Atoi(rest)
		if err == nil && i >= 0 && i < len(list) {
			return list[i], true
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
