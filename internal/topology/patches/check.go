package patches

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// The operations a ClusterClass's jsonPatches may use.
const (
	OpAdd     = "add"
	OpReplace = "replace"
	OpRemove  = "remove"
)

// checkKind refuses a patch that is neither inline nor external, or both.
func checkKind(p clusterv1.ClusterClassPatch) error {
	switch {
	case len(p.Definitions) > 0 && p.External != nil:
		return errors.New("the patch has both definitions and external: keep one")
	case len(p.Definitions) == 0 && p.External == nil:
		return errors.New("the patch has neither definitions nor external: add definitions (inline JSON patches)")
	}
	return nil
}

// checkClassName checks a selector's class name: a name, "*" for every
// class, or a name with one "*" at its start or end for a suffix or prefix.
func checkClassName(name string) error {
	if !strings.Contains(name, "*") {
		return nil
	}
	if strings.Count(name, "*") > 1 {
		return errors.New(`a class name may hold one "*" only`)
	}
	if !strings.HasPrefix(name, "*") && !strings.HasSuffix(name, "*") {
		return errors.New(`"*" may only begin or end a class name ("*-workers", "pool-*")`)
	}
	if msgs := validation.IsQualifiedName(strings.ReplaceAll(name, "*", "a")); len(msgs) > 0 {
		return fmt.Errorf("without its \"*\" the class name is not a valid name: %s", strings.Join(msgs, "; "))
	}
	return nil
}

// checkJSONPatch checks one jsonPatch as upstream's admission does: a known
// op; a path inside spec; list elements addressed only to prepend ("0") or
// append ("-") in an add, never in a replace or remove (an index would patch
// whatever element happens to sit there); and, for add and replace, exactly
// one value source that is well formed.
func checkJSONPatch(p clusterv1.JSONPatch) error {
	if p.Op != OpAdd && p.Op != OpReplace && p.Op != OpRemove {
		return fmt.Errorf("op %q is not supported: use add, replace or remove", p.Op)
	}
	if err := checkPath(p.Op, p.Path); err != nil {
		return err
	}
	if p.Op == OpRemove {
		return nil
	}
	switch {
	case p.Value == nil && p.ValueFrom == nil:
		return fmt.Errorf("%s needs a value: set value or valueFrom", p.Op)
	case p.Value != nil && p.ValueFrom != nil:
		return errors.New("both value and valueFrom are set: keep one")
	case p.Value != nil:
		if len(p.Value.Raw) > 0 && !json.Valid(p.Value.Raw) {
			return errors.New("value is not valid JSON")
		}
		return nil
	}
	from := p.ValueFrom
	switch {
	case from.Variable == "" && from.Template == "":
		return errors.New("valueFrom is empty: set variable or template")
	case from.Variable != "" && from.Template != "":
		return errors.New("valueFrom has both variable and template: keep one")
	case from.Variable != "":
		if _, err := parseVariableRef(from.Variable); err != nil {
			return fmt.Errorf("valueFrom.variable: %w", err)
		}
	default:
		if _, err := parseTemplate(from.Template); err != nil {
			return fmt.Errorf("valueFrom.template: %w", err)
		}
	}
	return nil
}

// checkPath keeps a patch inside the template's spec, so that it cannot
// rename, move or retype the template, nor touch its metadata.
func checkPath(op, path string) error {
	if path != "/spec" && !strings.HasPrefix(path, "/spec/") {
		return fmt.Errorf("path %q is outside spec: a patch may only change fields under /spec/", path)
	}
	for _, token := range strings.Split(path, "/") {
		index, err := strconv.Atoi(token)
		if err != nil {
			continue
		}
		if op == OpAdd && index != 0 {
			return fmt.Errorf("path %q adds at list index %d: an add may only prepend (\"0\") or append (\"-\")", path, index)
		}
		if op != OpAdd {
			return fmt.Errorf("path %q addresses a list element by index: a %s may not, patch the whole list instead", path, op)
		}
	}
	return nil
}
