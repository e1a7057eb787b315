package variables

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// Values is what a template's patches see: the Cluster's values, replaced
// by overrides of the same name, and "builtin" holding builtins. The map
// shares no bytes with values and overrides.
//
// Values assumes Default and ValidateCluster have run; it refuses only what
// would make the map ambiguous: a name set twice in one list, or a user
// variable named "builtin".
func Values(values, overrides []clusterv1.ClusterVariable, builtins Builtins) (map[string]apiextensionsv1.JSON, error) {
	out := make(map[string]apiextensionsv1.JSON, len(values)+1)
	if err := putValues(out, values, "spec.topology.variables"); err != nil {
		return nil, err
	}
	if err := putValues(out, overrides, "the overrides"); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(builtins)
	if err != nil {
		return nil, fmt.Errorf("encoding the builtin variables: %w", err)
	}
	out[BuiltinsName] = apiextensionsv1.JSON{Raw: raw}
	return out, nil
}

// putValues copies list into out, replacing what an earlier list put there
// (an override replaces the Cluster's value); a name twice in list is an
// error.
func putValues(out map[string]apiextensionsv1.JSON, list []clusterv1.ClusterVariable, where string) error {
	seen := make(map[string]bool, len(list))
	for _, v := range list {
		if v.Name == BuiltinsName {
			return fmt.Errorf("%s set variable %q, the name reserved for the builtin variables: rename the variable", where, BuiltinsName)
		}
		if seen[v.Name] {
			return fmt.Errorf("%s set variable %q twice: set it once", where, v.Name)
		}
		seen[v.Name] = true
		out[v.Name] = apiextensionsv1.JSON{Raw: append([]byte(nil), v.Value.Raw...)}
	}
	return nil
}
