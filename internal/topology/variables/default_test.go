package variables

import (
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestDefault(t *testing.T) {
	path := field.NewPath("spec", "topology", "variables")
	defs := func(t *testing.T) []clusterv1.ClusterClassStatusVariable {
		return []clusterv1.ClusterClassStatusVariable{
			inline("region", true, schemaOf(t, `{type: string, default: us-east-1}`)),
			inline("replicas", false, schemaOf(t, `{type: integer}`)),
			inline("network", false, schemaOf(t, `
type: object
default: {}
properties:
  cidr: {type: string, default: 10.0.0.0/16}
  proxy:
    type: object
    properties:
      url: {type: string}
      port: {type: integer, default: 3128}
`)),
			inline("disks", false, schemaOf(t, `
type: array
items:
  type: object
  properties:
    size: {type: integer, default: 20}
    name: {type: string}
`)),
			inline("labels", false, schemaOf(t, `
type: object
additionalProperties: {type: string, default: unset}
`)),
		}
	}
	tests := []struct {
		name   string
		values []clusterv1.ClusterVariable
		want   []clusterv1.ClusterVariable
		errs   []string
	}{
		{
			name: "missing variables with a top-level default are added in the class's order, nested defaults inside the added default",
			want: []clusterv1.ClusterVariable{
				value("region", `"us-east-1"`),
				value("network", `{"cidr":"10.0.0.0/16"}`),
			},
		},
		{
			name:   "a set value is kept, bytes and all, and the added ones follow it",
			values: []clusterv1.ClusterVariable{value("replicas", `3`), value("region", ` "eu-west-1" `)},
			want: []clusterv1.ClusterVariable{
				value("replicas", `3`),
				value("region", ` "eu-west-1" `),
				value("network", `{"cidr":"10.0.0.0/16"}`),
			},
		},
		{
			name: "nested defaults fill a set object without replacing what is set",
			values: []clusterv1.ClusterVariable{
				value("region", `"us-east-1"`),
				value("network", `{"proxy":{"url":"http://proxy"}}`),
			},
			want: []clusterv1.ClusterVariable{
				value("region", `"us-east-1"`),
				value("network", `{"cidr":"10.0.0.0/16","proxy":{"port":3128,"url":"http://proxy"}}`),
			},
		},
		{
			name: "defaults reach into array items and map values",
			values: []clusterv1.ClusterVariable{
				value("region", `"us-east-1"`),
				value("network", `{"cidr":"192.168.0.0/16"}`),
				value("disks", `[{"name":"root"},{"name":"data","size":100}]`),
				value("labels", `{"team":null,"app":"web"}`),
			},
			want: []clusterv1.ClusterVariable{
				value("region", `"us-east-1"`),
				value("network", `{"cidr":"192.168.0.0/16"}`),
				value("disks", `[{"name":"root","size":20},{"name":"data","size":100}]`),
				value("labels", `{"app":"web","team":"unset"}`),
			},
		},
		{
			name:   "a set empty array or object is not replaced by a top-level default",
			values: []clusterv1.ClusterVariable{value("region", `"us-east-1"`), value("network", `{}`), value("disks", `[]`)},
			want:   []clusterv1.ClusterVariable{value("region", `"us-east-1"`), value("network", `{"cidr":"10.0.0.0/16"}`), value("disks", `[]`)},
		},
		{
			name:   "null is replaced by the default, as the API server does for a non-nullable field",
			values: []clusterv1.ClusterVariable{value("region", `null`), value("network", `{"cidr":"x"}`)},
			want:   []clusterv1.ClusterVariable{value("region", `"us-east-1"`), value("network", `{"cidr":"x"}`)},
		},
		{
			name:   "an unknown variable is refused with the declared names",
			values: []clusterv1.ClusterVariable{value("region", `"a"`), value("zone", `"b"`)},
			errs:   []string{`spec.topology.variables[1].name: no variable "zone" (it declares "disks", "labels", "network", "region", "replicas")`},
		},
		{
			name:   "a variable set twice is refused",
			values: []clusterv1.ClusterVariable{value("region", `"a"`), value("replicas", `1`), value("region", `"b"`)},
			errs:   []string{`spec.topology.variables[2].name: already set at index 0`},
		},
		{
			name:   "a value that is not JSON is refused",
			values: []clusterv1.ClusterVariable{value("replicas", `{`)},
			errs:   []string{`spec.topology.variables[0].value: not valid JSON`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := clone(tt.values)
			got, errs := Default(defs(t), in, path)
			wantErrors(t, errs, tt.errs)
			if !reflect.DeepEqual(in, tt.values) {
				t.Errorf("Default changed its input: %s", show(in))
			}
			if len(tt.errs) > 0 {
				if got != nil {
					t.Errorf("Default returned values with errors: %s", show(got))
				}
				return
			}
			if show(got) != show(tt.want) {
				t.Errorf("Default:\n got %s\nwant %s", show(got), show(tt.want))
			}
			if len(in) > 0 && len(in[0].Value.Raw) > 0 && &got[0].Value.Raw[0] == &in[0].Value.Raw[0] {
				t.Error("Default's result shares bytes with its input")
			}
			again, errs := Default(defs(t), got, path)
			if len(errs) > 0 || show(again) != show(got) {
				t.Errorf("Default is not idempotent: %s then %s (%v)", show(got), show(again), errs)
			}
		})
	}
}

func TestDefaultRefusesBrokenDefinitions(t *testing.T) {
	conflict := true
	d := inline("region", false, schemaOf(t, `{type: string}`))
	d.DefinitionsConflict = &conflict
	_, errs := Default([]clusterv1.ClusterClassStatusVariable{d, {Name: "empty"}}, nil, field.NewPath("spec", "topology", "variables"))
	wantErrors(t, errs, []string{
		`spec.topology.variables: variable "region" has conflicting definitions`,
		`spec.topology.variables: no definition for variable "empty"`,
	})
}

func TestBrokenSchemaInStatus(t *testing.T) {
	// A schema Definitions refuses can only reach the status by hand: the
	// error says the class is to be fixed, for defaulting and checking.
	broken := inline("region", false, schemaOf(t, `{type: string}`))
	broken.Definitions[0].Schema.OpenAPIV3Schema.Default = &apiextensionsv1.JSON{Raw: []byte(`{`)}
	defs := []clusterv1.ClusterClassStatusVariable{broken}
	_, errs := Default(defs, nil, field.NewPath("spec", "topology", "variables"))
	wantErrors(t, errs, []string{`spec.topology.variables: Internal error: the ClusterClass's schema of variable "region" cannot be used`})
	errs = ValidateCluster(defs, topologyCluster(), nil)
	wantErrors(t, errs, []string{`spec.topology.variables[0]: Internal error: the ClusterClass's schema of variable "region" cannot be used`})
}

func TestDefaultOverrides(t *testing.T) {
	defs := []clusterv1.ClusterClassStatusVariable{
		inline("region", false, schemaOf(t, `{type: string, default: us-east-1}`)),
		inline("network", false, schemaOf(t, `
type: object
properties:
  cidr: {type: string, default: 10.0.0.0/16}
  mtu: {type: integer}
`)),
	}
	path := field.NewPath("spec", "topology", "workers", "machineDeployments").Index(0).Child("variables", "overrides")
	got, errs := DefaultOverrides(defs, []clusterv1.ClusterVariable{value("network", `{"mtu":1400}`)}, path)
	wantErrors(t, errs, nil)
	want := []clusterv1.ClusterVariable{value("network", `{"cidr":"10.0.0.0/16","mtu":1400}`)}
	if show(got) != show(want) {
		t.Errorf("DefaultOverrides added or missed something:\n got %s\nwant %s", show(got), show(want))
	}

	_, errs = DefaultOverrides(defs, []clusterv1.ClusterVariable{value("zone", `"a"`)}, path)
	wantErrors(t, errs, []string{`spec.topology.workers.machineDeployments[0].variables.overrides[0].name: no variable "zone"`})
}
