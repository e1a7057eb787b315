package variables

import (
	"reflect"
	"testing"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// classVariables is a class declaring a variable for every schema feature.
func classVariables(t *testing.T) []clusterv1.ClusterClassStatusVariable {
	return []clusterv1.ClusterClassStatusVariable{
		inline("region", true, schemaOf(t, `{type: string, enum: [us-east-1, eu-west-1]}`)),
		inline("replicas", false, schemaOf(t, `{type: integer, minimum: 1, maximum: 5}`)),
		inline("ratio", false, schemaOf(t, `{type: number, minimum: 0, exclusiveMinimum: true, maximum: 1}`)),
		inline("enabled", false, schemaOf(t, `{type: boolean}`)),
		inline("name", false, schemaOf(t, `{type: string, minLength: 3, maxLength: 8, pattern: "^[a-z]+$"}`)),
		inline("id", false, schemaOf(t, `{type: string, format: uuid}`)),
		inline("port", false, schemaOf(t, `{x-kubernetes-int-or-string: true}`)),
		inline("image", false, schemaOf(t, `
type: object
required: [name]
properties:
  name: {type: string}
  registry:
    type: object
    properties:
      host: {type: string, default: registry.k8s.io}
      insecure: {type: boolean}
`)),
		inline("extra", false, schemaOf(t, `{type: object, x-kubernetes-preserve-unknown-fields: true, properties: {known: {type: string}}}`)),
		inline("labels", false, schemaOf(t, `{type: object, additionalProperties: {type: string, maxLength: 5}, maxProperties: 2}`)),
		inline("zones", false, schemaOf(t, `{type: array, items: {type: string}, minItems: 1, maxItems: 3, uniqueItems: true}`)),
		inline("tier", true, schemaOf(t, `{type: string, default: small}`)),
		inline("cidr", false, schemaOf(t, `
type: object
properties:
  pods: {type: string}
  services: {type: string}
x-kubernetes-validations:
- rule: self.pods != self.services
  message: pods and services must use different ranges
- rule: "!has(self.services) || self.services.startsWith('10.')"
  messageExpression: "'services range ' + self.services + ' is not in 10.0.0.0/8'"
  fieldPath: .services
  reason: FieldValueForbidden
`)),
		inline("mirror", false, schemaOf(t, `
type: object
properties:
  host: {type: string, default: registry.k8s.io}
x-kubernetes-validations:
- rule: self.host.endsWith('.io')
  message: the mirror must be a .io host
`)),
		inline("quantity", false, schemaOf(t, `
x-kubernetes-int-or-string: true
anyOf: [{type: integer}, {type: string}]
pattern: "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$"
`)),
		inline("endpoint", false, schemaOf(t, `
type: object
properties:
  host: {type: string}
  ip: {type: string}
  port: {type: integer}
oneOf: [{required: [host]}, {required: [ip]}]
not: {required: [port], properties: {port: {enum: [0]}}}
`)),
		inline("size", false, schemaOf(t, `
type: object
properties:
  cpu: {type: integer}
  memory: {type: integer}
allOf: [{required: [cpu]}, {required: [memory]}]
anyOf: [{properties: {cpu: {minimum: 2}}}, {properties: {memory: {minimum: 4096}}}]
`)),
		inline("flavor", false, schemaOf(t, `
type: object
properties:
  name: {type: string}
enum: [{name: small}, {name: large}]
`)),
		inline("nested", false, schemaOf(t, `
type: object
x-kubernetes-preserve-unknown-fields: true
properties:
  typed:
    type: object
    properties:
      a: {type: string}
`)),
		inline("dashes", false, schemaOf(t, `
type: object
properties:
  max-pods: {type: integer}
x-kubernetes-validations:
- rule: "!has(self.max__dash__pods) || self.max__dash__pods <= 110"
  messageExpression: "'max-pods ' + string(self.max__dash__pods) + ' is above 110'"
`)),
		inline("fallback", false, schemaOf(t, `
type: object
properties:
  list: {type: array, items: {type: string}}
x-kubernetes-validations:
- rule: "self.list.size() > 0"
  message: list at least one item
  messageExpression: "self.list[5]"
`)),
		inline("version", false, schemaOf(t, `
type: integer
x-kubernetes-validations:
- rule: self >= oldSelf
  message: version may only grow
`)),
	}
}

// topologyCluster is a Cluster of the class with region (required, no
// default) set and the given further values.
func topologyCluster(values ...clusterv1.ClusterVariable) *clusterv1.Cluster {
	c := &clusterv1.Cluster{}
	c.Spec.Topology.ClassRef.Name = "quick-start"
	c.Spec.Topology.Version = "v1.34.0"
	c.Spec.Topology.Variables = append([]clusterv1.ClusterVariable{value("region", `"us-east-1"`)}, values...)
	c.Spec.Topology.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{{Name: "md-0", Class: "default"}, {Name: "md-1", Class: "default"}}
	c.Spec.Topology.Workers.MachinePools = []clusterv1.MachinePoolTopology{{Name: "mp-0", Class: "pool"}}
	return c
}

func TestValidateCluster(t *testing.T) {
	type overrides struct{ cp, md1, mp0 []clusterv1.ClusterVariable }
	tests := []struct {
		name      string
		values    []clusterv1.ClusterVariable // besides region
		noRegion  bool
		overrides overrides
		old       *clusterv1.Cluster
		errs      []string
	}{
		{
			name: "every feature with a valid value",
			values: []clusterv1.ClusterVariable{
				value("replicas", `5`), value("ratio", `1`), value("enabled", `false`), value("name", `"abcdefgh"`),
				value("id", `"3f1c2b8e-6a4d-4c2e-9f7a-2b1d3c4e5f60"`), value("port", `8080`), value("image", `{"name":"ubuntu","registry":{"insecure":true}}`),
				value("extra", `{"known":"k","anything":{"deep":[1,2]}}`), value("labels", `{"a":"12345","b":""}`), value("zones", `["a","b","c"]`),
				value("tier", `"large"`), value("cidr", `{"pods":"192.168.0.0/16","services":"10.96.0.0/12"}`), value("mirror", `{}`), value("version", `3`),
			},
		},
		{name: "int-or-string takes a string", values: []clusterv1.ClusterVariable{value("port", `"https"`)}},
		{
			name:     "a required variable is missing",
			noRegion: true,
			errs:     []string{`spec.topology.variables: Required value: the ClusterClass requires variable "region": add {name: region, value: ...}`},
		},
		{name: "a required variable with a default may be left out (tier)", values: nil},
		{
			name:   "an unknown variable",
			values: []clusterv1.ClusterVariable{value("colour", `"red"`)},
			errs:   []string{`spec.topology.variables[1].name: Invalid value: "colour": the ClusterClass declares no variable "colour" (it declares "cidr", `},
		},
		{
			name:   "a variable set twice",
			values: []clusterv1.ClusterVariable{value("replicas", `1`), value("region", `"eu-west-1"`)},
			errs:   []string{`spec.topology.variables[2].name: Duplicate value: "region": variable "region" is already set at index 0`},
		},
		{name: "enum refused", noRegion: true, values: []clusterv1.ClusterVariable{value("region", `"mars"`)},
			errs: []string{`spec.topology.variables[0].value: Unsupported value: "mars": variable "region": supported values: "us-east-1", "eu-west-1"`}},
		{name: "type refused", values: []clusterv1.ClusterVariable{value("enabled", `"yes"`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: "yes": variable "enabled": must be of type boolean, not string`}},
		{name: "null is not a string", noRegion: true, values: []clusterv1.ClusterVariable{value("region", `null`)},
			errs: []string{
				`spec.topology.variables[0].value: Invalid value: null: variable "region": must be of type string, not null`,
				`spec.topology.variables[0].value: Unsupported value: null: variable "region": supported values: "us-east-1", "eu-west-1"`,
			}},
		{name: "maximum refused", values: []clusterv1.ClusterVariable{value("replicas", `6`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: 6: variable "replicas": should be less than or equal to 5`}},
		{name: "minimum refused", values: []clusterv1.ClusterVariable{value("replicas", `0`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: 0: variable "replicas": should be greater than or equal to 1`}},
		{name: "exclusive minimum refused", values: []clusterv1.ClusterVariable{value("ratio", `0`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: 0: variable "ratio": should be greater than 0`}},
		{name: "a fraction is not an integer", values: []clusterv1.ClusterVariable{value("replicas", `2.5`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: 2.5: variable "replicas": must be of type integer, not number`}},
		{name: "minLength refused", values: []clusterv1.ClusterVariable{value("name", `"ab"`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: "ab": variable "name": should be at least 3 chars long`}},
		{name: "maxLength refused", values: []clusterv1.ClusterVariable{value("name", `"abcdefghi"`)},
			errs: []string{`spec.topology.variables[1].value: Too long: variable "name": may not be more than 8 bytes`}},
		{name: "pattern refused", values: []clusterv1.ClusterVariable{value("name", `"abc1"`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: "abc1": variable "name": should match '^[a-z]+$'`}},
		{name: "format refused", values: []clusterv1.ClusterVariable{value("id", `"not-a-uuid"`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: "not-a-uuid": variable "id": must be of type uuid`}},
		{name: "int-or-string refuses a boolean", values: []clusterv1.ClusterVariable{value("port", `true`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: true: variable "port": must be of type integer,string, not boolean`}},
		{name: "a nested field of the wrong type", values: []clusterv1.ClusterVariable{value("image", `{"name":"u","registry":{"insecure":1}}`)},
			errs: []string{`spec.topology.variables[1].value.registry.insecure: Invalid value: 1: variable "image": must be of type boolean, not integer`}},
		{name: "a nested required field missing", values: []clusterv1.ClusterVariable{value("image", `{"registry":{}}`)},
			errs: []string{`spec.topology.variables[1].value.name: Required value: variable "image": the variable's schema requires this field`}},
		{name: "a field the schema does not declare", values: []clusterv1.ClusterVariable{value("image", `{"name":"u","tag":"1","registry":{"port":5000}}`)},
			errs: []string{
				`spec.topology.variables[1].value.registry.port: Invalid value: "": variable "image": the variable's schema declares no such field`,
				`spec.topology.variables[1].value.tag: Invalid value: "": variable "image": the variable's schema declares no such field`,
			}},
		{name: "map values checked", values: []clusterv1.ClusterVariable{value("labels", `{"a":"123456"}`)},
			errs: []string{`spec.topology.variables[1].value.a: Too long: variable "labels": may not be more than 5 bytes`}},
		{name: "map size checked", values: []clusterv1.ClusterVariable{value("labels", `{"a":"1","b":"2","c":"3"}`)},
			errs: []string{`spec.topology.variables[1].value: Too many: 3: variable "labels": must have at most 2 items`}},
		{name: "minItems refused", values: []clusterv1.ClusterVariable{value("zones", `[]`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: []: variable "zones": should have at least 1 items`}},
		{name: "maxItems refused", values: []clusterv1.ClusterVariable{value("zones", `["a","b","c","d"]`)},
			errs: []string{`spec.topology.variables[1].value: Too many: 4: variable "zones": must have at most 3 items`}},
		{name: "uniqueItems refused", values: []clusterv1.ClusterVariable{value("zones", `["a","a"]`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: ["a","a"]: variable "zones": shouldn't contain duplicates`}},
		{name: "items checked", values: []clusterv1.ClusterVariable{value("zones", `["a",2]`)},
			errs: []string{`spec.topology.variables[1].value[1]: Invalid value: 2: variable "zones": must be of type string, not integer`}},
		{name: "CEL rule with its message", values: []clusterv1.ClusterVariable{value("cidr", `{"pods":"10.1.0.0/16","services":"10.1.0.0/16"}`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: variable "cidr": pods and services must use different ranges`}},
		{name: "CEL rule with messageExpression, fieldPath and reason", values: []clusterv1.ClusterVariable{value("cidr", `{"pods":"192.168.0.0/16","services":"172.16.0.0/12"}`)},
			errs: []string{`spec.topology.variables[1].value.services: Forbidden: variable "cidr": services range 172.16.0.0/12 is not in 10.0.0.0/8`}},
		{name: "CEL rules see the defaults filled", values: []clusterv1.ClusterVariable{value("mirror", `{}`)}},
		{name: "CEL rule refuses a non-default", values: []clusterv1.ClusterVariable{value("mirror", `{"host":"example.com"}`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: variable "mirror": the mirror must be a .io host`}},
		{name: "int-or-string with anyOf and a pattern (a resource quantity)",
			values: []clusterv1.ClusterVariable{value("quantity", `"100Mi"`)}},
		{name: "a resource quantity as a number", values: []clusterv1.ClusterVariable{value("quantity", `3`)}},
		{name: "a resource quantity refused", values: []clusterv1.ClusterVariable{value("quantity", `"100 apples"`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: "100 apples": variable "quantity": should match`}},
		{name: "oneOf and not accept", values: []clusterv1.ClusterVariable{value("endpoint", `{"host":"a","port":1}`)}},
		{name: "oneOf refuses both", values: []clusterv1.ClusterVariable{value("endpoint", `{"host":"a","ip":"b"}`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: {"host":"a","ip":"b"}: variable "endpoint": must validate one and only one schema (oneOf)`}},
		{name: "not refuses", values: []clusterv1.ClusterVariable{value("endpoint", `{"host":"a","port":0}`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: {"host":"a","port":0}: variable "endpoint": must not validate the schema (not)`}},
		{name: "allOf and anyOf accept", values: []clusterv1.ClusterVariable{value("size", `{"cpu":1,"memory":8192}`)}},
		{name: "allOf refuses", values: []clusterv1.ClusterVariable{value("size", `{"cpu":4}`)},
			errs: []string{
				`spec.topology.variables[1].value.memory: Required value: variable "size": the variable's schema requires this field`,
				`spec.topology.variables[1].value: Invalid value: {"cpu":4}: variable "size": must validate all the schemas (allOf)`,
			}},
		{name: "anyOf refuses", values: []clusterv1.ClusterVariable{value("size", `{"cpu":1,"memory":1024}`)},
			errs: []string{
				`spec.topology.variables[1].value: Invalid value: {"cpu":1,"memory":1024}: variable "size": must validate at least one schema (anyOf)`,
				`spec.topology.variables[1].value.cpu: Invalid value: 1: variable "size": should be greater than or equal to 2`,
			}},
		{name: "an object enum accepts", values: []clusterv1.ClusterVariable{value("flavor", `{"name":"large"}`)}},
		{name: "an object enum refuses", values: []clusterv1.ClusterVariable{value("flavor", `{"name":"medium"}`)},
			errs: []string{`spec.topology.variables[1].value: Unsupported value: {"name":"medium"}: variable "flavor": supported values: "{\"name\":\"small\"}", "{\"name\":\"large\"}"`}},
		{name: "fields under preserve-unknown-fields are kept, declared ones still checked",
			values: []clusterv1.ClusterVariable{value("nested", `{"free":{"x":1},"typed":{"a":"s"}}`)}},
		{name: "an undeclared field inside a declared object under preserve-unknown-fields",
			values: []clusterv1.ClusterVariable{value("nested", `{"typed":{"a":"s","b":1}}`)},
			errs:   []string{`spec.topology.variables[1].value.typed.b: Invalid value: "": variable "nested": the variable's schema declares no such field`}},
		{name: "a field name differing only in case is undeclared", values: []clusterv1.ClusterVariable{value("image", `{"Name":"u","name":"u"}`)},
			errs: []string{`spec.topology.variables[1].value.Name: Invalid value: "": variable "image": the variable's schema declares no such field`}},
		{name: "a rule on a field with a dash in its name", values: []clusterv1.ClusterVariable{value("dashes", `{"max-pods":200}`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: variable "dashes": max-pods 200 is above 110`}},
		{name: "a message expression that fails falls back to the message", values: []clusterv1.ClusterVariable{value("fallback", `{"list":[]}`)},
			errs: []string{`spec.topology.variables[1].value: Invalid value: variable "fallback": list at least one item`}},
		{name: "a transition rule is skipped on create", values: []clusterv1.ClusterVariable{value("version", `1`)}},
		{name: "a transition rule is skipped when the old Cluster did not set the variable",
			values: []clusterv1.ClusterVariable{value("version", `1`)}, old: topologyCluster()},
		{name: "a transition rule accepts what it allows",
			values: []clusterv1.ClusterVariable{value("version", `5`)}, old: topologyCluster(value("version", `4`))},
		{name: "a transition rule refuses what it forbids",
			values: []clusterv1.ClusterVariable{value("version", `3`)}, old: topologyCluster(value("version", `4`)),
			errs: []string{`spec.topology.variables[1].value: Invalid value: 3: variable "version": version may only grow`}},
		{
			name:      "valid overrides, which need not repeat required variables",
			overrides: overrides{cp: []clusterv1.ClusterVariable{value("replicas", `3`)}, md1: []clusterv1.ClusterVariable{value("zones", `["b"]`)}, mp0: []clusterv1.ClusterVariable{value("region", `"eu-west-1"`)}},
		},
		{
			name: "overrides are checked like values, at their own paths",
			overrides: overrides{
				cp:  []clusterv1.ClusterVariable{value("replicas", `9`)},
				md1: []clusterv1.ClusterVariable{value("colour", `1`), value("image", `{}`)},
				mp0: []clusterv1.ClusterVariable{value("region", `"mars"`), value("region", `"mars"`)},
			},
			errs: []string{
				`spec.topology.controlPlane.variables.overrides[0].value: Invalid value: 9: variable "replicas": should be less than or equal to 5`,
				`spec.topology.workers.machineDeployments[1].variables.overrides[0].name: Invalid value: "colour": the ClusterClass declares no variable "colour"`,
				`spec.topology.workers.machineDeployments[1].variables.overrides[1].value.name: Required value: variable "image"`,
				`spec.topology.workers.machinePools[0].variables.overrides[1].name: Duplicate value: "region"`,
			},
		},
		{
			name:      "a worker's override transition sees the old override of the worker of the same name",
			overrides: overrides{md1: []clusterv1.ClusterVariable{value("version", `2`)}, mp0: []clusterv1.ClusterVariable{value("version", `1`)}},
			old: func() *clusterv1.Cluster {
				c := topologyCluster(value("version", `9`))
				c.Spec.Topology.Workers.MachineDeployments[0].Variables.Overrides = []clusterv1.ClusterVariable{value("version", `8`)}
				c.Spec.Topology.Workers.MachineDeployments[1].Variables.Overrides = []clusterv1.ClusterVariable{value("version", `3`)}
				c.Spec.Topology.Workers.MachinePools = nil
				return c
			}(),
			errs: []string{`spec.topology.workers.machineDeployments[1].variables.overrides[0].value: Invalid value: 2: variable "version": version may only grow`},
		},
		{
			name:      "the control plane's override transition sees the old control plane override",
			overrides: overrides{cp: []clusterv1.ClusterVariable{value("version", `2`)}},
			old: func() *clusterv1.Cluster {
				c := topologyCluster()
				c.Spec.Topology.ControlPlane.Variables.Overrides = []clusterv1.ClusterVariable{value("version", `3`)}
				return c
			}(),
			errs: []string{`spec.topology.controlPlane.variables.overrides[0].value: Invalid value: 2: variable "version": version may only grow`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := topologyCluster(tt.values...)
			if tt.noRegion {
				c.Spec.Topology.Variables = c.Spec.Topology.Variables[1:]
			}
			c.Spec.Topology.ControlPlane.Variables.Overrides = tt.overrides.cp
			c.Spec.Topology.Workers.MachineDeployments[1].Variables.Overrides = tt.overrides.md1
			c.Spec.Topology.Workers.MachinePools[0].Variables.Overrides = tt.overrides.mp0
			before := c.DeepCopy()
			errs := ValidateCluster(classVariables(t), c, tt.old)
			wantErrors(t, errs, tt.errs)
			if !reflect.DeepEqual(c, before) {
				t.Error("ValidateCluster changed the Cluster")
			}
		})
	}
}

func TestValidateClusterWithoutTopologyOrDefinitions(t *testing.T) {
	if errs := ValidateCluster(classVariables(t), &clusterv1.Cluster{}, nil); len(errs) > 0 {
		t.Errorf("a Cluster without a topology: %v", errs)
	}
	conflict := true
	d := inline("region", true, schemaOf(t, `{type: string}`))
	d.DefinitionsConflict = &conflict
	wantErrors(t, ValidateCluster([]clusterv1.ClusterClassStatusVariable{d}, topologyCluster(), nil),
		[]string{`spec.topology.classRef: Invalid value: "region": variable "region" has conflicting definitions`})
}
