package crd_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	capstanscheme "capstan.dev/capstan/internal/scheme"
)

// Every object of the valid and status corpora decodes strictly into
// Capstan's Go type for its kind and encodes back to what it was: a field
// the CRD has and the Go type lacks (or spells differently) would be lost
// the first time a controller writes the object.
func TestCorpusRoundTripsThroughGoTypes(t *testing.T) {
	scheme := capstanscheme.New()
	for _, dir := range []string{"valid", "status"} {
		for _, f := range loadCorpus(t, dir) {
			t.Run(dir+"/"+strings.TrimSuffix(filepath.Base(f.path), ".yaml"), func(t *testing.T) {
				for _, doc := range f.docs {
					obj, err := scheme.New(doc.GroupVersionKind())
					if err != nil {
						t.Fatalf("%s has no Go type: %v", doc.GroupVersionKind(), err)
					}
					raw, err := json.Marshal(doc.Object)
					if err != nil {
						t.Fatal(err)
					}
					if err := yaml.UnmarshalStrict(raw, obj); err != nil {
						t.Fatalf("%s %s does not decode into %T: %v", doc.GetKind(), doc.GetName(), obj, err)
					}
					back, err := json.Marshal(obj)
					if err != nil {
						t.Fatal(err)
					}
					got := map[string]any{}
					if err := json.Unmarshal(back, &got); err != nil {
						t.Fatal(err)
					}
					// Go leaves out empty objects it holds in omitempty
					// fields: the same value to the API server.
					for _, d := range subsetDiff("", withoutEmpty(doc.Object), got) {
						t.Errorf("%s %s: %s", doc.GetKind(), doc.GetName(), d)
					}
				}
			})
		}
	}
}

// withoutEmpty is v without the empty objects in it, at any depth.
func withoutEmpty(v map[string]any) map[string]any {
	out := map[string]any{}
	for k, x := range v {
		if m, ok := x.(map[string]any); ok {
			if len(m) == 0 {
				continue
			}
			x = withoutEmpty(m)
		}
		if l, ok := x.([]any); ok {
			items := make([]any, len(l))
			for i, item := range l {
				if m, ok := item.(map[string]any); ok {
					item = withoutEmpty(m)
				}
				items[i] = item
			}
			x = items
		}
		out[k] = x
	}
	return out
}
