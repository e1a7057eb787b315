package variables

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// schemaOf decodes a schema written in YAML (or JSON), as a class author
// writes it.
func schemaOf(t *testing.T, doc string) clusterv1.JSONSchemaProps {
	t.Helper()
	var s clusterv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
		t.Fatalf("test schema %q: %v", doc, err)
	}
	return s
}

// inline is a status.variables entry for one inline definition.
func inline(name string, required bool, s clusterv1.JSONSchemaProps) clusterv1.ClusterClassStatusVariable {
	return clusterv1.ClusterClassStatusVariable{
		Name: name,
		Definitions: []clusterv1.ClusterClassStatusVariableDefinition{{
			From:     InlineDefinitionFrom,
			Required: &required,
			Schema:   clusterv1.VariableSchema{OpenAPIV3Schema: s},
		}},
	}
}

// value is a variable's value as raw JSON ("" for none).
func value(name, raw string) clusterv1.ClusterVariable {
	v := clusterv1.ClusterVariable{Name: name}
	if raw != "" {
		v.Value = apiextensionsv1.JSON{Raw: []byte(raw)}
	}
	return v
}

// wantErrors checks errs against the expected "path: fragment" pairs, in
// order: each error's field is exactly the path and its text contains the
// fragment.
func wantErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(errs), len(want), errorLines(errs))
	}
	for i, w := range want {
		path, fragment, _ := strings.Cut(w, ": ")
		if errs[i].Field != path {
			t.Errorf("error %d is on %q, want %q:\n%s", i, errs[i].Field, path, errorLines(errs))
		}
		if !strings.Contains(errs[i].Error(), fragment) {
			t.Errorf("error %d %q does not say %q", i, errs[i].Error(), fragment)
		}
	}
}

func errorLines(errs field.ErrorList) string {
	lines := make([]string, 0, len(errs))
	for _, e := range errs {
		lines = append(lines, "  "+e.Error())
	}
	return strings.Join(lines, "\n")
}

// clone deep-copies values so a test can see whether a function changed
// its input.
func clone(values []clusterv1.ClusterVariable) []clusterv1.ClusterVariable {
	if values == nil {
		return nil
	}
	out := make([]clusterv1.ClusterVariable, len(values))
	for i := range values {
		values[i].DeepCopyInto(&out[i])
	}
	return out
}

// show prints values as name=json pairs for a comparison and its message.
func show(values []clusterv1.ClusterVariable) string {
	parts := make([]string, 0, len(values))
	for _, v := range values {
		parts = append(parts, v.Name+"="+string(v.Value.Raw))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
