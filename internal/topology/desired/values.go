package desired

import (
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The topology's settings come from the topology or, where it leaves them
// unset, from the class: these pick the first that is set.

// merged is a new map holding base's entries overridden by over's.
func merged(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}

// firstSet is the first of the slices that is set (not nil).
func firstSet[T any](candidates ...[]T) []T {
	for _, c := range candidates {
		if c != nil {
			return c
		}
	}
	return nil
}

// firstPtr is the first of the pointers that is set.
func firstPtr[T any](candidates ...*T) *T {
	for _, c := range candidates {
		if c != nil {
			return c
		}
	}
	return nil
}

// nameOf is an object's name, empty for none.
func nameOf(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	return u.GetName()
}

// firstNonEmpty is the first of the strings that is not empty.
func firstNonEmpty(candidates ...string) string {
	for _, c := range candidates {
		if c != "" {
			return c
		}
	}
	return ""
}
