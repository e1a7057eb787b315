package clusterresourceset

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
)

func TestParseData(t *testing.T) {
	tests := []struct {
		name    string
		data    map[string][]byte
		want    []string // kind/name in create order
		wantErr string
	}{
		{name: "several YAML documents, empty ones skipped", data: map[string][]byte{"a.yaml": []byte(`
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: sa}
---
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
`)}, want: []string{"ServiceAccount/sa", "Deployment/d"}},
		{name: "JSON list", data: map[string][]byte{"a.json": []byte(` [{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}},{"apiVersion":"v1","kind":"Secret","metadata":{"name":"y"}}]`)},
			want: []string{"ConfigMap/x", "Secret/y"}},
		{name: "JSON object", data: map[string][]byte{"a.json": []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`)},
			want: []string{"ConfigMap/x"}},
		{name: "keys in order, Namespaces and CRDs first within a key", data: map[string][]byte{
			"b": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: late, namespace: ns}\n"),
			"a": []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n"),
		}, want: []string{"Namespace/ns", "CustomResourceDefinition/widgets.example.com", "Widget/w", "ConfigMap/late"}},
		{name: "document without kind", data: map[string][]byte{"a": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\napiVersion: v1\nmetadata: {name: x}\n")},
			wantErr: "key a: document 2 is not a Kubernetes object: it has no kind"},
		{name: "not YAML", data: map[string][]byte{"bad": []byte("apiVersion: v1\nkind: [unclosed\n")},
			wantErr: "key bad: document 1 is not valid YAML or JSON"},
		{name: "broken JSON list", data: map[string][]byte{"l": []byte(`[{"apiVersion":"v1",`)}, wantErr: "key l: not a JSON list of objects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := parseData(tt.data)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if objs != nil {
					t.Errorf("objects returned with the error: %d", len(objs))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// The digest is Cluster API's: SHA-256 of the values concatenated in key
// order, so that bindings moved between the two compare equal.
func TestDataHash(t *testing.T) {
	data := map[string][]byte{"b": []byte("second"), "a": []byte("first")}
	want := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("firstsecond")))
	if got := dataHash(data); got != want {
		t.Errorf("dataHash = %s, want %s", got, want)
	}
	if dataHash(map[string][]byte{"a": []byte("first"), "b": []byte("changed")}) == want {
		t.Error("a change of a value does not change the digest")
	}
}
