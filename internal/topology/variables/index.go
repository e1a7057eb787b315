package variables

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// definition is the one definition of a variable a Cluster's value is
// checked against. The forms the apiextensions libraries take are built
// from the schema when first needed (defaulting needs fewer than checking)
// and shared by every value of the variable in the same call.
type definition struct {
	name     string
	required bool
	schema   clusterv1.JSONSchemaProps

	prepared   bool
	structural *structuralschema.Structural // wrapped: see wrapperProperty
	internal   *apiextensions.JSONSchemaProps
	prepareErr error

	checkersBuilt bool
	openAPI       validation.SchemaValidator
	cel           *cel.Validator // nil when the schema has no rules
	checkersErr   error
}

// prepare builds what defaulting needs. An error means a schema
// Definitions would have refused: the class is to be fixed.
func (d *definition) prepare() error {
	if d.prepared {
		return d.prepareErr
	}
	d.prepared = true
	internal, errs := internalSchema(&d.schema, field.NewPath("schema", "openAPIV3Schema"))
	if len(errs) > 0 {
		d.prepareErr = errs.ToAggregate()
		return d.prepareErr
	}
	d.internal = internal
	d.structural, d.prepareErr = structural(internal)
	return d.prepareErr
}

// buildCheckers builds the OpenAPI and CEL validators checking needs, on
// top of what prepare builds; CEL rules are compiled here.
func (d *definition) buildCheckers() error {
	if err := d.prepare(); err != nil {
		return err
	}
	if d.checkersBuilt {
		return d.checkersErr
	}
	d.checkersBuilt = true
	if d.openAPI, _, d.checkersErr = validation.NewSchemaValidator(d.internal); d.checkersErr != nil {
		return d.checkersErr
	}
	d.cel = cel.NewValidator(d.structural, false, celconfig.PerCallLimit)
	return nil
}

// definitionIndex maps a variable's name to its definition. A variable
// whose definitions conflict (external patches declaring it differently) or
// that has none cannot be checked: that is an error of the class, reported
// on path with the variable's name.
func definitionIndex(defs []clusterv1.ClusterClassStatusVariable, path *field.Path) (map[string]*definition, field.ErrorList) {
	var errs field.ErrorList
	index := make(map[string]*definition, len(defs))
	for _, d := range defs {
		switch {
		case len(d.Definitions) == 0:
			errs = append(errs, field.Invalid(path, d.Name, fmt.Sprintf(
				"the ClusterClass's status.variables has no definition for variable %q: fix the class's spec.variables and wait for the ClusterClass controller to report them", d.Name)))
			continue
		case d.DefinitionsConflict != nil && *d.DefinitionsConflict:
			errs = append(errs, field.Invalid(path, d.Name, fmt.Sprintf(
				"variable %q has conflicting definitions in the ClusterClass: make its definitions agree", d.Name)))
			continue
		}
		first := d.Definitions[0]
		index[d.Name] = &definition{
			name:     d.Name,
			required: first.Required != nil && *first.Required,
			schema:   first.Schema.OpenAPIV3Schema,
		}
	}
	return index, errs
}

// duplicateNames reports every value whose name an earlier value already
// used; the path of each is its index under path.
func duplicateNames(values []clusterv1.ClusterVariable, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[string]int, len(values))
	for i, v := range values {
		if first, ok := seen[v.Name]; ok {
			err := field.Duplicate(path.Index(i).Child("name"), v.Name)
			err.Detail = fmt.Sprintf("variable %q is already set at index %d: set each variable once", v.Name, first)
			errs = append(errs, err)
			continue
		}
		seen[v.Name] = i
	}
	return errs
}

// unknownName is the error for a value no definition declares.
func unknownName(path *field.Path, name string, defs map[string]*definition) *field.Error {
	return field.Invalid(path.Child("name"), name, fmt.Sprintf(
		"the ClusterClass declares no variable %q (it declares %s): remove the value or add the variable to the class's spec.variables",
		name, declaredNames(defs)))
}

// declaredNames lists the declared variables for a message, sorted.
func declaredNames(defs map[string]*definition) string {
	if len(defs) == 0 {
		return "none"
	}
	names := make([]string, 0, len(defs))
	for name := range defs {
		names = append(names, fmt.Sprintf("%q", name))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
