package variables

import (
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
