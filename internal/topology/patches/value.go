package patches

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// step is one dot-separated part of a variable reference: a field name and,
// written name[i], an index into the list that field holds.
type step struct {
	name  string
	index int // -1 when the step has no index
}

// parseVariableRef reads valueFrom.variable: a variable's name followed by
// fields, each of which may index a list, e.g. "workers.pools[1].zones[0]".
// Builtin variables are fields of the variable "builtin".
func parseVariableRef(ref string) ([]step, error) {
	parts := strings.Split(ref, ".")
	steps := make([]step, 0, len(parts))
	for _, part := range parts {
		s, err := parseStep(part)
		if err != nil {
			return nil, fmt.Errorf("variable reference %q: %w (write name.field.list[0].field)", ref, err)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

func parseStep(part string) (step, error) {
	open := strings.IndexByte(part, '[')
	if open < 0 {
		if part == "" {
			return step{}, fmt.Errorf("an empty name")
		}
		if strings.ContainsRune(part, ']') {
			return step{}, fmt.Errorf("%q has a ']' without '['", part)
		}
		return step{name: part, index: -1}, nil
	}
	name, rest := part[:open], part[open+1:]
	if name == "" {
		return step{}, fmt.Errorf("%q has an index without a name", part)
	}
	digits, ok := strings.CutSuffix(rest, "]")
	if !ok || strings.ContainsAny(digits, "[]") {
		return step{}, fmt.Errorf("%q is not name[index]", part)
	}
	index, err := strconv.Atoi(digits)
	if err != nil || index < 0 {
		return step{}, fmt.Errorf("%q: the index must be a number from 0", part)
	}
	return step{name: name, index: index}, nil
}

// VariableName is the variable a valueFrom.variable reference reads: its
// first field ("net" for "net.cidrs[0]", "builtin" for "builtin.cluster.name").
func VariableName(ref string) (string, error) {
	steps, err := parseVariableRef(ref)
	if err != nil {
		return "", err
	}
	return steps[0].name, nil
}

// lookup returns the JSON that a valueFrom.variable reference points at in
// a template's variables.
func lookup(variables map[string]apiextensionsv1.JSON, ref string) ([]byte, error) {
	steps, err := parseVariableRef(ref)
	if err != nil {
		return nil, err
	}
	top, ok := variables[steps[0].name]
	if !ok {
		return nil, fmt.Errorf("variable %q is not set: give the Cluster a value for it (spec.topology.variables) or the class a default", steps[0].name)
	}
	raw := top.Raw
	if len(raw) == 0 {
		raw = []byte("null")
	}
	if len(steps) == 1 && steps[0].index < 0 {
		return raw, nil
	}

	// Numbers stay json.Number so that the value comes out as it went in.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var current any
	if err := dec.Decode(&current); err != nil {
		return nil, fmt.Errorf("variable %q does not hold JSON: %w", steps[0].name, err)
	}
	walked := steps[0].name
	if current, err = index(current, steps[0], walked, ref); err != nil {
		return nil, err
	}
	for _, s := range steps[1:] {
		object, ok := current.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("variable %q: %s is %s, not an object with field %q", ref, walked, describe(current), s.name)
		}
		if current, ok = object[s.name]; !ok {
			return nil, fmt.Errorf("variable %q: %s has no field %q%s", ref, walked, s.name, builtinHint(walked))
		}
		walked += "." + s.name
		if current, err = index(current, s, walked, ref); err != nil {
			return nil, err
		}
	}
	return json.Marshal(current)
}

// index applies a step's list index, if it has one, to the value of its field.
func index(value any, s step, walked, ref string) (any, error) {
	if s.index < 0 {
		return value, nil
	}
	list, ok := value.([]any)
	if !ok {
		return nil, fmt.Errorf("variable %q: %s is %s, not a list", ref, walked, describe(value))
	}
	if s.index >= len(list) {
		return nil, fmt.Errorf("variable %q: %s has %d items, no index %d", ref, walked, len(list), s.index)
	}
	return list[s.index], nil
}

func describe(value any) string {
	switch value.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// builtinHint explains, for a builtin scope that is missing, where it is set.
func builtinHint(walked string) string {
	if walked != "builtin" {
		return ""
	}
	return " (builtin.controlPlane is set in the control plane's templates only, builtin.machineDeployment and builtin.machinePool in their own templates only)"
}
