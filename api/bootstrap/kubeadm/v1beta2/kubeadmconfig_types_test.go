package v1beta2

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestBootstrapTokenStringJSON(t *testing.T) {
	var tok BootstrapTokenString
	if err := json.Unmarshal([]byte(`"abcdef.0123456789abcdef"`), &tok); err != nil {
		t.Fatal(err)
	}
	if tok.ID != "abcdef" || tok.Secret != "0123456789abcdef" {
		t.Fatalf("parsed %+v", tok)
	}
	out, err := json.Marshal(tok)
	if err != nil || string(out) != `"abcdef.0123456789abcdef"` {
		t.Fatalf("marshal = %s, %v", out, err)
	}
	for _, bad := range []string{`"abcdef"`, `"ABCDEF.0123456789abcdef"`, `"abcdef.0123456789abcde"`, `42`} {
		if err := json.Unmarshal([]byte(bad), &tok); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	var empty BootstrapTokenString
	if err := json.Unmarshal([]byte(`""`), &empty); err != nil || empty.String() != "" {
		t.Errorf(`"" gave %+v, %v`, empty, err)
	}
	// A token that is not set is left out of its BootstrapToken.
	out, _ = json.Marshal(BootstrapToken{Description: "x"})
	if string(out) != `{"description":"x"}` {
		t.Errorf("unset token marshalled as %s", out)
	}
}

// TestValidCorpusRoundTrip decodes every valid bootstrap manifest of the CRD
// test corpus strictly into the Go types and encodes it again: nothing may be
// unknown to the types, and nothing may be lost or changed on the way.
func TestValidCorpusRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../../../../config/crd/testdata/valid/bootstrap-*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files found: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
			var head struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s doc %d: %v", f, i, err)
			}
			var obj any
			switch head.Kind {
			case "KubeadmConfig":
				obj = &KubeadmConfig{}
			case "KubeadmConfigTemplate":
				obj = &KubeadmConfigTemplate{}
			default:
				t.Fatalf("%s doc %d: unexpected kind %q", f, i, head.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Errorf("%s doc %d: %v", f, i, err)
				continue
			}
			again, err := json.Marshal(obj)
			if err != nil {
				t.Fatalf("%s doc %d: %v", f, i, err)
			}
			var want, got map[string]any
			j, _ := yaml.YAMLToJSON(doc)
			_ = json.Unmarshal(j, &want)
			_ = json.Unmarshal(again, &got)
			if !reflect.DeepEqual(want, got) {
				t.Errorf("%s doc %d changed on a round trip:\nwant %s\ngot  %s", f, i, j, again)
			}
		}
	}
}
