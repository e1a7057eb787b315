package variables

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// crdErrors is what the API server's own CRD validation says of the schema
// as a field of a CRD (spec.value): the errors it reports.
func crdErrors(t *testing.T, s clusterv1.JSONSchemaProps) field.ErrorList {
	t.Helper()
	schema, errs := internalSchema(&s, field.NewPath("x"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	crd := &apiextensions.CustomResourceDefinition{}
	crd.Name = "things.example.com"
	crd.Spec = apiextensions.CustomResourceDefinitionSpec{
		Group:    "example.com",
		Names:    apiextensions.CustomResourceDefinitionNames{Plural: "things", Singular: "thing", Kind: "Thing", ListKind: "ThingList"},
		Scope:    apiextensions.NamespaceScoped,
		Versions: []apiextensions.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}},
		Validation: &apiextensions.CustomResourceValidation{OpenAPIV3Schema: &apiextensions.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensions.JSONSchemaProps{
				"spec": {Type: "object", Properties: map[string]apiextensions.JSONSchemaProps{wrapperProperty: *schema}},
			},
		}},
		PreserveUnknownFields: new(bool),
		Conversion:            &apiextensions.CustomResourceConversion{Strategy: apiextensions.NoneConverter},
	}
	crd.Status.StoredVersions = []string{"v1"}
	return apiextensionsvalidation.ValidateCustomResourceDefinition(context.Background(), crd)
}

// TestDefinitionsAgreeWithTheAPIServer checks that a schema Definitions
// accepts is one the API server accepts as a CRD field's schema, and the
// other way round: structure, defaults, CEL rules and their costs are held
// to the same limits.
func TestDefinitionsAgreeWithTheAPIServer(t *testing.T) {
	rules := func(n int) string {
		var rs []string
		for i := range n {
			rs = append(rs, fmt.Sprintf(`{rule: "self.contains('%d')"}`, i))
		}
		return strings.Join(rs, ",")
	}
	tests := []struct {
		schema  string
		refused bool
	}{
		{`{type: string, default: a, x-kubernetes-validations: [{rule: "self.size() > 0", message: empty}]}`, false},
		{`{type: integer, x-kubernetes-validations: [{rule: "self >= oldSelf", messageExpression: "'was ' + (oldSelf > 3 ? 'big' : 'small')"}]}`, false},
		{`{type: integer, x-kubernetes-validations: [{rule: "self >= oldSelf", messageExpression: "'was ' + string(oldSelf)"}]}`, true},
		{`{type: array, maxItems: 20000, items: {type: string, maxLength: 1000, x-kubernetes-validations: [` + rules(1) + `]}}`, false},
		{`{type: array, maxItems: 30000, items: {type: string, maxLength: 1000, x-kubernetes-validations: [` + rules(1) + `]}}`, true},
		{`{type: array, maxItems: 18000, items: {type: string, maxLength: 1000, x-kubernetes-validations: [` + rules(12) + `]}}`, false},
		{`{type: array, maxItems: 22000, items: {type: string, maxLength: 1000, x-kubernetes-validations: [` + rules(12) + `]}}`, true},
		{`{type: array, items: {type: array, items: {type: string}}, x-kubernetes-validations: [{rule: "self.all(x, self.all(y, x.all(a, y.all(b, a == b))))"}]}`, true},
		{`{type: array, maxItems: 3, items: {type: string, maxLength: 5}, x-kubernetes-validations: [{rule: "self.all(x, self.all(y, x == y))"}]}`, false},
		{`{type: array, items: {type: object, properties: {size: {type: integer}}, x-kubernetes-validations: [{rule: "self.size >= oldSelf.size"}]}}`, true},
		{`{type: object, properties: {a: {type: string}}, x-kubernetes-validations: [{rule: "self.b == 1"}]}`, true},
		{`{type: object, properties: {a: {type: string}}, x-kubernetes-validations: [{rule: "has(self.a)", fieldPath: .a, reason: FieldValueRequired}]}`, false},
		{`{type: object, properties: {a: {type: string}}, x-kubernetes-validations: [{rule: "true", fieldPath: .b}]}`, true},
		{`{type: object, properties: {a: {type: string, default: 1}}}`, true},
		{`{type: object, properties: {a: {type: string}}, default: {b: 1}}`, true},
		{`{type: string, default: a, x-kubernetes-validations: [{rule: "self.size() > 1"}]}`, true},
		{`{type: object, properties: {a: {type: string}}, additionalProperties: {type: string}}`, true},
		{`{type: object, properties: {a: {description: untyped}}}`, true},
		{`{type: string, allOf: [{type: string}]}`, true},
		{`{x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}], x-kubernetes-validations: [{rule: "type(self) == int || self != ''"}]}`, false},
		{`{type: object, x-kubernetes-preserve-unknown-fields: true, properties: {a: {type: string}}, x-kubernetes-validations: [{rule: "!has(self.a) || self.a != 'x'"}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			s := schemaOf(t, tt.schema)
			class := &clusterv1.ClusterClass{}
			class.Spec.Variables = []clusterv1.ClusterClassVariable{{Name: "v", Schema: clusterv1.VariableSchema{OpenAPIV3Schema: s}}}
			_, ours := Definitions(class)
			theirs := crdErrors(t, s)
			if (len(ours) > 0) != tt.refused || (len(theirs) > 0) != tt.refused {
				t.Errorf("want refused=%v; Definitions says:\n%s\nthe API server says:\n%s", tt.refused, errorLines(ours), errorLines(theirs))
			}
		})
	}
}
