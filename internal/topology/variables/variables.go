// Package variables checks a ClusterClass's variable definitions and a
// Cluster's values against them, fills defaults, and assembles what a
// template's patches see (user values, overrides and the builtin variables).
// Pure functions: no client, no I/O.
package variables

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// InlineDefinitionFrom is status.variables[].definitions[].from for the
// class's own (inline) definitions.
const InlineDefinitionFrom = "inline"

// Definitions checks the class's inline variable definitions (schemas
// structural, defaults and examples valid against them, CEL rules that
// compile) and returns them in the shape of the class's status.variables.
// The errors name spec.variables[i]... and what to fix.
func Definitions(class *clusterv1.ClusterClass) ([]clusterv1.ClusterClassStatusVariable, field.ErrorList) {
	panic("variables.Definitions: not written yet")
}

// ValidateCluster checks a Cluster's topology variables and every override
// (controlPlane, each machineDeployment and machinePool) against the class's
// definitions: required ones present at the top level, names known, values
// valid against their schemas including x-kubernetes-validations (old, nil on
// create, gives transition rules their old values). Errors name
// spec.topology.variables[i].value... and the rule broken.
func ValidateCluster(defs []clusterv1.ClusterClassStatusVariable, cluster, old *clusterv1.Cluster) field.ErrorList {
	panic("variables.ValidateCluster: not written yet")
}

// Default returns values with the definitions' defaults applied: a missing
// top-level variable whose schema has a default is added, and defaults
// inside objects are filled as the API server defaults a CRD's fields.
// values is not changed.
func Default(defs []clusterv1.ClusterClassStatusVariable, values []clusterv1.ClusterVariable, path *field.Path) ([]clusterv1.ClusterVariable, field.ErrorList) {
	panic("variables.Default: not written yet")
}

// Values is what a template's patches see: the Cluster's values, replaced
// by overrides of the same name, and "builtin" holding builtins.
func Values(values, overrides []clusterv1.ClusterVariable, builtins Builtins) (map[string]apiextensionsv1.JSON, error) {
	panic("variables.Values: not written yet")
}
