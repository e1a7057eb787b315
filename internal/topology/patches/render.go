package patches

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// functions is the function library of enabledIf and valueFrom.template:
// sprig's hermetic set, as upstream uses, so that a template renders the
// same everywhere (no clock, no randomness, no environment).
var functions = sprig.HermeticTxtFuncMap()

// parsed remembers the class templates already parsed: adding the function
// library to a new template costs more than the rest of a patch, and the
// same class is applied on every reconcile of each of its Clusters. A
// parsed template is safe to execute concurrently. The memory is emptied
// when it is full, so that edited classes do not pile up in a long-running
// manager.
var parsed = struct {
	sync.Mutex
	templates map[string]*template.Template
}{templates: map[string]*template.Template{}}

// parsedLimit bounds the memory of parsed templates.
const parsedLimit = 1024

// parseTemplate parses a Go template of the class (enabledIf or
// valueFrom.template) with the function library.
func parseTemplate(text string) (*template.Template, error) {
	parsed.Lock()
	tpl, ok := parsed.templates[text]
	parsed.Unlock()
	if ok {
		return tpl, nil
	}
	tpl, err := template.New("").Funcs(functions).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("the Go template does not parse: %w", err)
	}
	parsed.Lock()
	if len(parsed.templates) >= parsedLimit {
		clear(parsed.templates)
	}
	parsed.templates[text] = tpl
	parsed.Unlock()
	return tpl, nil
}

// templateData turns a template's variables into plain Go values, so that a
// Go template can walk into them: {{ .builtin.cluster.name }}, {{ .net.cidr }}.
// Numbers become float64, as they do upstream.
func templateData(variables map[string]apiextensionsv1.JSON) (map[string]any, error) {
	data := make(map[string]any, len(variables))
	for name, value := range variables {
		if len(value.Raw) == 0 {
			data[name] = nil
			continue
		}
		var v any
		if err := json.Unmarshal(value.Raw, &v); err != nil {
			return nil, fmt.Errorf("variable %q does not hold JSON: %w", name, err)
		}
		data[name] = v
	}
	return data, nil
}

// render executes a parsed template over data and reads the text it
// produced as YAML (JSON being YAML too), returning the value as JSON.
func render(tpl *template.Template, data map[string]any) ([]byte, error) {
	var out bytes.Buffer
	if err := tpl.Execute(&out, data); err != nil {
		return nil, fmt.Errorf("the Go template fails: %w", err)
	}
	value, err := yaml.YAMLToJSON(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("the Go template renders %q, which is not YAML or JSON: %w", out.String(), err)
	}
	return value, nil
}

// enabled reports whether a patch's enabledIf renders the value true. The
// text is read as YAML 1.1, as upstream reads it, so "true", " true\n",
// "True", "yes" and "on" enable the patch; anything else, "" and a missing
// variable's "<no value>" included, disables it.
func enabled(tpl *template.Template, data map[string]any) (bool, error) {
	if tpl == nil {
		return true, nil
	}
	value, err := render(tpl, data)
	if err != nil {
		return false, err
	}
	return bytes.Equal(bytes.TrimSpace(value), []byte("true")), nil
}
