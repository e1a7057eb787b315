package templates

import (
	"embed"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

//go:embed local/*.yaml
var builtin embed.FS

// Local returns the local provider's template for a flavor ("" is the
// default flavor).
func Local(flavor string) (string, error) {
	if flavor == "" {
		flavor = "default"
	}
	b, err := builtin.ReadFile("local/" + flavor + ".yaml")
	if err != nil {
		return "", fmt.Errorf("the local provider has no flavor %q", flavor)
	}
	return string(b), nil
}

// A reference is ${NAME} or ${NAME:=default}; NAME is letters, digits and
// underscores, not starting with a digit.
var reference = regexp.MustCompile(`\$\{([^}]*)\}`)

var validName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MissingVariablesError names every variable a template needs and was not
// given.
type MissingVariablesError struct{ Names []string }

func (e *MissingVariablesError) Error() string {
	return "value for variables [" + strings.Join(e.Names, ", ") + "] is not set; set them in the environment or the configuration file"
}

// Variables lists the variables a template references, sorted, with their
// defaults ("" when none).
func Variables(tmpl string) (map[string]string, error) {
	vars := map[string]string{}
	for _, m := range reference.FindAllStringSubmatch(tmpl, -1) {
		name, def, _, err := parseReference(m[1])
		if err != nil {
			return nil, err
		}
		if _, seen := vars[name]; !seen || def != "" {
			vars[name] = def
		}
	}
	return vars, nil
}

func parseReference(body string) (name, def string, hasDefault bool, err error) {
	name, def, hasDefault = strings.Cut(body, ":=")
	if !validName.MatchString(name) {
		return "", "", false, fmt.Errorf("malformed variable reference ${%s}: a name is letters, digits and underscores, optionally followed by :=default", body)
	}
	return name, def, hasDefault, nil
}

// Render replaces every reference with its value from lookup, or its
// default. It fails, naming them all, when variables have neither.
func Render(tmpl string, lookup func(string) (string, bool)) (string, error) {
	var missing []string
	var firstErr error
	out := reference.ReplaceAllStringFunc(tmpl, func(ref string) string {
		name, def, hasDefault, err := parseReference(ref[2 : len(ref)-1])
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return ref
		}
		if v, ok := lookup(name); ok {
			return v
		}
		if hasDefault {
			return def
		}
		if !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return ref
	})
	if firstErr != nil {
		return "", firstErr
	}
	if strings.Contains(stripReferences(tmpl), "${") {
		return "", fmt.Errorf("malformed variable reference: %q has no closing brace", unclosed(tmpl))
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", &MissingVariablesError{Names: missing}
	}
	return out, nil
}

func stripReferences(s string) string { return reference.ReplaceAllString(s, "") }

func unclosed(s string) string {
	rest := stripReferences(s)
	i := strings.Index(rest, "${")
	end := min(len(rest), i+30)
	if j := strings.IndexByte(rest[i:], '\n'); j >= 0 && i+j < end {
		end = i + j
	}
	return rest[i:end]
}
