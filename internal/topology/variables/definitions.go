package variables

import (
	"context"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// InlineDefinitionFrom is status.variables[].definitions[].from for the
// class's own (inline) definitions.
const InlineDefinitionFrom = "inline"

// The CEL cost limits are the API server's for a CRD: a rule a CRD could
// not carry cannot be a variable's either.
const (
	ruleCostLimit  = apiextensionsvalidation.StaticEstimatedCostLimit
	totalCostLimit = apiextensionsvalidation.StaticEstimatedCRDCostLimit
)

// costAdvice is how to bring a CEL rule's estimated cost down.
const costAdvice = "simplify the rule, or bound what it walks with maxItems, maxProperties and maxLength on the arrays, maps and strings"

// Definitions checks the class's inline variable definitions (schemas
// structural, defaults and examples valid against them, CEL rules that
// compile) and returns them in the shape of the class's status.variables.
// The errors name spec.variables[i]... and what to fix.
//
// The list is sorted by name, as upstream's ClusterClass controller writes
// it; it is nil whenever there are errors, so that a caller never publishes
// a definition Clusters could not be checked against.
func Definitions(class *clusterv1.ClusterClass) ([]clusterv1.ClusterClassStatusVariable, field.ErrorList) {
	path := field.NewPath("spec", "variables")
	var errs field.ErrorList
	seen := make(map[string]int, len(class.Spec.Variables))
	out := make([]clusterv1.ClusterClassStatusVariable, 0, len(class.Spec.Variables))
	for i, v := range class.Spec.Variables {
		p := path.Index(i)
		errs = append(errs, checkName(v.Name, p.Child("name"))...)
		if first, dup := seen[v.Name]; dup {
			err := field.Duplicate(p.Child("name"), v.Name)
			err.Detail = fmt.Sprintf("spec.variables[%d] already declares variable %q: declare each variable once", first, v.Name)
			errs = append(errs, err)
		} else {
			seen[v.Name] = i
		}
		errs = append(errs, named(checkMetadata(v.DeprecatedV1Beta1Metadata.Labels, v.DeprecatedV1Beta1Metadata.Annotations, p.Child("deprecatedV1Beta1Metadata")), v.Name)...)
		schemaPath := p.Child("schema", "openAPIV3Schema")
		errs = append(errs, named(checkXMetadata(&v.Schema.OpenAPIV3Schema, schemaPath), v.Name)...)
		errs = append(errs, checkSchema(&v.Schema.OpenAPIV3Schema, schemaPath, v.Name)...)

		own := v.DeepCopy() // the status shares nothing with the class
		out = append(out, clusterv1.ClusterClassStatusVariable{
			Name:                v.Name,
			DefinitionsConflict: new(bool),
			Definitions: []clusterv1.ClusterClassStatusVariableDefinition{{
				From:                      InlineDefinitionFrom,
				Required:                  own.Required,
				DeprecatedV1Beta1Metadata: own.DeprecatedV1Beta1Metadata,
				Schema:                    own.Schema,
			}},
		})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	slices.SortStableFunc(out, func(a, b clusterv1.ClusterClassStatusVariable) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// checkName refuses names a Cluster could not set or a patch could not
// address: empty, the builtin variables' name, and names with a dot (a dot
// selects a field inside a value: valueFrom.variable: image.name).
func checkName(name string, path *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(path, "every variable needs a name: set one")}
	case name == BuiltinsName:
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf(
			"%q is reserved for the variables Cluster API provides (builtin.cluster.name, ...): choose another name", BuiltinsName))}
	case strings.HasPrefix(name, BuiltinsName+"."):
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf(
			"names under %q are the variables Cluster API provides, and a name may not contain \".\": choose another name", BuiltinsName))}
	case strings.Contains(name, "."):
		return field.ErrorList{field.Invalid(path, name,
			"a variable name may not contain \".\" (a dot selects a field inside a variable's value): choose a name without dots")}
	}
	return nil
}

// checkMetadata checks labels and annotations as metadata's are checked.
func checkMetadata(labels, annotations map[string]string, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(labels, path.Child("labels"))
	return append(errs, apivalidation.ValidateAnnotations(annotations, path.Child("annotations"))...)
}

// checkXMetadata checks the x-metadata of a schema and of the schemas of
// its fields, items and map values.
func checkXMetadata(s *clusterv1.JSONSchemaProps, path *field.Path) field.ErrorList {
	errs := checkMetadata(s.XMetadata.Labels, s.XMetadata.Annotations, path.Child("x-metadata"))
	for _, name := range sortedKeys(s.Properties) {
		p := s.Properties[name]
		errs = append(errs, checkXMetadata(&p, path.Child("properties").Key(name))...)
	}
	if s.AdditionalProperties != nil {
		errs = append(errs, checkXMetadata(s.AdditionalProperties, path.Child("additionalProperties"))...)
	}
	if s.Items != nil {
		errs = append(errs, checkXMetadata(s.Items, path.Child("items"))...)
	}
	return errs
}

// checkSchema checks one variable's schema with the API server's own rules
// for a CRD field's schema: structural, defaults valid and pruned, enum and
// example values valid, CEL rules that compile within the cost limits.
func checkSchema(s *clusterv1.JSONSchemaProps, path *field.Path, name string) field.ErrorList {
	schema, errs := internalSchema(s, path)
	if len(errs) > 0 {
		return errs
	}

	// Structural checks run on the wrapped schema, where the variable's
	// schema is a field: reported paths lose the wrapper's segment again.
	ss, err := structural(schema)
	if err != nil {
		return field.ErrorList{field.Invalid(path, "", fmt.Sprintf(
			"variable %q: the schema is not a structural schema (%v): use only the OpenAPI fields Kubernetes allows in a CRD's schema", name, err))}
	}
	unwrap := unwrapper(path)
	if errs := unwrap(structuralschema.ValidateStructural(path, ss)); len(errs) > 0 {
		return named(errs, name)
	}
	defaultErrs, err := structuraldefaulting.ValidateDefaults(context.Background(), path, ss, false, true)
	if err != nil {
		return field.ErrorList{field.InternalError(path, err)}
	}
	if len(defaultErrs) > 0 {
		tidy(defaultErrs, nil)
		return named(unwrap(defaultErrs), name)
	}

	c := &schemaChecker{env: environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())}
	// Rules are compiled for the variable as a field of the wrapper, not as
	// the root of a resource: the root would gain apiVersion, kind and
	// metadata (and an array or scalar root could not be typed at all), and
	// the rules run on the wrapped value when a Cluster is checked.
	root := apiextensionsvalidation.RootCELContext(wrapped(schema))
	c.node(schema, path, root.ChildPropertyContext(schema, wrapperProperty), nil)
	if root.TotalCost != nil && root.TotalCost.Total > totalCostLimit {
		for _, expensive := range root.TotalCost.MostExpensive {
			c.errs = append(c.errs, field.Forbidden(expensive.Path,
				"this rule is among the most expensive of a schema whose rules together exceed the API server's cost limit: "+costAdvice))
		}
		c.errs = append(c.errs, field.Forbidden(path, fmt.Sprintf(
			"the estimated cost of all the schema's x-kubernetes-validations rules %s: %s",
			overBudget(root.TotalCost.Total, totalCostLimit), costAdvice)))
	}
	if len(c.errs) > 0 {
		return named(c.errs, name)
	}
	if _, _, err := validation.NewSchemaValidator(schema); err != nil {
		return field.ErrorList{field.Invalid(path, "", fmt.Sprintf("variable %q: the schema cannot be used to check values: %v", name, err))}
	}
	return nil
}

// unwrapper returns a function that rewrites paths of errors reported on
// the wrapped schema (path.properties[value]...) to the variable's own
// schema's (path...).
func unwrapper(path *field.Path) func(field.ErrorList) field.ErrorList {
	wrappedPrefix := path.Child("properties").Key(wrapperProperty).String()
	return func(errs field.ErrorList) field.ErrorList {
		for _, e := range errs {
			if rest, ok := strings.CutPrefix(e.Field, wrappedPrefix); ok {
				e.Field = path.String() + rest
			}
		}
		return errs
	}
}

// named puts the variable's name in front of each error's detail.
func named(errs field.ErrorList, name string) field.ErrorList {
	for _, e := range errs {
		e.Detail = fmt.Sprintf("variable %q: %s", name, e.Detail)
		for _, f := range structuralFixes {
			if strings.Contains(e.Detail, f.says) {
				e.Detail += ": " + f.fix
				break
			}
		}
	}
	return errs
}

// structuralFixes say how to fix what the structural schema and defaults
// checks report, whose messages say only what is wrong.
var structuralFixes = []struct{ says, fix string }{
	{"must not be empty for specified", "give it a type (object, array, string, integer, number or boolean), or x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields"},
	{"to be structural", "inside allOf, anyOf, oneOf and not only value checks are allowed: declare types, defaults, descriptions and fields in the schema itself"},
	{"must not have unknown fields", "remove from the default the fields the schema does not declare, or declare them"},
	{"must be specified", "give the array an items schema"},
}

// schemaChecker walks a schema's nodes, collecting errors.
type schemaChecker struct {
	env  *environment.EnvSet
	errs field.ErrorList
}

// validTypes are the types a variable's schema may name.
var validTypes = []string{"array", "boolean", "integer", "number", "object", "string"}

// node checks one schema node and its children. celContext is nil below
// allOf, oneOf, anyOf and not, where rules are not allowed (the structural
// check refuses them). inItems is the path of the first array items above
// the node: rules there cannot see an old value, arrays of variables being
// atomic.
func (c *schemaChecker) node(s *apiextensions.JSONSchemaProps, path *field.Path, celContext *apiextensionsvalidation.CELSchemaContext, inItems *field.Path) {
	if s.Type != "" && !slices.Contains(validTypes, s.Type) {
		c.errs = append(c.errs, field.NotSupported(path.Child("type"), s.Type, validTypes))
		return
	}
	if s.AdditionalProperties != nil && len(s.Properties) > 0 {
		c.errs = append(c.errs, field.Forbidden(path.Child("additionalProperties"),
			"a schema has either properties (an object with named fields) or additionalProperties (a map): drop one"))
	}
	c.values(s, path)

	for _, name := range sortedKeys(s.Properties) {
		p := s.Properties[name]
		c.node(&p, path.Child("properties").Key(name), celContext.ChildPropertyContext(&p, name), inItems)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		a := s.AdditionalProperties.Schema
		c.node(a, path.Child("additionalProperties"), celContext.ChildAdditionalPropertiesContext(a), inItems)
	}
	if s.Items != nil && s.Items.Schema != nil {
		if inItems == nil {
			inItems = path.Child("items")
		}
		c.node(s.Items.Schema, path.Child("items"), celContext.ChildItemsContext(s.Items.Schema), inItems)
	}
	for i := range s.AllOf {
		c.node(&s.AllOf[i], path.Child("allOf").Index(i), nil, inItems)
	}
	for i := range s.OneOf {
		c.node(&s.OneOf[i], path.Child("oneOf").Index(i), nil, inItems)
	}
	for i := range s.AnyOf {
		c.node(&s.AnyOf[i], path.Child("anyOf").Index(i), nil, inItems)
	}
	if s.Not != nil {
		c.node(s.Not, path.Child("not"), nil, inItems)
	}
	if len(s.XValidations) > 0 && celContext != nil {
		c.rules(s, path, celContext, inItems)
	}
}

// values checks the node's example and enum values against the node's
// schema (OpenAPI and its CEL rules); defaults are checked by the API
// server's defaulting check before.
func (c *schemaChecker) values(s *apiextensions.JSONSchemaProps, path *field.Path) {
	if s.Example == nil && len(s.Enum) == 0 {
		return
	}
	validator, _, err := validation.NewSchemaValidator(s)
	if err != nil {
		c.errs = append(c.errs, field.Invalid(path, "", fmt.Sprintf("the schema cannot be used to check values: %v", err)))
		return
	}
	for p, v := range sampleValues(s, path) {
		errs := validation.ValidateCustomResource(p, v, validator)
		tidy(errs, lookupUnder(p, v))
		for _, e := range errs {
			e.Detail = "the value does not match the schema: " + e.Detail
		}
		c.errs = append(c.errs, errs...)
	}
}

// sampleValues are the node's example and enum values with their paths:
// values the class author wrote, which must pass the node's own checks.
func sampleValues(s *apiextensions.JSONSchemaProps, path *field.Path) iter.Seq2[*field.Path, any] {
	return func(yield func(*field.Path, any) bool) {
		if s.Example != nil && !yield(path.Child("example"), *s.Example) {
			return
		}
		for i, e := range s.Enum {
			if !yield(path.Child("enum").Index(i), e) {
				return
			}
		}
	}
}

// rules checks the node's x-kubernetes-validations as the API server checks
// a CRD's: well-formed, compiling against the node's type, and within the
// cost limits; then the node's example and enum values against them.
func (c *schemaChecker) rules(s *apiextensions.JSONSchemaProps, path *field.Path, celContext *apiextensionsvalidation.CELSchemaContext, inItems *field.Path) {
	rulesPath := path.Child("x-kubernetes-validations")
	ss, err := structuralschema.NewStructural(s)
	if err != nil {
		c.errs = append(c.errs, field.Invalid(path, "", fmt.Sprintf("the schema is not a structural schema: %v", err)))
		return
	}
	malformed := false
	for i, r := range s.XValidations {
		errs := ruleShape(r, ss, rulesPath.Index(i))
		malformed = malformed || len(errs) > 0
		c.errs = append(c.errs, errs...)
	}
	if malformed {
		return
	}

	typeInfo, err := celContext.TypeInfo()
	if err != nil || typeInfo == nil {
		c.errs = append(c.errs, field.InternalError(rulesPath, fmt.Errorf("building the CEL type of the schema: %v", err)))
		return
	}
	results, err := cel.Compile(typeInfo.Schema, typeInfo.DeclType, celconfig.PerCallLimit, c.env, cel.NewExpressionsEnvLoader())
	if err != nil {
		c.errs = append(c.errs, field.InternalError(rulesPath, err))
		return
	}
	compiled := true
	for i, result := range results {
		rulePath := rulesPath.Index(i)
		// A rule runs once per element of every array and map above it:
		// the schema's bounds give that count, or else CEL's estimate.
		times := result.MaxCardinality
		if celContext.MaxCardinality != nil {
			times = *celContext.MaxCardinality
		}
		cost := timesCapped(result.MaxCost, times)
		if cost > ruleCostLimit {
			c.errs = append(c.errs, field.Forbidden(rulePath.Child("rule"), fmt.Sprintf(
				"the rule's estimated cost %s: %s", overBudget(cost, ruleCostLimit), costAdvice)))
		}
		if celContext.TotalCost != nil {
			celContext.TotalCost.ObserveExpressionCost(rulePath.Child("rule"), cost)
		}
		if result.Error != nil {
			compiled = false
			if result.Error.Type == apiservercel.ErrorTypeRequired {
				c.errs = append(c.errs, field.Required(rulePath.Child("rule"), result.Error.Detail))
			} else {
				c.errs = append(c.errs, field.Invalid(rulePath.Child("rule"), s.XValidations[i].Rule,
					"the rule does not compile: "+result.Error.Detail))
			}
		}
		if result.MessageExpressionError != nil {
			compiled = false
			c.errs = append(c.errs, field.Invalid(rulePath.Child("messageExpression"), s.XValidations[i].MessageExpression,
				"the message expression does not compile: "+result.MessageExpressionError.Detail))
		} else if result.MessageExpression != nil {
			if result.MessageExpressionMaxCost > ruleCostLimit {
				c.errs = append(c.errs, field.Forbidden(rulePath.Child("messageExpression"), fmt.Sprintf(
					"the message expression's estimated cost %s: %s", overBudget(result.MessageExpressionMaxCost, ruleCostLimit), costAdvice)))
			}
			if celContext.TotalCost != nil {
				celContext.TotalCost.ObserveExpressionCost(rulePath.Child("messageExpression"), result.MessageExpressionMaxCost)
			}
		}
		if result.UsesOldSelf && inItems != nil {
			compiled = false
			c.errs = append(c.errs, field.Invalid(rulePath.Child("rule"), s.XValidations[i].Rule, fmt.Sprintf(
				"oldSelf cannot be used inside %s: an array's elements have no old value to compare with (arrays of variables are atomic); move the rule to the array or above it", inItems)))
		}
	}
	if !compiled || (s.Example == nil && len(s.Enum) == 0) {
		return
	}

	validator := cel.NewValidator(ss, false, celconfig.PerCallLimit)
	if validator == nil {
		return
	}
	for p, v := range sampleValues(s, path) {
		errs, _ := validator.Validate(context.Background(), p, ss, v, nil, celconfig.RuntimeCELCostBudget)
		for _, e := range errs {
			e.Detail = "the value does not pass the schema's rules: " + e.Detail
		}
		c.errs = append(c.errs, errs...)
	}
}

// validReasons are the reasons a rule may report a failure with.
var validReasons = []string{
	string(clusterv1.FieldValueDuplicate), string(clusterv1.FieldValueForbidden),
	string(clusterv1.FieldValueInvalid), string(clusterv1.FieldValueRequired),
}

// ruleShape checks what the API server checks of a rule before compiling
// it: a rule, a message on one line, a known reason, a fieldPath that leads
// to a field of the schema.
func ruleShape(r apiextensions.ValidationRule, ss *structuralschema.Structural, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	rule, message := strings.TrimSpace(r.Rule), strings.TrimSpace(r.Message)
	switch {
	case rule == "":
		errs = append(errs, field.Required(path.Child("rule"), "write the CEL expression the value must satisfy"))
	case r.Message != "" && message == "":
		errs = append(errs, field.Invalid(path.Child("message"), r.Message, "the message is blank: write one or leave it out"))
	case strings.ContainsAny(message, "\r\n"):
		errs = append(errs, field.Invalid(path.Child("message"), r.Message, "the message must be one line"))
	case strings.ContainsAny(rule, "\r\n") && message == "":
		errs = append(errs, field.Required(path.Child("message"), "a rule over several lines needs a message: add one"))
	}
	if r.MessageExpression != "" && strings.TrimSpace(r.MessageExpression) == "" {
		errs = append(errs, field.Required(path.Child("messageExpression"), "the message expression is blank: write one or leave it out"))
	}
	if r.Reason != nil && !slices.Contains(validReasons, string(*r.Reason)) {
		errs = append(errs, field.NotSupported(path.Child("reason"), *r.Reason, validReasons))
	}
	if r.FieldPath != "" {
		switch {
		case strings.TrimSpace(r.FieldPath) == "":
			errs = append(errs, field.Invalid(path.Child("fieldPath"), r.FieldPath, "the field path is blank: write one or leave it out"))
		case strings.ContainsAny(r.FieldPath, "\r\n"):
			errs = append(errs, field.Invalid(path.Child("fieldPath"), r.FieldPath, "the field path must be one line"))
		default:
			if _, _, err := cel.ValidFieldPath(r.FieldPath, ss); err != nil {
				errs = append(errs, field.Invalid(path.Child("fieldPath"), r.FieldPath, fmt.Sprintf(
					"the field path must lead to a field the schema declares, such as .spec.name or ['key'] (%v)", err)))
			}
		}
	}
	return errs
}

// timesCapped multiplies a rule's cost by the times it may run, capped at
// the largest cost (never wrapping around to a small one).
func timesCapped(cost, times uint64) uint64 {
	if cost != 0 && times > math.MaxUint64/cost {
		return math.MaxUint64
	}
	return cost * times
}

// overBudget says by how much a cost exceeds its limit.
func overBudget(cost, limit uint64) string {
	factor := float64(cost) / float64(limit)
	if factor > 100 {
		return "exceeds the API server's limit more than 100 times over"
	}
	if factor < 1.5 {
		return fmt.Sprintf("exceeds the API server's limit by %.0f%%", (factor-1)*100)
	}
	return fmt.Sprintf("exceeds the API server's limit %.1f times over", factor)
}

// sortedKeys are a map's keys in order, so that errors come out in a
// stable order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
