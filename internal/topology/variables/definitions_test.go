package variables

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// declared is a class variable with a schema written in YAML.
func declared(t *testing.T, name string, required bool, schema string) clusterv1.ClusterClassVariable {
	return clusterv1.ClusterClassVariable{Name: name, Required: &required,
		Schema: clusterv1.VariableSchema{OpenAPIV3Schema: schemaOf(t, schema)}}
}

func TestDefinitionsAcceptsAndPublishes(t *testing.T) {
	class := &clusterv1.ClusterClass{}
	class.Spec.Variables = []clusterv1.ClusterClassVariable{
		declared(t, "lbImageRepository", true, `{type: string, default: kindest}`),
		declared(t, "imageRepository", false, `
type: string
default: ""
example: registry.k8s.io
description: the registry images are pulled from
x-metadata: {labels: {purpose: images}, annotations: {docs.example.com/url: "https://example.com"}}
`),
		declared(t, "kubeadmControlPlaneMaxSurge", false, `{type: string, default: "", example: "0"}`),
		declared(t, "etcd", false, `
type: object
default: {}
properties:
  image:
    type: object
    properties:
      tag: {type: string, pattern: "^[0-9.-]+$", example: 3.5.21-0}
  quota: {type: integer, minimum: 0, default: 2147483648}
`),
		declared(t, "zones", false, `
type: array
maxItems: 5
items: {type: string, enum: [a, b, c], maxLength: 8}
x-kubernetes-validations:
- rule: self.size() > 0
  message: list at least one zone
`),
		declared(t, "version", false, `
type: integer
x-kubernetes-validations:
- rule: self >= oldSelf
  messageExpression: "'version may not go down from ' + (oldSelf > 100 ? 'a large one' : 'a small one')"
  reason: FieldValueForbidden
`),
		declared(t, "port", false, `{x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}`),
		declared(t, "extra", false, `{type: object, x-kubernetes-preserve-unknown-fields: true}`),
		declared(t, "labels", false, `{type: object, maxProperties: 10, additionalProperties: {type: string, maxLength: 63}}`),
		declared(t, "network", false, `
type: object
properties:
  pods: {type: string, maxLength: 64}
  services: {type: string, maxLength: 64}
x-kubernetes-validations:
- rule: "!has(self.pods) || !has(self.services) || self.pods != self.services"
  message: pods and services need different ranges
  fieldPath: .services
`),
	}
	class.Spec.Variables[0].DeprecatedV1Beta1Metadata.Labels = map[string]string{"old": "yes"}
	before := class.DeepCopy()

	got, errs := Definitions(class)
	wantErrors(t, errs, nil)
	if !reflect.DeepEqual(class, before) {
		t.Error("Definitions changed the class")
	}
	var names []string
	for _, v := range got {
		names = append(names, v.Name)
	}
	want := []string{"etcd", "extra", "imageRepository", "kubeadmControlPlaneMaxSurge", "labels", "lbImageRepository", "network", "port", "version", "zones"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("status.variables are %v, want them sorted by name: %v", names, want)
	}
	lb := got[5]
	if lb.DefinitionsConflict == nil || *lb.DefinitionsConflict || len(lb.Definitions) != 1 {
		t.Fatalf("lbImageRepository: %+v, want one definition and definitionsConflict false", lb)
	}
	d := lb.Definitions[0]
	if d.From != InlineDefinitionFrom || d.Required == nil || !*d.Required ||
		!reflect.DeepEqual(d.Schema, class.Spec.Variables[0].Schema) ||
		!reflect.DeepEqual(d.DeprecatedV1Beta1Metadata, class.Spec.Variables[0].DeprecatedV1Beta1Metadata) {
		t.Errorf("lbImageRepository's definition %+v does not carry the class's", d)
	}
	d.DeprecatedV1Beta1Metadata.Labels["old"] = "changed"
	*d.Required = false
	if class.Spec.Variables[0].DeprecatedV1Beta1Metadata.Labels["old"] != "yes" || !*class.Spec.Variables[0].Required {
		t.Error("the published definition shares its maps or pointers with the class")
	}

	// What Definitions accepts, ValidateCluster and Default can use.
	cluster := topologyCluster()
	cluster.Spec.Topology.Variables = []clusterv1.ClusterVariable{value("zones", `["a"]`), value("network", `{"pods":"a","services":"b"}`)}
	wantErrors(t, ValidateCluster(got, cluster, nil), nil)
	cluster.Spec.Topology.Variables = []clusterv1.ClusterVariable{value("zones", `[]`), value("network", `{"pods":"a","services":"a"}`)}
	wantErrors(t, ValidateCluster(got, cluster, nil), []string{
		`spec.topology.variables[0].value: Invalid value: variable "zones": list at least one zone`,
		`spec.topology.variables[1].value.services: Invalid value: variable "network": pods and services need different ranges`,
	})
}

func TestDefinitionsRefuses(t *testing.T) {
	costly := func(maxItems, rules int) string {
		var rs []string
		for i := range rules {
			rs = append(rs, fmt.Sprintf(`{rule: "self.contains('%d')"}`, i))
		}
		return fmt.Sprintf(`{type: array, maxItems: %d, items: {type: string, maxLength: 1000, x-kubernetes-validations: [%s]}}`, maxItems, strings.Join(rs, ","))
	}
	const v0 = "spec.variables[0]"
	const s0 = v0 + ".schema.openAPIV3Schema"
	tests := []struct {
		name   string
		schema string
		errs   []string
	}{
		{name: "unknown type", schema: `{type: text}`,
			errs: []string{s0 + `.type: Unsupported value: "text": variable "v": supported values: "array", "boolean", "integer", "number", "object", "string"`}},
		{name: "a field without a type", schema: `{type: object, properties: {a: {description: x}}}`,
			errs: []string{s0 + `.properties[a].type: Required value: variable "v": must not be empty for specified object fields: give it a type`}},
		{name: "properties and additionalProperties", schema: `{type: object, properties: {a: {type: string}}, additionalProperties: {type: string}}`,
			errs: []string{s0 + `.additionalProperties: Forbidden: variable "v": a schema has either properties (an object with named fields) or additionalProperties (a map): drop one`}},
		{name: "a type inside allOf is not structural", schema: `{type: string, allOf: [{type: string}]}`,
			errs: []string{s0 + `.allOf[0].type: Forbidden: variable "v": must be empty to be structural: inside allOf, anyOf, oneOf and not only value checks are allowed`}},
		{name: "an array without items", schema: `{type: array}`,
			errs: []string{s0 + `.items: Required value: variable "v": must be specified: give the array an items schema`}},
		{name: "an invalid pattern", schema: `{type: string, pattern: "["}`,
			errs: []string{s0 + `.pattern: Invalid value: "[": variable "v": must be a valid regular expression`}},
		{name: "a default of the wrong type", schema: `{type: string, default: 3}`,
			errs: []string{s0 + `.default: Invalid value: variable "v": must be of type string, not integer`}},
		{name: "a nested default out of range", schema: `{type: object, properties: {size: {type: integer, maximum: 3, default: 5}}}`,
			errs: []string{s0 + `.properties[size].default: Invalid value: 5: variable "v": should be less than or equal to 3`}},
		{name: "a default with a field the schema does not declare", schema: `{type: object, properties: {a: {type: string}}, default: {b: x}}`,
			errs: []string{s0 + `.default: Invalid value: {"b":"x"}: variable "v": must not have unknown fields: remove from the default the fields`}},
		{name: "a default breaking a rule", schema: `{type: string, default: a, x-kubernetes-validations: [{rule: "self.size() > 1", message: too short}]}`,
			errs: []string{s0 + `.default: Invalid value: "a": variable "v": too short`}},
		{name: "an example of the wrong type", schema: `{type: integer, example: "three"}`,
			errs: []string{s0 + `.example: Invalid value: "three": variable "v": the value does not match the schema: must be of type integer, not string`}},
		{name: "an enum value of the wrong type", schema: `{type: string, enum: [a, 1]}`,
			errs: []string{s0 + `.enum[1]: Invalid value: 1: variable "v": the value does not match the schema: must be of type string, not integer`}},
		{name: "an example outside the enum", schema: `{type: string, enum: [a], example: b}`,
			errs: []string{s0 + `.example: Unsupported value: "b": variable "v": the value does not match the schema: supported values: "a"`}},
		{name: "an enum value breaking a rule", schema: `{type: string, enum: [ab, abc], x-kubernetes-validations: [{rule: "self.size() < 3", messageExpression: "'too long: ' + self"}]}`,
			errs: []string{s0 + `.enum[1]: Invalid value: "abc": variable "v": the value does not pass the schema's rules: too long: abc`}},
		{name: "a rule that does not parse", schema: `{type: string, x-kubernetes-validations: [{rule: "self.size() >"}]}`,
			errs: []string{s0 + `.x-kubernetes-validations[0].rule: Invalid value: "self.size() >": variable "v": the rule does not compile: compilation failed: ERROR: <input>:1:14: Syntax error`}},
		{name: "a rule that does not type-check", schema: `{type: string, x-kubernetes-validations: [{rule: "self == 1"}]}`,
			errs: []string{s0 + `.x-kubernetes-validations[0].rule: Invalid value: "self == 1": variable "v": the rule does not compile: compilation failed: ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(string, int)'`}},
		{name: "a rule naming an undeclared field", schema: `{type: object, properties: {a: {type: string}}, x-kubernetes-validations: [{rule: "self.b == 'x'"}]}`,
			errs: []string{s0 + `.x-kubernetes-validations[0].rule: Invalid value: "self.b == 'x'": variable "v": the rule does not compile: compilation failed: ERROR: <input>:1:5: undefined field 'b'`}},
		{name: "a message expression that does not compile", schema: `{type: string, x-kubernetes-validations: [{rule: "true", messageExpression: "1 +"}]}`,
			errs: []string{s0 + `.x-kubernetes-validations[0].messageExpression: Invalid value: "1 +": variable "v": the message expression does not compile`}},
		{name: "an unknown reason and a field path to nowhere", schema: `{type: object, properties: {a: {type: string}}, x-kubernetes-validations: [{rule: "true", fieldPath: .b, reason: Nope}]}`,
			errs: []string{
				s0 + `.x-kubernetes-validations[0].reason: Unsupported value: "Nope": variable "v": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"`,
				s0 + `.x-kubernetes-validations[0].fieldPath: Invalid value: ".b": variable "v": the field path must lead to a field the schema declares`,
			}},
		{name: "a message over two lines", schema: "{type: string, x-kubernetes-validations: [{rule: \"true\", message: \"a\\nb\"}]}",
			errs: []string{s0 + `.x-kubernetes-validations[0].message: Invalid value: "a\nb": variable "v": the message must be one line`}},
		{name: "oldSelf inside array items", schema: `{type: array, items: {type: object, properties: {size: {type: integer}}, x-kubernetes-validations: [{rule: "self.size >= oldSelf.size"}]}}`,
			errs: []string{s0 + `.items.x-kubernetes-validations[0].rule: Invalid value: "self.size >= oldSelf.size": variable "v": oldSelf cannot be used inside ` + s0 + `.items: an array's elements have no old value`}},
		{name: "a rule too costly on its own", schema: costly(30000, 1),
			errs: []string{s0 + `.items.x-kubernetes-validations[0].rule: Forbidden: variable "v": the rule's estimated cost exceeds the API server's limit by 20%`}},
		{name: "rules cheap enough alone but too costly together", schema: costly(22000, 12),
			errs: []string{
				s0 + `.items.x-kubernetes-validations[0].rule: Forbidden: variable "v": this rule is among the most expensive`,
				s0 + `.items.x-kubernetes-validations[1].rule: Forbidden: variable "v": this rule is among the most expensive`,
				s0 + `.items.x-kubernetes-validations[2].rule: Forbidden: variable "v": this rule is among the most expensive`,
				s0 + `.items.x-kubernetes-validations[3].rule: Forbidden: variable "v": this rule is among the most expensive`,
				s0 + `: Forbidden: variable "v": the estimated cost of all the schema's x-kubernetes-validations rules exceeds the API server's limit by`,
			}},
		{name: "bad x-metadata", schema: `{type: object, properties: {a: {type: string, x-metadata: {labels: {"-bad": x}}}}}`,
			errs: []string{s0 + `.properties[a].x-metadata.labels: Invalid value: "-bad": variable "v": name part must consist of alphanumeric characters`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := &clusterv1.ClusterClass{}
			class.Spec.Variables = []clusterv1.ClusterClassVariable{declared(t, "v", false, tt.schema)}
			got, errs := Definitions(class)
			wantErrors(t, errs, tt.errs)
			if got != nil {
				t.Errorf("Definitions published %d variables despite errors", len(got))
			}
		})
	}
}

func TestDefinitionsNames(t *testing.T) {
	schema := `{type: string}`
	class := &clusterv1.ClusterClass{}
	class.Spec.Variables = []clusterv1.ClusterClassVariable{
		declared(t, "", false, schema),
		declared(t, "builtin", false, schema),
		declared(t, "builtin.cluster", false, schema),
		declared(t, "image.name", false, schema),
		declared(t, "builtinImage", false, schema), // allowed, as upstream allows it
		declared(t, "region", false, schema),
		declared(t, "region", true, schema),
	}
	class.Spec.Variables[5].DeprecatedV1Beta1Metadata.Annotations = map[string]string{"bad key!": "x"}
	class.Spec.Variables[6].Schema.OpenAPIV3Schema.Default = &apiextensionsv1.JSON{Raw: []byte(`{`)}
	_, errs := Definitions(class)
	wantErrors(t, errs, []string{
		`spec.variables[0].name: Required value: every variable needs a name`,
		`spec.variables[1].name: Invalid value: "builtin": "builtin" is reserved for the variables Cluster API provides`,
		`spec.variables[2].name: Invalid value: "builtin.cluster": names under "builtin" are the variables Cluster API provides`,
		`spec.variables[3].name: Invalid value: "image.name": a variable name may not contain "."`,
		`spec.variables[5].deprecatedV1Beta1Metadata.annotations: Invalid value: "bad key!": variable "region": name part must consist of alphanumeric characters`,
		`spec.variables[6].name: Duplicate value: "region": spec.variables[5] already declares variable "region": declare each variable once`,
		`spec.variables[6].schema.openAPIV3Schema.default: Invalid value: "{": the default is not valid JSON`,
	})
}
