package variables

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// wrapperProperty is the property a variable's value (and its schema) is put
// under before the apiextensions libraries see it: structural schemas,
// defaulting, pruning and CEL only work on objects, and a variable may be a
// scalar. It is named as the ClusterVariable's field, so that a path the
// libraries report under a variable's path is already the right one
// (spec.topology.variables[0].value.field).
const wrapperProperty = "value"

// internalSchema converts a variable's schema to apiextensions' internal
// JSONSchemaProps, the form every apiextensions library (structural schemas,
// defaulting, OpenAPI and CEL validation) takes. A default, example or enum
// value that is not JSON is reported at its place under path.
func internalSchema(s *clusterv1.JSONSchemaProps, path *field.Path) (*apiextensions.JSONSchemaProps, field.ErrorList) {
	var errs field.ErrorList
	out := &apiextensions.JSONSchemaProps{
		Description:      s.Description,
		Type:             s.Type,
		Format:           s.Format,
		Pattern:          s.Pattern,
		Required:         s.Required,
		MaxProperties:    s.MaxProperties,
		MinProperties:    s.MinProperties,
		MaxItems:         s.MaxItems,
		MinItems:         s.MinItems,
		MaxLength:        s.MaxLength,
		MinLength:        s.MinLength,
		UniqueItems:      s.UniqueItems != nil && *s.UniqueItems,
		ExclusiveMaximum: s.ExclusiveMaximum != nil && *s.ExclusiveMaximum,
		ExclusiveMinimum: s.ExclusiveMinimum != nil && *s.ExclusiveMinimum,
		XIntOrString:     s.XIntOrString != nil && *s.XIntOrString,
	}
	// The internal form only knows "true or unset": the API server refuses
	// an explicit false, which means the same as unset.
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		t := true
		out.XPreserveUnknownFields = &t
	}
	if s.Maximum != nil {
		m := float64(*s.Maximum)
		out.Maximum = &m
	}
	if s.Minimum != nil {
		m := float64(*s.Minimum)
		out.Minimum = &m
	}

	var err *field.Error
	if out.Default, err = internalJSON(s.Default, path.Child("default"), "default"); err != nil {
		errs = append(errs, err)
	}
	if out.Example, err = internalJSON(s.Example, path.Child("example"), "example"); err != nil {
		errs = append(errs, err)
	}
	for i := range s.Enum {
		v, err := internalJSON(&s.Enum[i], path.Child("enum").Index(i), "enum value")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v != nil {
			out.Enum = append(out.Enum, *v)
		}
	}

	if len(s.Properties) > 0 {
		out.Properties = make(map[string]apiextensions.JSONSchemaProps, len(s.Properties))
		for name, p := range s.Properties {
			converted, perrs := internalSchema(&p, path.Child("properties").Key(name))
			errs = append(errs, perrs...)
			if converted != nil {
				out.Properties[name] = *converted
			}
		}
	}
	if s.AdditionalProperties != nil {
		converted, perrs := internalSchema(s.AdditionalProperties, path.Child("additionalProperties"))
		errs = append(errs, perrs...)
		// Allows: additional fields are allowed, and must match Schema.
		out.AdditionalProperties = &apiextensions.JSONSchemaPropsOrBool{Allows: true, Schema: converted}
	}
	if s.Items != nil {
		converted, perrs := internalSchema(s.Items, path.Child("items"))
		errs = append(errs, perrs...)
		out.Items = &apiextensions.JSONSchemaPropsOrArray{Schema: converted}
	}
	out.AllOf, errs = internalSchemas(s.AllOf, path.Child("allOf"), errs)
	out.OneOf, errs = internalSchemas(s.OneOf, path.Child("oneOf"), errs)
	out.AnyOf, errs = internalSchemas(s.AnyOf, path.Child("anyOf"), errs)
	if s.Not != nil {
		converted, perrs := internalSchema(s.Not, path.Child("not"))
		errs = append(errs, perrs...)
		out.Not = converted
	}

	for _, rule := range s.XValidations {
		r := apiextensions.ValidationRule{
			Rule:              rule.Rule,
			Message:           rule.Message,
			MessageExpression: rule.MessageExpression,
			FieldPath:         rule.FieldPath,
		}
		if rule.Reason != "" {
			reason := apiextensions.FieldValueErrorReason(rule.Reason)
			r.Reason = &reason
		}
		out.XValidations = append(out.XValidations, r)
	}
	return out, errs
}

func internalSchemas(in []clusterv1.JSONSchemaProps, path *field.Path, errs field.ErrorList) ([]apiextensions.JSONSchemaProps, field.ErrorList) {
	if len(in) == 0 {
		return nil, errs
	}
	out := make([]apiextensions.JSONSchemaProps, 0, len(in))
	for i := range in {
		converted, perrs := internalSchema(&in[i], path.Index(i))
		errs = append(errs, perrs...)
		if converted != nil {
			out = append(out, *converted)
		}
	}
	return out, errs
}

// internalJSON decodes a raw JSON value of a schema (default, example, enum
// value) into the internal form, whole numbers as int64; nil stays nil.
func internalJSON(raw *apiextensionsv1.JSON, path *field.Path, what string) (*apiextensions.JSON, *field.Error) {
	if raw == nil || raw.Raw == nil {
		return nil, nil
	}
	var v apiextensions.JSON
	if err := json.Unmarshal(raw.Raw, &v); err != nil {
		return nil, field.Invalid(path, string(raw.Raw), fmt.Sprintf("the %s is not valid JSON (%v): write it as a JSON or YAML value", what, err))
	}
	return &v, nil
}

// wrapped puts a variable's schema under wrapperProperty of an object
// schema, the root structural schemas require.
func wrapped(s *apiextensions.JSONSchemaProps) *apiextensions.JSONSchemaProps {
	return &apiextensions.JSONSchemaProps{
		Type:       "object",
		Properties: map[string]apiextensions.JSONSchemaProps{wrapperProperty: *s},
	}
}

// structural is a variable's schema as the wrapped structural schema the
// defaulting, pruning and CEL libraries take. The schema is assumed to have
// passed Definitions; an error here means it did not.
func structural(s *apiextensions.JSONSchemaProps) (*structuralschema.Structural, error) {
	return structuralschema.NewStructural(wrapped(s))
}

// decodeValue decodes a variable's value; JSON null and an absent value are
// both nil. Whole numbers become int64, as the API server decodes a custom
// resource, so that "type: integer" and CEL's int see what they expect.
func decodeValue(v apiextensionsv1.JSON) (any, error) {
	if len(v.Raw) == 0 {
		return nil, nil
	}
	var out any
	if err := json.Unmarshal(v.Raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}
