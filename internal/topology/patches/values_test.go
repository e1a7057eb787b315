package patches

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"capstan.dev/capstan/internal/topology"
)

// The variables the value tests read: user variables of every JSON type and
// the builtin ones, as the variables package assembles them.
const valueVariables = `
name: web
replicas: 3
ratio: 1.50
enabled: true
nothing: null
network:
  cidr: 10.0.0.0/16
  zones: [a, b, c]
  pools:
  - {name: small, sizes: [1, 2]}
  - {name: large, sizes: [8, 16]}
matrix: [[1, 2], [3, 4]]
builtin:
  cluster: {name: prod, namespace: team-a, topology: {version: v1.31.2+build.1, class: quick-start}}
  controlPlane: {version: v1.31.2+build.1, replicas: 3}
`

func TestApplyValueSources(t *testing.T) {
	cases := []struct {
		name      string
		jsonPatch string
		want      string // the JSON of spec.template.spec.value after Apply
	}{
		{"literal string", `{op: add, path: /spec/template/spec/value, value: text}`, `"text"`},
		{"literal object", `{op: add, path: /spec/template/spec/value, value: {a: [1, {b: c}]}}`, `{"a":[1,{"b":"c"}]}`},
		{"variable: a string", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: name}}`, `"web"`},
		{"variable: an integer", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: replicas}}`, `3`},
		{"variable: a number", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: ratio}}`, `1.5`},
		{"variable: a boolean", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: enabled}}`, `true`},
		{"variable: null", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: nothing}}`, `null`},
		{"variable: a whole object", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: "network.pools[1]"}}`, `{"name":"large","sizes":[8,16]}`},
		{"variable: a field of an object", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: network.cidr}}`, `"10.0.0.0/16"`},
		{"variable: a list", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: network.zones}}`, `["a","b","c"]`},
		{"variable: an element of a list", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: "network.zones[2]"}}`, `"c"`},
		{"variable: a field of a list's element", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: "network.pools[0].name"}}`, `"small"`},
		{"variable: an element of a list in a list's element", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: "network.pools[1].sizes[1]"}}`, `16`},
		{"variable: an element of a top-level list", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: "matrix[1]"}}`, `[3,4]`},
		{"variable: builtin", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: builtin.cluster.name}}`, `"prod"`},
		{"variable: builtin object", `{op: add, path: /spec/template/spec/value, valueFrom: {variable: builtin.controlPlane}}`, `{"replicas":3,"version":"v1.31.2+build.1"}`},
		{"template: a string", `{op: add, path: /spec/template/spec/value, valueFrom: {template: "{{ .builtin.cluster.name }}-{{ .name }}"}}`, `"prod-web"`},
		{"template: a number stays a number", `{op: add, path: /spec/template/spec/value, valueFrom: {template: "{{ .replicas }}"}}`, `3`},
		{"template: quoted, a number is a string", `{op: add, path: /spec/template/spec/value, valueFrom: {template: "'{{ .replicas }}'"}}`, `"3"`},
		{"template: YAML becomes an object", `{op: add, path: /spec/template/spec/value, valueFrom: {template: "local:\n  imageTag: {{ .name }}\n"}}`, `{"local":{"imageTag":"web"}}`},
		{"template: a YAML list", `{op: add, path: /spec/template/spec/value, valueFrom: {template: "{{ range .network.zones }}- zone-{{ . }}\n{{ end }}"}}`, `["zone-a","zone-b","zone-c"]`},
		{"template: sprig replace over a builtin", `{op: add, path: /spec/template/spec/value, valueFrom: {template: "image:{{ .builtin.controlPlane.version | replace \"+\" \"_\" }}"}}`, `"image:v1.31.2_build.1"`},
		{"template: sprig semverCompare", `{op: add, path: /spec/template/spec/value, valueFrom: {template: "{{ semverCompare \">= v1.31.0-0\" .builtin.controlPlane.version }}"}}`, `true`},
		{"template: sprig upper, default and toJson", `{op: add, path: /spec/template/spec/value, valueFrom: {template: "{a: {{ upper .name }}, b: {{ .unset | default \"fallback\" }}, c: {{ .network.zones | toJson }}}"}}`, `{"a":"WEB","b":"fallback","c":["a","b","c"]}`},
		{"template: a missing variable renders as upstream does", `{op: add, path: /spec/template/spec/value, valueFrom: {template: "{{ .unset }}"}}`, `"\u003cno value\u003e"`},
		{"template: empty renders null", `{op: add, path: /spec/template/spec/value, valueFrom: {template: "{{ if false }}x{{ end }}"}}`, `null`},
		{"replace takes its value the same way", `{op: replace, path: /spec/template/spec/old, valueFrom: {variable: "network.zones[0]"}}`, ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tpl := newTemplate(t, topology.ControlPlane, "", kcpAPIVersion, kcpKind, "cp", `{template: {spec: {old: x}}}`, valueVariables)
			patches := patchesOf(t, `
- name: value
  definitions:
  - selector: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - `+tc.jsonPatch)
			if err := Apply(patches, []*topology.Template{tpl}); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if tc.want == "" {
				if got := asJSON(t, fieldOf(t, tpl, "spec", "template", "spec", "old")); got != `"a"` {
					t.Errorf("old = %s, want \"a\"", got)
				}
				return
			}
			if got := asJSON(t, fieldOf(t, tpl, "spec", "template", "spec", "value")); got != tc.want {
				t.Errorf("value = %s, want %s", got, tc.want)
			}
		})
	}
}

// A value read from a variable keeps its number as written; the object
// read back holds integers as int64, as one decoded from the API server does.
func TestApplyKeepsNumbersAsTheAPIServerDecodesThem(t *testing.T) {
	tpl := controlPlaneTemplate(t, valueVariables)
	patches := patchesOf(t, `
- name: numbers
  definitions:
  - selector: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, matchResources: {controlPlane: true}}
    jsonPatches:
    - {op: add, path: /spec/template/spec/replicas, valueFrom: {variable: replicas}}
    - {op: add, path: /spec/template/spec/ratio, valueFrom: {variable: ratio}}`)
	if err := Apply(patches, []*topology.Template{tpl}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got, ok := fieldOf(t, tpl, "spec", "template", "spec", "replicas").(int64); !ok || got != 3 {
		t.Errorf("replicas = %#v, want int64 3", fieldOf(t, tpl, "spec", "template", "spec", "replicas"))
	}
	if got, ok := fieldOf(t, tpl, "spec", "template", "spec", "ratio").(float64); !ok || got != 1.5 {
		t.Errorf("ratio = %#v, want float64 1.5", fieldOf(t, tpl, "spec", "template", "spec", "ratio"))
	}
}

func TestVariableName(t *testing.T) {
	for ref, want := range map[string]string{
		"name":                  "name",
		"network.pools[0].name": "network",
		"matrix[1]":             "matrix",
		"builtin.cluster.name":  "builtin",
	} {
		if got, err := VariableName(ref); err != nil || got != want {
			t.Errorf("VariableName(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	for _, bad := range []string{"", ".name", "name.", "a..b", "a[x]", "a[-1]", "a[0]x", "a[0][1]", "[0]", "a]", "a[0"} {
		if _, err := VariableName(bad); err == nil {
			t.Errorf("VariableName(%q) accepted a malformed reference", bad)
		}
	}
}

// A sub-path into a variable gives the number as the variable holds it,
// digits included: decoding it as a float64 would round large integers.
func TestLookupKeepsNumbersAsWritten(t *testing.T) {
	vars := map[string]apiextensionsv1.JSON{"n": {Raw: []byte(`{"ratio": 1.50, "big": 12345678901234567890, "list": [0.10]}`)}}
	for ref, want := range map[string]string{"n.ratio": "1.50", "n.big": "12345678901234567890", "n.list[0]": "0.10"} {
		got, err := lookup(vars, ref)
		if err != nil || string(got) != want {
			t.Errorf("lookup(%q) = %s, %v; want %s", ref, got, err, want)
		}
	}
}
