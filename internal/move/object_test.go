package move

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDifferences(t *testing.T) {
	obj := func(mutate func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
			"metadata": map[string]any{"name": "m", "namespace": "ns", "uid": "1", "resourceVersion": "5",
				"labels": map[string]any{"a": "1"}, "annotations": map[string]any{"b": "2"}},
			"spec":   map[string]any{"version": "v1.35.0", "bootstrap": map[string]any{"dataSecretName": "m-data"}},
			"status": map[string]any{"phase": "Running"},
		}}
		if mutate != nil {
			mutate(u)
		}
		return u
	}
	secret := func(value string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "s", "namespace": "ns"}, "data": map[string]any{"value": value}}}
	}
	tests := []struct {
		name      string
		src, copy *unstructured.Unstructured
		want      []string
	}{
		{name: "a copy made by a move is equal", src: obj(nil), copy: portable(obj(nil))},
		{
			name: "server fields, status and the move's annotations do not count",
			src:  obj(nil),
			copy: obj(func(u *unstructured.Unstructured) {
				u.SetUID("2")
				u.SetResourceVersion("9")
				u.Object["status"] = map[string]any{"phase": "Provisioning"}
				u.SetAnnotations(map[string]string{"b": "2", sourceUIDKey: "1", pausedByMoveKey: "true"})
			}),
		},
		{
			name: "every difference in spec, labels and annotations is listed",
			src:  obj(nil),
			copy: obj(func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "other", "spec", "bootstrap", "dataSecretName")
				_ = unstructured.SetNestedField(u.Object, "x", "spec", "providerID")
				u.SetLabels(nil)
				u.SetAnnotations(map[string]string{"b": "3"})
			}),
			want: []string{
				`annotations.b: source "2", copy "3"`,
				`labels.a: source "1", copy <none>`,
				`spec.bootstrap.dataSecretName: source "m-data", copy "other"`,
				`spec.providerID: source <none>, copy "x"`,
			},
		},
		{
			name: "a pause the move made and undid in the copy does not count",
			src: obj(func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{"b": "2", pausedByMoveKey: "true", pausedAnnotation: ""})
				_ = unstructured.SetNestedField(u.Object, true, "spec", "paused")
			}),
			copy: obj(nil),
		},
		{
			name: "a pause the user made counts",
			src: obj(func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{"b": "2", pausedAnnotation: ""})
				_ = unstructured.SetNestedField(u.Object, true, "spec", "paused")
			}),
			copy: obj(nil),
			want: []string{`annotations.cluster.x-k8s.io/paused: source "", copy <none>`, `spec.paused: source "true", copy <none>`},
		},
		{name: "secret values are never shown", src: secret("c2VjcmV0"), copy: secret("b3RoZXI="), want: []string{"data.value: differs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := differences(tt.src, tt.copy)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestPortableKeepsStatusAndRecordsTheSource(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "ns", "uid": "u1", "resourceVersion": "3",
			"creationTimestamp": "2026-01-01T00:00:00Z", "managedFields": []any{}, "finalizers": []any{"f"}},
		"status": map[string]any{"x": "y"}}}
	p := portable(u)
	if p.GetUID() != "" || p.GetResourceVersion() != "" || p.GetManagedFields() != nil || p.Object["metadata"].(map[string]any)["creationTimestamp"] != nil {
		t.Errorf("server-set fields kept: %v", p.Object["metadata"])
	}
	if p.GetAnnotations()[sourceUIDKey] != "u1" || len(p.GetFinalizers()) != 1 || p.Object["status"] == nil {
		t.Errorf("portable lost what a copy needs: %v", p.Object)
	}
	if u.GetUID() != "u1" {
		t.Error("portable changed its input")
	}
	// A file's object (no UID) keeps the UID it recorded.
	if q := portable(p); q.GetAnnotations()[sourceUIDKey] != "u1" {
		t.Errorf("re-portable lost the source UID: %v", q.GetAnnotations())
	}
}
