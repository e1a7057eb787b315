package variables

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// ValidateCluster checks a Cluster's topology variables and every override
// (controlPlane, each machineDeployment and machinePool) against the class's
// definitions: required ones present at the top level, names known, values
// valid against their schemas including x-kubernetes-validations (old, nil on
// create, gives transition rules their old values). Errors name
// spec.topology.variables[i].value... and the rule broken.
//
// Values are checked with their defaults filled (Default), as upstream's
// webhook checks them after defaulting: a required variable whose schema has
// a default may be left out, and a rule sees the defaulted fields. A worker's
// old overrides are those of the old Cluster's worker of the same name.
func ValidateCluster(defs []clusterv1.ClusterClassStatusVariable, cluster, old *clusterv1.Cluster) field.ErrorList {
	if cluster == nil || !cluster.Spec.Topology.IsDefined() {
		return nil
	}
	topology := &cluster.Spec.Topology
	path := field.NewPath("spec", "topology")
	index, errs := definitionIndex(defs, path.Child("classRef"))
	if len(errs) > 0 {
		return errs
	}

	var oldTopology clusterv1.Topology
	if old != nil {
		oldTopology = old.Spec.Topology
	}

	errs = append(errs, requiredPresent(index, topology.Variables, path.Child("variables"))...)
	errs = append(errs, validateList(index, topology.Variables, oldTopology.Variables, path.Child("variables"))...)
	errs = append(errs, validateList(index, topology.ControlPlane.Variables.Overrides,
		oldTopology.ControlPlane.Variables.Overrides, path.Child("controlPlane", "variables", "overrides"))...)

	errs = append(errs, validateWorkers(index, topology.Workers.MachineDeployments, oldTopology.Workers.MachineDeployments,
		func(md clusterv1.MachineDeploymentTopology) (string, []clusterv1.ClusterVariable) {
			return md.Name, md.Variables.Overrides
		}, path.Child("workers", "machineDeployments"))...)
	errs = append(errs, validateWorkers(index, topology.Workers.MachinePools, oldTopology.Workers.MachinePools,
		func(mp clusterv1.MachinePoolTopology) (string, []clusterv1.ClusterVariable) {
			return mp.Name, mp.Variables.Overrides
		}, path.Child("workers", "machinePools"))...)
	return errs
}

// validateWorkers checks the overrides of each worker topology; the old
// overrides a transition rule sees are those of the old worker of the same
// name.
func validateWorkers[W any](index map[string]*definition, workers, oldWorkers []W, overrides func(W) (string, []clusterv1.ClusterVariable), path *field.Path) field.ErrorList {
	old := make(map[string][]clusterv1.ClusterVariable, len(oldWorkers))
	for _, w := range oldWorkers {
		name, list := overrides(w)
		old[name] = list
	}
	var errs field.ErrorList
	for i, w := range workers {
		name, list := overrides(w)
		errs = append(errs, validateList(index, list, old[name], path.Index(i).Child("variables", "overrides"))...)
	}
	return errs
}

// requiredPresent reports each required variable the list leaves out and
// whose schema gives no default to fill it with.
func requiredPresent(index map[string]*definition, values []clusterv1.ClusterVariable, path *field.Path) field.ErrorList {
	var missing []string
	for name, def := range index {
		if !def.required || def.schema.Default != nil || slices.ContainsFunc(values, func(v clusterv1.ClusterVariable) bool { return v.Name == name }) {
			continue
		}
		missing = append(missing, name)
	}
	slices.Sort(missing)
	errs := make(field.ErrorList, 0, len(missing))
	for _, name := range missing {
		errs = append(errs, field.Required(path, fmt.Sprintf(
			"the ClusterClass requires variable %q: add {name: %s, value: ...} to spec.topology.variables", name, name)))
	}
	return errs
}

// validateList checks one list of values (the Cluster's or an override
// list) against the definitions.
func validateList(index map[string]*definition, values, oldValues []clusterv1.ClusterVariable, path *field.Path) field.ErrorList {
	if errs := duplicateNames(values, path); len(errs) > 0 {
		return errs
	}
	var errs field.ErrorList
	for i, v := range values {
		def, ok := index[v.Name]
		if !ok {
			errs = append(errs, unknownName(path.Index(i), v.Name, index))
			continue
		}
		var old *apiextensionsv1.JSON
		for _, o := range oldValues {
			if o.Name == v.Name {
				old = &o.Value
			}
		}
		errs = append(errs, validateValue(def, v.Value, old, path.Index(i))...)
	}
	return errs
}

// validateValue checks one value, defaults filled, against its definition
// the way the API server checks a custom resource's field: OpenAPI first,
// then fields the schema does not declare, then the CEL rules. old (nil on
// create or when the variable was not set) is what transition rules see.
func validateValue(def *definition, raw apiextensionsv1.JSON, old *apiextensionsv1.JSON, path *field.Path) field.ErrorList {
	if err := def.buildCheckers(); err != nil {
		return field.ErrorList{brokenDefinition(path, def.name, err)}
	}
	defaulted, ferr := defaultValue(def, &raw, path)
	if ferr != nil {
		return field.ErrorList{ferr}
	}
	value, err := decodeValue(defaulted)
	if err != nil {
		return field.ErrorList{field.InternalError(path.Child("value"), err)}
	}

	valuePath := path.Child(wrapperProperty)
	if errs := validation.ValidateCustomResource(valuePath, value, def.openAPI); len(errs) > 0 {
		tidy(errs, lookupUnder(valuePath, value))
		return explain(errs, def.name)
	}
	wrappedValue := map[string]any{wrapperProperty: value}
	if errs := undeclaredFields(def.structural, wrappedValue, path, def.name); len(errs) > 0 {
		return errs
	}
	if def.cel == nil {
		return nil // no x-kubernetes-validations anywhere in the schema
	}
	var wrappedOld map[string]any
	if old != nil {
		if oldDefaulted, ferr := defaultValue(def, old, path); ferr == nil {
			if oldValue, err := decodeValue(oldDefaulted); err == nil {
				wrappedOld = map[string]any{wrapperProperty: oldValue}
			}
		}
	}
	// The same budget the API server gives one custom resource's rules.
	errs, _ := def.cel.Validate(context.Background(), path, def.structural, wrappedValue, wrappedOld, celconfig.RuntimeCELCostBudget)
	return explain(errs, def.name)
}

// undeclaredFields refuses fields of an object value that its schema
// neither declares nor keeps with x-kubernetes-preserve-unknown-fields: the
// API server would drop them silently from a CRD; a variable's value is not
// pruned, so they are an error the user must see.
func undeclaredFields(ss *structuralschema.Structural, wrappedValue map[string]any, path *field.Path, name string) field.ErrorList {
	// Pruning changes what it is given: it gets a copy.
	probe := map[string]any{wrapperProperty: runtime.DeepCopyJSONValue(wrappedValue[wrapperProperty])}
	unknown := structuralpruning.PruneWithOptions(probe, ss, false, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	var errs field.ErrorList
	for _, p := range unknown {
		errs = append(errs, field.Invalid(path.Child(p), "", fmt.Sprintf(
			"variable %q: the variable's schema declares no such field: remove it, or declare it in the ClusterClass's schema", name)))
	}
	return errs
}

// explain names the variable in each error and says what a bare
// "Required value" means.
func explain(errs field.ErrorList, name string) field.ErrorList {
	for _, e := range errs {
		if e.Type == field.ErrorTypeRequired && e.Detail == "" {
			e.Detail = fmt.Sprintf("variable %q: the variable's schema requires this field: set it", name)
			continue
		}
		e.Detail = fmt.Sprintf("variable %q: %s", name, e.Detail)
	}
	return errs
}

// tidy mends what the OpenAPI library reports: it names an array element
// "[1]", which joins the path as "value.[1]"; it repeats the field's name as
// "<field> in body" in the detail, though the path names it; and it gives a
// value of the wrong type by its type's name ("integer"), which reads as if
// the user had written that word; it starts combinator errors with the
// field's name in quotes. lookup, if not nil, finds the value at an
// error's path, shown as the bad value instead; counts (too many, too long)
// keep the number the library reports.
func tidy(errs field.ErrorList, lookup func(path string) (any, bool)) {
	for _, e := range errs {
		e.Field = strings.ReplaceAll(e.Field, ".[", "[")
		if _, after, found := strings.Cut(e.Detail, " in body "); found {
			e.Detail = after
		}
		e.Detail = quotedName.ReplaceAllString(e.Detail, "")
		if e.Type != field.ErrorTypeInvalid && e.Type != field.ErrorTypeTypeInvalid && e.Type != field.ErrorTypeNotSupported {
			continue
		}
		var found any
		ok := false
		if lookup != nil {
			found, ok = lookup(e.Field)
		}
		if reported, isString := e.BadValue.(string); isString && e.Type == field.ErrorTypeTypeInvalid {
			if d, cut := strings.CutSuffix(e.Detail, fmt.Sprintf(": %q", reported)); cut {
				e.Detail = d
				if jsonTypes[reported] {
					e.Detail = fmt.Sprintf("%s, not %s", d, reported)
				}
			}
			if !ok {
				e.BadValue = field.OmitValueType{}
			}
		}
		if ok {
			e.BadValue = found
		}
	}
}

// lookupUnder finds values under the path where value sits.
func lookupUnder(valuePath *field.Path, value any) func(string) (any, bool) {
	prefix := valuePath.String()
	return func(path string) (any, bool) {
		rel, ok := strings.CutPrefix(path, prefix)
		if !ok {
			return nil, false
		}
		return valueAt(value, rel)
	}
}

// quotedName is how the OpenAPI library starts the detail of allOf, anyOf,
// oneOf and not errors: the field's name in quotes ("" for the value
// itself).
var quotedName = regexp.MustCompile(`^"[^"]*" `)

// jsonTypes are the names the OpenAPI library reports a value's type by.
var jsonTypes = map[string]bool{"string": true, "integer": true, "number": true, "boolean": true, "object": true, "array": true, "null": true}

// valueAt walks a decoded JSON value along a path relative to it
// (".a.b[2].c", "" for the value itself); ok is false when the path does not
// lead anywhere, for example a key with a dot in it.
func valueAt(v any, rel string) (any, bool) {
	for rel != "" {
		switch {
		case rel[0] == '.':
			end := strings.IndexAny(rel[1:], ".[")
			if end < 0 {
				end = len(rel) - 1
			}
			obj, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = obj[rel[1:end+1]]; !ok {
				return nil, false
			}
			rel = rel[end+1:]
		case rel[0] == '[':
			end := strings.IndexByte(rel, ']')
			if end < 0 {
				return nil, false
			}
			key := rel[1:end]
			switch c := v.(type) {
			case []any:
				i, err := strconv.Atoi(key)
				if err != nil || i < 0 || i >= len(c) {
					return nil, false
				}
				v = c[i]
			case map[string]any:
				var ok bool
				if v, ok = c[key]; !ok {
					return nil, false
				}
			default:
				return nil, false
			}
			rel = rel[end+1:]
		default:
			return nil, false
		}
	}
	return v, true
}
