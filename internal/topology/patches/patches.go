package patches

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/template"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/topology"
)

// Apply applies patches, in order, to the templates they select, changing
// each Template.Object in place. A patch with an external definition is not
// applied: it is reported in the error as unsupported (never skipped in
// silence). An error names the patch, the definition and the JSON patch.
//
// Apply is all or nothing: when it returns an error no template has been
// changed. The error is an *UnsupportedError for a class with external
// patches, an *Error otherwise.
func Apply(patches []clusterv1.ClusterClassPatch, templates []*topology.Template) error {
	var external []string
	for _, p := range patches {
		if p.External != nil {
			external = append(external, p.Name)
		}
	}
	if len(external) > 0 {
		return &UnsupportedError{Patches: external}
	}

	compiled, err := compile(patches)
	if err != nil {
		return err
	}

	docs := make([]*document, len(templates))
	for pi := range compiled {
		for ti, t := range templates {
			if docs[ti] == nil {
				docs[ti] = &document{template: t}
			}
			if err := compiled[pi].applyTo(docs[ti]); err != nil {
				return err
			}
		}
	}
	return commit(docs)
}

// compiled is a class patch checked and with its Go templates parsed once,
// for every template it applies to.
type compiled struct {
	index     int
	patch     *clusterv1.ClusterClassPatch
	enabledIf *template.Template
	// values[j][k] is the parsed valueFrom.template of definitions[j].jsonPatches[k], if any.
	values [][]*template.Template
}

// compile checks every patch before any is applied, so that a class with a
// broken patch is refused whatever templates its selectors happen to match.
func compile(patches []clusterv1.ClusterClassPatch) ([]compiled, error) {
	out := make([]compiled, len(patches))
	for i := range patches {
		p := &patches[i]
		c := compiled{index: i, patch: p, values: make([][]*template.Template, len(p.Definitions))}
		fail := func(definition, jsonPatch int, err error) error {
			return &Error{Patch: p.Name, PatchIndex: i, Definition: definition, JSONPatch: jsonPatch, Err: err}
		}
		if err := checkKind(*p); err != nil {
			return nil, fail(-1, -1, err)
		}
		if p.EnabledIf != "" {
			tpl, err := parseTemplate(p.EnabledIf)
			if err != nil {
				return nil, fail(-1, -1, fmt.Errorf("enabledIf: %w", err))
			}
			c.enabledIf = tpl
		}
		for j, d := range p.Definitions {
			for _, name := range classNames(d.Selector.MatchResources) {
				if err := checkClassName(name); err != nil {
					return nil, fail(j, -1, fmt.Errorf("selector class name %q: %w", name, err))
				}
			}
			c.values[j] = make([]*template.Template, len(d.JSONPatches))
			for k, jp := range d.JSONPatches {
				if err := checkJSONPatch(jp); err != nil {
					return nil, fail(j, k, err)
				}
				if jp.Op != OpRemove && jp.ValueFrom != nil && jp.ValueFrom.Template != "" {
					// checkJSONPatch has parsed it already: this cannot fail.
					c.values[j][k], _ = parseTemplate(jp.ValueFrom.Template)
				}
			}
		}
		out[i] = c
	}
	return out, nil
}

func classNames(m clusterv1.PatchSelectorMatch) []string {
	var names []string
	if m.MachineDeploymentClass != nil {
		names = append(names, m.MachineDeploymentClass.Names...)
	}
	if m.MachinePoolClass != nil {
		names = append(names, m.MachinePoolClass.Names...)
	}
	return names
}

// document is a template being patched: its JSON, changed by each
// operation, and its variables as a Go template sees them.
type document struct {
	template *topology.Template
	json     []byte
	data     map[string]any
	// identity is the template's before any patch, which none may change.
	identity identity
}

// prepare marshals the template and its variables the first time a patch
// selects it; templates no patch selects are never touched.
func (d *document) prepare() error {
	if d.json != nil {
		return nil
	}
	raw, err := d.template.Object.MarshalJSON()
	if err != nil {
		return fmt.Errorf("the template cannot be written as JSON: %w", err)
	}
	id, err := identityOf(raw)
	if err != nil {
		return err
	}
	data, err := templateData(d.template.Variables)
	if err != nil {
		return err
	}
	d.json, d.data, d.identity = raw, data, id
	return nil
}

// applyTo applies the patch's definitions that select the document's
// template, if enabledIf lets it.
func (c *compiled) applyTo(d *document) error {
	t := d.template
	var selecting []int
	for j, def := range c.patch.Definitions {
		if selects(def.Selector, t) {
			selecting = append(selecting, j)
		}
	}
	if len(selecting) == 0 {
		return nil
	}
	fail := func(definition, jsonPatch int, err error) error {
		return &Error{Patch: c.patch.Name, PatchIndex: c.index, Definition: definition, JSONPatch: jsonPatch, Template: describeTemplate(t), Err: err}
	}
	if err := d.prepare(); err != nil {
		return fail(-1, -1, err)
	}
	on, err := enabled(c.enabledIf, d.data)
	if err != nil {
		return fail(-1, -1, fmt.Errorf("enabledIf %q: %w", c.patch.EnabledIf, err))
	}
	if !on {
		return nil
	}
	for _, j := range selecting {
		patched, k, err := applyDefinition(c.patch.Definitions[j].JSONPatches, c.values[j], d)
		if err != nil {
			return fail(j, k, err)
		}
		d.json = patched
		after, err := identityOf(d.json)
		if err != nil {
			return fail(j, -1, err)
		}
		if after != d.identity {
			return fail(j, -1, fmt.Errorf("the patches change the template's apiVersion, kind, name or namespace (%s to %s): patch fields under /spec/ only", d.identity, after))
		}
	}
	return nil
}

// operation is one RFC 6902 operation as json-patch reads it.
type operation struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// operationOf is the RFC 6902 operation of a jsonPatch, its value computed.
func operationOf(jp clusterv1.JSONPatch, valueTemplate *template.Template, d *document) (operation, error) {
	op := operation{Op: jp.Op, Path: jp.Path}
	if jp.Op == OpRemove {
		return op, nil
	}
	value, err := valueOf(jp, valueTemplate, d)
	if err != nil {
		return op, err
	}
	op.Value = value
	return op, nil
}

// applyDefinition applies a definition's jsonPatches to the document's
// JSON, returning the new JSON. The values do not depend on the document,
// so they are all computed first and the operations applied in one pass;
// only when that fails are they replayed one by one, to name the one at fault.
func applyDefinition(jps []clusterv1.JSONPatch, valueTemplates []*template.Template, d *document) ([]byte, int, error) {
	ops := make([]operation, len(jps))
	for k, jp := range jps {
		op, err := operationOf(jp, valueTemplates[k], d)
		if err != nil {
			return nil, k, err
		}
		ops[k] = op
	}
	out, whole := applyOperations(d.json, ops)
	if whole == nil {
		return out, -1, nil
	}
	doc := d.json
	for k, jp := range jps {
		var err error
		if doc, err = applyOperations(doc, ops[k:k+1]); err != nil {
			return nil, k, explainApplyError(jp, err)
		}
	}
	return nil, -1, whole // one by one they apply: json-patch failed on the whole for another reason
}

func applyOperations(doc []byte, ops []operation) ([]byte, error) {
	encoded, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("the operations cannot be encoded: %w", err)
	}
	patch, err := jsonpatch.DecodePatch(encoded)
	if err != nil {
		return nil, fmt.Errorf("the operations cannot be decoded: %w", err)
	}
	return patch.Apply(doc)
}

// explainApplyError says what a jsonPatch that json-patch refused needs.
func explainApplyError(jp clusterv1.JSONPatch, err error) error {
	switch {
	case errors.Is(err, jsonpatch.ErrMissing) && jp.Op == OpAdd:
		return fmt.Errorf("%s %s: %w (an add creates the last field of its path only: add the fields above it first)", jp.Op, jp.Path, err)
	case errors.Is(err, jsonpatch.ErrMissing):
		return fmt.Errorf("%s %s: %w (a %s needs the field to exist: use add to set a field that may be absent)", jp.Op, jp.Path, err, jp.Op)
	default:
		return fmt.Errorf("%s %s: %w", jp.Op, jp.Path, err)
	}
}

// valueOf is the value of an add or replace: literal, from a variable or
// rendered from a template. JSON null stands for an empty literal.
func valueOf(jp clusterv1.JSONPatch, valueTemplate *template.Template, d *document) ([]byte, error) {
	switch {
	case jp.Value != nil:
		if len(jp.Value.Raw) == 0 {
			return []byte("null"), nil
		}
		return jp.Value.Raw, nil
	case jp.ValueFrom.Variable != "":
		return lookup(d.template.Variables, jp.ValueFrom.Variable)
	default:
		value, err := render(valueTemplate, d.data)
		if err != nil {
			return nil, fmt.Errorf("valueFrom.template: %w", err)
		}
		return value, nil
	}
}

// identity is what a patch may not change about a template.
type identity struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func (i identity) String() string {
	return fmt.Sprintf("%s %s %s/%s", i.APIVersion, i.Kind, i.Metadata.Namespace, i.Metadata.Name)
}

func identityOf(doc []byte) (identity, error) {
	var id identity
	if err := json.Unmarshal(doc, &id); err != nil {
		return id, fmt.Errorf("the patched template is not a JSON object: %w", err)
	}
	return id, nil
}

// commit reads back every patched template and, only once all have been
// read, replaces the objects' content: an error leaves every template as it was.
func commit(docs []*document) error {
	patched := make([]*unstructured.Unstructured, len(docs))
	for i, d := range docs {
		if d == nil || d.json == nil {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(d.json); err != nil {
			return fmt.Errorf("patched %s cannot be read back: %w", describeTemplate(d.template), err)
		}
		patched[i] = u
	}
	for i, u := range patched {
		if u != nil {
			docs[i].template.Object.Object = u.Object
		}
	}
	return nil
}

// describeTemplate names a template for an error: its kind, its name and
// its place in the topology.
func describeTemplate(t *topology.Template) string {
	var place string
	switch t.Role {
	case topology.InfrastructureCluster:
		place = "the infrastructure cluster template"
	case topology.ControlPlane:
		place = "the control plane template"
	case topology.ControlPlaneMachineInfrastructure:
		place = "the control plane's machine infrastructure template"
	case topology.MachineDeploymentBootstrap:
		place = fmt.Sprintf("the bootstrap template of machineDeployment %q (class %q)", t.Topology, t.Class)
	case topology.MachineDeploymentInfrastructure:
		place = fmt.Sprintf("the infrastructure template of machineDeployment %q (class %q)", t.Topology, t.Class)
	case topology.MachinePoolBootstrap:
		place = fmt.Sprintf("the bootstrap template of machinePool %q (class %q)", t.Topology, t.Class)
	case topology.MachinePoolInfrastructure:
		place = fmt.Sprintf("the infrastructure template of machinePool %q (class %q)", t.Topology, t.Class)
	default:
		place = fmt.Sprintf("a template of role %q", t.Role)
	}
	if t.Object == nil {
		return place
	}
	return fmt.Sprintf("%s %q, %s", t.Object.GetKind(), t.Object.GetName(), place)
}
