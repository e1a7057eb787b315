package move

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// portable is the object as it is written to a target: without what the
// API server assigns (UID, resource version, timestamps, managed fields),
// with the source's UID recorded in an annotation. Owner references keep
// the source's UIDs until rewritten for a target; status is kept.
func portable(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := u.DeepCopy()
	if uid := string(u.GetUID()); uid != "" {
		ann := out.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[sourceUIDKey] = uid
		out.SetAnnotations(ann)
	}
	meta, _ := out.Object["metadata"].(map[string]any)
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
		"deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "generateName"} {
		delete(meta, f)
	}
	return out
}

// content is what a copy must have exactly as the source has it: every
// top-level field but metadata and status (spec, and data and type for
// Secrets and ConfigMaps), and labels and annotations except the move's own.
func content(u *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for f, v := range u.Object {
		switch f {
		case "metadata", "status", "apiVersion", "kind":
		default:
			out[f] = v
		}
	}
	out["labels"] = stringMap(u.GetLabels())
	// What the move paused is unpaused in the copy at its end, while the
	// source (a directory's file) keeps it: the pause is the move's own,
	// not the object's.
	_, pausedByMove := u.GetAnnotations()[pausedByMoveKey]
	ann := map[string]any{}
	for k, v := range u.GetAnnotations() {
		if !strings.HasPrefix(k, annotationPrefix) && !(pausedByMove && k == pausedAnnotation) {
			ann[k] = v
		}
	}
	out["annotations"] = ann
	if spec, ok := out["spec"].(map[string]any); ok && pausedByMove {
		if _, has := spec["paused"]; has {
			trimmed := make(map[string]any, len(spec))
			for k, v := range spec {
				if k != "paused" {
					trimmed[k] = v
				}
			}
			out["spec"] = trimmed
		}
	}
	return out
}

func stringMap(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// diff lists where two values differ, by path; secrets' values are never
// printed, only that they differ.
func diff(path string, a, b any, secret bool) []string {
	if reflect.DeepEqual(a, b) {
		return nil
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		var sorted []string
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []string
		for _, k := range sorted {
			p := k
			if path != "" {
				p = path + "." + k
			}
			out = append(out, diff(p, am[k], bm[k], secret)...)
		}
		return out
	}
	if secret && (strings.HasPrefix(path, "data") || strings.HasPrefix(path, "stringData")) {
		return []string{path + ": differs"}
	}
	return []string{fmt.Sprintf("%s: source %s, copy %s", path, show(a), show(b))}
}

func show(v any) string {
	if v == nil {
		return "<none>"
	}
	s := fmt.Sprintf("%v", v)
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// differences lists how a copy differs from its source in what must be
// kept exactly.
func differences(source, copy *unstructured.Unstructured) []string {
	return diff("", content(source), content(copy), source.GetKind() == secretKind && source.GroupVersionKind().Group == "")
}
