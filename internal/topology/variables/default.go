package variables

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// Default returns values with the definitions' defaults applied: a missing
// top-level variable whose schema has a default is added, and defaults
// inside objects are filled as the API server defaults a CRD's fields.
// values is not changed.
//
// The order is stable (the values as given, then the added variables in the
// class's order) and a value defaulting does not change keeps its bytes, so
// that writing the result back to a Cluster is a no-op when nothing was
// missing.
func Default(defs []clusterv1.ClusterClassStatusVariable, values []clusterv1.ClusterVariable, path *field.Path) ([]clusterv1.ClusterVariable, field.ErrorList) {
	return defaultValues(defs, values, path, true)
}

// DefaultOverrides fills the defaults inside the values of overrides
// (controlPlane.variables.overrides, a worker's variables.overrides) but
// adds no variable: a variable an override list leaves out takes the
// Cluster's value, which Default has already filled.
func DefaultOverrides(defs []clusterv1.ClusterClassStatusVariable, overrides []clusterv1.ClusterVariable, path *field.Path) ([]clusterv1.ClusterVariable, field.ErrorList) {
	return defaultValues(defs, overrides, path, false)
}

func defaultValues(defs []clusterv1.ClusterClassStatusVariable, values []clusterv1.ClusterVariable, path *field.Path, addMissing bool) ([]clusterv1.ClusterVariable, field.ErrorList) {
	index, errs := definitionIndex(defs, path)
	errs = append(errs, duplicateNames(values, path)...)
	if len(errs) > 0 {
		return nil, errs
	}

	out := make([]clusterv1.ClusterVariable, 0, len(values)+len(defs))
	set := make(map[string]bool, len(values))
	for i, v := range values {
		set[v.Name] = true
		def, ok := index[v.Name]
		if !ok {
			errs = append(errs, unknownName(path.Index(i), v.Name, index))
			continue
		}
		defaulted, err := defaultValue(def, &v.Value, path.Index(i))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, clusterv1.ClusterVariable{Name: v.Name, Value: defaulted})
	}
	if addMissing {
		for _, d := range defs {
			def := index[d.Name]
			if set[d.Name] || def.schema.Default == nil {
				continue
			}
			defaulted, err := defaultValue(def, nil, path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, clusterv1.ClusterVariable{Name: d.Name, Value: defaulted})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// defaultValue applies def's defaults to value (nil: the variable is not
// set) with the API server's structural defaulting. The result never shares
// bytes with value.
func defaultValue(def *definition, value *apiextensionsv1.JSON, path *field.Path) (apiextensionsv1.JSON, *field.Error) {
	if err := def.prepare(); err != nil {
		return apiextensionsv1.JSON{}, brokenDefinition(path, def.name, err)
	}

	var current any
	var err error
	if value != nil {
		if current, err = decodeValue(*value); err != nil {
			return apiextensionsv1.JSON{}, field.Invalid(path.Child("value"), string(value.Raw),
				fmt.Sprintf("the value of variable %q is not valid JSON (%v): write it as a JSON or YAML value", def.name, err))
		}
	}
	// Defaulting writes into the value it is given: it gets a copy, so that
	// the result can be compared with what was set.
	obj := map[string]any{wrapperProperty: runtime.DeepCopyJSONValue(current)}
	structuraldefaulting.Default(obj, def.structural)
	result := obj[wrapperProperty]

	if value != nil && equality.Semantic.DeepEqual(result, current) {
		return apiextensionsv1.JSON{Raw: append([]byte(nil), value.Raw...)}, nil
	}
	raw, err := json.Marshal(result)
	if err != nil {
		return apiextensionsv1.JSON{}, field.InternalError(path.Child("value"), err)
	}
	return apiextensionsv1.JSON{Raw: raw}, nil
}

// brokenDefinition reports a definition the ClusterClass should never have
// accepted (Definitions refuses it): the fix is in the class.
func brokenDefinition(path *field.Path, name string, err error) *field.Error {
	return field.InternalError(path, fmt.Errorf(
		"the ClusterClass's schema of variable %q cannot be used (%v): fix the variable's definition in the class", name, err))
}
