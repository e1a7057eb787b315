package templates

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

//go:embed local/*.yaml in-memory/*.yaml qemu/*.yaml
var builtin embed.FS

// Infrastructures lists the infrastructure providers that have built-in
// templates: "local" (machines are processes on this host), "in-memory"
// (simulated machines, for many clusters at once) and "qemu" (machines are
// virtual machines on this host).
func Infrastructures() []string {
	entries, _ := fs.ReadDir(builtin, ".")
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// Builtin returns an infrastructure provider's built-in template for a
// flavor ("" is the default flavor).
func Builtin(infrastructure, flavor string) (string, error) {
	flavors := Flavors(infrastructure)
	if len(flavors) == 0 {
		return "", fmt.Errorf("--infrastructure %q: there are built-in templates for %s only; use --from for other providers",
			infrastructure, strings.Join(Infrastructures(), ", "))
	}
	if flavor == "" {
		flavor = "default"
	}
	if !slices.Contains(flavors, flavor) {
		return "", fmt.Errorf("--flavor %q: the %s provider has no such flavor; it has %s", flavor, infrastructure, strings.Join(flavors, ", "))
	}
	b, err := builtin.ReadFile(infrastructure + "/" + flavor + ".yaml")
	return string(b), err
}

// Flavors lists an infrastructure provider's flavors; none for a provider
// without built-in templates.
func Flavors(infrastructure string) []string {
	entries, _ := fs.ReadDir(builtin, infrastructure)
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, name)
		}
	}
	return out
}

var validName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MissingVariablesError names every variable a template needs and was not
// given.
type MissingVariablesError struct{ Names []string }

func (e *MissingVariablesError) Error() string {
	return "value for variables [" + strings.Join(e.Names, ", ") + "] is not set; set them in the environment or the configuration file"
}

// reference is one ${NAME} or ${NAME:=default} of a template.
type reference struct {
	start, end int // tmpl[start:end] is the whole reference
	name, def  string
	hasDefault bool
}

// parse finds every reference of tmpl. A reference is ${NAME} or
// ${NAME:=default}; NAME is letters, digits and underscores, not starting
// with a digit; it ends at the first '}' on its line, and a default holds no
// reference of its own. Anything else after "${" is an error naming its
// line, so that a typo never leaves a reference in the output.
func parse(tmpl string) ([]reference, error) {
	var refs []reference
	pos := 0
	for {
		i := strings.Index(tmpl[pos:], "${")
		if i < 0 {
			return refs, nil
		}
		start := pos + i
		body := tmpl[start+2:]
		if nl := strings.IndexByte(body, '\n'); nl >= 0 {
			body = body[:nl]
		}
		end := strings.IndexByte(body, '}')
		if nested := strings.Index(body, "${"); nested >= 0 && (end < 0 || nested < end) {
			return nil, fmt.Errorf("line %d: malformed variable reference %q: a reference cannot hold another (defaults are plain text)", lineOf(tmpl, start), excerpt(tmpl[start:]))
		}
		if end < 0 {
			return nil, fmt.Errorf("line %d: malformed variable reference: %q has no closing brace", lineOf(tmpl, start), excerpt(tmpl[start:]))
		}
		r := reference{start: start, end: start + 2 + end + 1}
		r.name, r.def, r.hasDefault = strings.Cut(body[:end], ":=")
		if !validName.MatchString(r.name) {
			return nil, fmt.Errorf("line %d: malformed variable reference ${%s}: a name is letters, digits and underscores, not starting with a digit, optionally followed by :=default", lineOf(tmpl, start), body[:end])
		}
		refs = append(refs, r)
		pos = r.end
	}
}

func lineOf(s string, offset int) int { return strings.Count(s[:offset], "\n") + 1 }

// excerpt is the rest of a reference's line, cut short.
func excerpt(s string) string {
	if nl := strings.IndexByte(s, '\n'); nl >= 0 {
		s = s[:nl]
	}
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

// defaults are the variables' defaults: a default given at any reference
// of a variable serves all its references (the first one given wins).
func defaults(refs []reference) map[string]string {
	d := map[string]string{}
	for _, r := range refs {
		if _, seen := d[r.name]; r.hasDefault && !seen {
			d[r.name] = r.def
		}
	}
	return d
}

// Variables lists the variables a template references with their defaults
// ("" when none).
func Variables(tmpl string) (map[string]string, error) {
	refs, err := parse(tmpl)
	if err != nil {
		return nil, err
	}
	vars := defaults(refs)
	for _, r := range refs {
		if _, ok := vars[r.name]; !ok {
			vars[r.name] = ""
		}
	}
	return vars, nil
}

// Default returns the default the template gives a variable, if any.
func Default(tmpl, name string) (string, bool, error) {
	refs, err := parse(tmpl)
	if err != nil {
		return "", false, err
	}
	v, ok := defaults(refs)[name]
	return v, ok, nil
}

// Render replaces every reference with its value from lookup, or its
// default. It fails, naming them all, when variables have neither.
func Render(tmpl string, lookup func(string) (string, bool)) (string, error) {
	return RenderWithFallback(tmpl, lookup, nil)
}

// RenderWithFallback is Render with a last source of values, consulted
// after the template's own defaults: for values that suit any template but
// that a template may choose better (fallback may be nil).
func RenderWithFallback(tmpl string, lookup, fallback func(string) (string, bool)) (string, error) {
	refs, err := parse(tmpl)
	if err != nil {
		return "", err
	}
	defs := defaults(refs)
	var b strings.Builder
	var missing []string
	pos := 0
	for _, r := range refs {
		b.WriteString(tmpl[pos:r.start])
		pos = r.end
		if v, ok := lookup(r.name); ok {
			b.WriteString(v)
		} else if v, ok := defs[r.name]; ok {
			b.WriteString(v)
		} else if v, ok := callOrNot(fallback, r.name); ok {
			b.WriteString(v)
		} else if !slices.Contains(missing, r.name) {
			missing = append(missing, r.name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", &MissingVariablesError{Names: missing}
	}
	b.WriteString(tmpl[pos:])
	return b.String(), nil
}

func callOrNot(f func(string) (string, bool), name string) (string, bool) {
	if f == nil {
		return "", false
	}
	return f(name)
}
