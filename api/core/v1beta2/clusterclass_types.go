package v1beta2

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ClusterClassKind is the kind name of ClusterClass.
const ClusterClassKind = "ClusterClass"

// The conditions a ClusterClass reports, with the contract's names. Capstan
// has no ClusterClass controller yet; the names are here so that the one to
// come, and tools reading the status, share them.
const (
	// ClusterClassVariablesReadyCondition: the class's variables, inline and
	// discovered from runtime extensions, are known and consistent.
	ClusterClassVariablesReadyCondition = "VariablesReady"
	// ClusterClassVariablesReadyReason: every variable definition is known.
	ClusterClassVariablesReadyReason = "VariablesReady"
	// ClusterClassVariablesReadyVariableDiscoveryFailedReason: a runtime
	// extension could not be asked for its variables.
	ClusterClassVariablesReadyVariableDiscoveryFailedReason = "VariableDiscoveryFailed"

	// ClusterClassRefVersionsUpToDateCondition: every template the class
	// references is at the API version its provider currently serves.
	ClusterClassRefVersionsUpToDateCondition = "RefVersionsUpToDate"
	// ClusterClassRefVersionsUpToDateReason: no reference is behind.
	ClusterClassRefVersionsUpToDateReason = "RefVersionsUpToDate"
	// ClusterClassRefVersionsNotUpToDateReason: at least one reference
	// names an older API version than its provider's contract version.
	ClusterClassRefVersionsNotUpToDateReason = "RefVersionsNotUpToDate"
	// ClusterClassRefVersionsUpToDateInternalErrorReason: the versions
	// could not be compared.
	ClusterClassRefVersionsUpToDateInternalErrorReason = InternalErrorReason
)

// ClusterClassSpec is the blueprint a managed Cluster (one with
// spec.topology) is built from: the templates of its infrastructure, control
// plane and worker groups, the variables a Cluster may set and the patches
// that apply them.
type ClusterClassSpec struct {
	// availabilityGates lists extra Cluster conditions that must be good
	// before a Cluster of this class is Available; a Cluster's own gates
	// replace them.
	// +optional
	// +listType=map
	// +listMapKey=conditionType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	AvailabilityGates []ClusterAvailabilityGate `json:"availabilityGates,omitempty"`

	// infrastructure is the template of the Cluster's infrastructure object.
	// +required
	Infrastructure InfrastructureClass `json:"infrastructure,omitempty,omitzero"`

	// controlPlane is the template of the Cluster's control plane object and,
	// for machine-based control planes, of its Machines' infrastructure.
	// +required
	ControlPlane ControlPlaneClass `json:"controlPlane,omitempty,omitzero"`

	// workers lists the classes a Cluster's worker groups may be made from.
	// +optional
	Workers WorkersClass `json:"workers,omitempty,omitzero"`

	// variables declares the variables a Cluster of this class may or must
	// set, each with an OpenAPI schema its value is checked against.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Variables []ClusterClassVariable `json:"variables,omitempty"`

	// patches change the objects generated from the templates, in order,
	// using the Cluster's variables.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Patches []ClusterClassPatch `json:"patches,omitempty"`

	// upgrade configures how Clusters of this class move between
	// Kubernetes versions.
	// +optional
	Upgrade ClusterClassUpgrade `json:"upgrade,omitempty,omitzero"`

	// kubernetesVersions lists, oldest first, the Kubernetes versions a
	// Cluster of this class may run; upgrades step through them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	KubernetesVersions []string `json:"kubernetesVersions,omitempty"`
}

// InfrastructureClass is the class's infrastructure cluster template.
type InfrastructureClass struct {
	// templateRef points at the infrastructure cluster template.
	// +required
	TemplateRef ClusterClassTemplateReference `json:"templateRef,omitempty,omitzero"`

	// naming shapes the name of the generated infrastructure object.
	// +optional
	Naming InfrastructureClassNamingSpec `json:"naming,omitempty,omitzero"`
}

// ControlPlaneClass is the class's control plane: its template and the
// defaults every Cluster of the class gets unless its topology overrides them.
type ControlPlaneClass struct {
	// metadata goes on the generated control plane object and, for
	// machine-based control planes, on its Machines.
	// +optional
	Metadata ObjectMeta `json:"metadata,omitempty,omitzero"`

	// templateRef points at the control plane template.
	// +required
	TemplateRef ClusterClassTemplateReference `json:"templateRef,omitempty,omitzero"`

	// machineInfrastructure is the infrastructure machine template of a
	// control plane that runs on Machines; leave it unset for one that
	// does not.
	// +optional
	MachineInfrastructure ControlPlaneClassMachineInfrastructureTemplate `json:"machineInfrastructure,omitempty,omitzero"`

	// healthCheck is the control plane MachineHealthCheck's default.
	// +optional
	HealthCheck ControlPlaneClassHealthCheck `json:"healthCheck,omitempty,omitzero"`

	// naming shapes the name of the generated control plane object.
	// +optional
	Naming ControlPlaneClassNamingSpec `json:"naming,omitempty,omitzero"`

	// deletion holds the default timeouts used when control plane Machines
	// are deleted.
	// +optional
	Deletion ControlPlaneTopologyMachineDeletionSpec `json:"deletion,omitempty,omitzero"`

	// taints are the default Node taints of control plane Machines.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Taints []MachineTaint `json:"taints,omitempty"`

	// readinessGates are the default extra conditions a control plane
	// Machine needs before it is Ready.
	// +optional
	// +listType=map
	// +listMapKey=conditionType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	ReadinessGates []MachineReadinessGate `json:"readinessGates,omitempty"`
}

// ControlPlaneClassHealthCheck is the class's default control plane health check.
// +kubebuilder:validation:MinProperties=1
type ControlPlaneClassHealthCheck struct {
	// checks say when a control plane Machine is unhealthy.
	// +optional
	Checks ControlPlaneTopologyHealthCheckChecks `json:"checks,omitempty,omitzero"`

	// remediation says what to do about unhealthy control plane Machines.
	// +optional
	Remediation ControlPlaneTopologyHealthCheckRemediation `json:"remediation,omitempty,omitzero"`
}

// IsDefined tells whether any part of the health check is set.
func (h *ControlPlaneClassHealthCheck) IsDefined() bool {
	return h != nil && (&ControlPlaneTopologyHealthCheck{Checks: h.Checks, Remediation: h.Remediation}).IsDefined()
}

// ControlPlaneClassNamingSpec shapes the control plane object's name.
// +kubebuilder:validation:MinProperties=1
type ControlPlaneClassNamingSpec struct {
	// template is a Go template for the name. It may use .cluster.name and
	// .random (five random characters); the result is cut to 63 characters.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Template string `json:"template,omitempty"`
}

// InfrastructureClassNamingSpec shapes the infrastructure object's name.
// +kubebuilder:validation:MinProperties=1
type InfrastructureClassNamingSpec struct {
	// template is a Go template for the name. It may use .cluster.name and
	// .random (five random characters); the result is cut to 63 characters.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Template string `json:"template,omitempty"`
}

// WorkersClass lists the worker classes of a ClusterClass.
// +kubebuilder:validation:MinProperties=1
type WorkersClass struct {
	// machineDeployments are the classes a topology's MachineDeployments
	// name in their class field.
	// +optional
	// +listType=map
	// +listMapKey=class
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	MachineDeployments []MachineDeploymentClass `json:"machineDeployments,omitempty"`

	// machinePools are the classes a topology's MachinePools name in their
	// class field.
	// +optional
	// +listType=map
	// +listMapKey=class
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	MachinePools []MachinePoolClass `json:"machinePools,omitempty"`
}

// MachineDeploymentClass is one kind of worker MachineDeployment: its
// templates and the defaults a topology's MachineDeployments of this class get.
type MachineDeploymentClass struct {
	// metadata goes on the generated MachineDeployment and its Machines.
	// +optional
	Metadata ObjectMeta `json:"metadata,omitempty,omitzero"`

	// class is the name topologies use to pick this class; unique in the
	// ClusterClass.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Class string `json:"class,omitempty"`

	// bootstrap is the bootstrap config template of the Machines.
	// +required
	Bootstrap MachineDeploymentClassBootstrapTemplate `json:"bootstrap,omitempty,omitzero"`

	// infrastructure is the infrastructure machine template of the Machines.
	// +required
	Infrastructure MachineDeploymentClassInfrastructureTemplate `json:"infrastructure,omitempty,omitzero"`

	// healthCheck is the default MachineHealthCheck of the MachineDeployments.
	// +optional
	HealthCheck MachineDeploymentClassHealthCheck `json:"healthCheck,omitempty,omitzero"`

	// failureDomain is the default failure domain of the Machines.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// naming shapes the names of the generated MachineDeployments.
	// +optional
	Naming MachineDeploymentClassNamingSpec `json:"naming,omitempty,omitzero"`

	// deletion holds the default deletion order and timeouts.
	// +optional
	Deletion MachineDeploymentTopologyMachineDeletionSpec `json:"deletion,omitempty,omitzero"`

	// taints are the default Node taints of the Machines.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Taints []MachineTaint `json:"taints,omitempty"`

	// minReadySeconds is how long a new Machine's Node must be Ready before
	// the Machine counts as available; 0 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`

	// readinessGates are the default extra conditions a Machine needs
	// before it is Ready.
	// +optional
	// +listType=map
	// +listMapKey=conditionType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	ReadinessGates []MachineReadinessGate `json:"readinessGates,omitempty"`

	// rollout is the default rollout strategy.
	// +optional
	Rollout MachineDeploymentClassRolloutSpec `json:"rollout,omitempty,omitzero"`
}

// MachineDeploymentClassHealthCheck is a worker class's default health check.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentClassHealthCheck struct {
	// checks say when a Machine is unhealthy.
	// +optional
	Checks MachineDeploymentTopologyHealthCheckChecks `json:"checks,omitempty,omitzero"`

	// remediation says what to do about unhealthy Machines.
	// +optional
	Remediation MachineDeploymentTopologyHealthCheckRemediation `json:"remediation,omitempty,omitzero"`
}

// IsDefined tells whether any part of the health check is set.
func (h *MachineDeploymentClassHealthCheck) IsDefined() bool {
	return h != nil && (&MachineDeploymentTopologyHealthCheck{Checks: h.Checks, Remediation: h.Remediation}).IsDefined()
}

// MachineDeploymentClassNamingSpec shapes a generated MachineDeployment's name.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentClassNamingSpec struct {
	// template is a Go template for the name. It may use .cluster.name,
	// .machineDeployment.topologyName and .random; the result is cut to 63
	// characters.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Template string `json:"template,omitempty"`
}

// MachineDeploymentClassRolloutSpec is a worker class's default rollout.
// +kubebuilder:validation:MinProperties=1
type MachineDeploymentClassRolloutSpec struct {
	// strategy is how old Machines are replaced by new ones.
	// +optional
	Strategy MachineDeploymentTopologyRolloutStrategy `json:"strategy,omitempty,omitzero"`
}

// MachinePoolClass is one kind of worker MachinePool: its templates and the
// defaults a topology's MachinePools of this class get.
type MachinePoolClass struct {
	// metadata goes on the generated MachinePool.
	// +optional
	Metadata ObjectMeta `json:"metadata,omitempty,omitzero"`

	// class is the name topologies use to pick this class; unique in the
	// ClusterClass.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Class string `json:"class,omitempty"`

	// bootstrap is the bootstrap config template of the pool.
	// +required
	Bootstrap MachinePoolClassBootstrapTemplate `json:"bootstrap,omitempty,omitzero"`

	// infrastructure is the infrastructure machine pool template.
	// +required
	Infrastructure MachinePoolClassInfrastructureTemplate `json:"infrastructure,omitempty,omitzero"`

	// failureDomains are the default failure domains of the pool.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	FailureDomains []string `json:"failureDomains,omitempty"`

	// naming shapes the names of the generated MachinePools.
	// +optional
	Naming MachinePoolClassNamingSpec `json:"naming,omitempty,omitzero"`

	// deletion holds the default timeouts used when the pool's Machines are
	// deleted.
	// +optional
	Deletion MachinePoolTopologyMachineDeletionSpec `json:"deletion,omitempty,omitzero"`

	// taints are the default Node taints of the pool's Machines.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Taints []MachineTaint `json:"taints,omitempty"`

	// minReadySeconds is how long a new Node must be Ready before it counts
	// as available; 0 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`
}

// MachinePoolClassNamingSpec shapes a generated MachinePool's name.
// +kubebuilder:validation:MinProperties=1
type MachinePoolClassNamingSpec struct {
	// template is a Go template for the name. It may use .cluster.name,
	// .machinePool.topologyName and .random; the result is cut to 63
	// characters.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Template string `json:"template,omitempty"`
}

// ClusterClassVariable declares one variable of a ClusterClass.
type ClusterClassVariable struct {
	// name of the variable; the name "builtin" is reserved and a name may
	// not contain a dot (dots select fields inside a variable's value).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self != 'builtin'",message="name \"builtin\" is reserved for the variables Cluster API provides: choose another variable name"
	// +kubebuilder:validation:XValidation:rule="!self.contains('.')",message="a variable name may not contain \".\" (dots select fields inside a value): choose a name without dots"
	Name string `json:"name,omitempty"`

	// required makes a Cluster of this class set the variable. A variable
	// with a default in its schema may still be required.
	// +required
	Required *bool `json:"required,omitempty"`

	// deprecatedV1Beta1Metadata keeps the labels and annotations a v1beta1
	// variable carried; new classes put them in the schema's x-metadata.
	// +optional
	DeprecatedV1Beta1Metadata ClusterClassVariableMetadata `json:"deprecatedV1Beta1Metadata,omitempty,omitzero"`

	// schema is the OpenAPI schema a value of the variable must match.
	// +required
	Schema VariableSchema `json:"schema,omitempty,omitzero"`
}

// ClusterClassVariableMetadata is metadata a variable carried in v1beta1.
// +kubebuilder:validation:MinProperties=1
type ClusterClassVariableMetadata struct {
	// labels of the variable.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations of the variable.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// VariableSchema wraps a variable's OpenAPI schema.
type VariableSchema struct {
	// openAPIV3Schema is the schema, the subset of OpenAPI v3 that
	// Kubernetes structural schemas allow.
	// +required
	OpenAPIV3Schema JSONSchemaProps `json:"openAPIV3Schema,omitempty,omitzero"`
}

// JSONSchemaProps is the part of a Kubernetes structural schema a
// ClusterClass variable may use. The recursive fields are stored schemaless:
// the API server cannot describe a schema of unbounded depth.
// +kubebuilder:validation:MinProperties=1
type JSONSchemaProps struct {
	// description of the value, for people.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Description string `json:"description,omitempty"`

	// example is a sample value, for people.
	// +optional
	Example *apiextensionsv1.JSON `json:"example,omitempty"`

	// type is the JSON type of the value.
	// +optional
	// +kubebuilder:validation:Enum=object;array;string;integer;number;boolean
	Type string `json:"type,omitempty"`

	// properties are the schemas of an object's named fields.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Properties map[string]JSONSchemaProps `json:"properties,omitempty"`

	// additionalProperties is the schema of an object's other fields, the
	// values of a map; it excludes properties.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	AdditionalProperties *JSONSchemaProps `json:"additionalProperties,omitempty"`

	// maxProperties caps an object's number of fields.
	// +optional
	MaxProperties *int64 `json:"maxProperties,omitempty"`

	// minProperties is the least number of fields an object has.
	// +optional
	MinProperties *int64 `json:"minProperties,omitempty"`

	// required lists the fields an object must have.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Required []string `json:"required,omitempty"`

	// items is the schema of an array's elements.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Items *JSONSchemaProps `json:"items,omitempty"`

	// maxItems caps an array's length.
	// +optional
	MaxItems *int64 `json:"maxItems,omitempty"`

	// minItems is the least length of an array.
	// +optional
	MinItems *int64 `json:"minItems,omitempty"`

	// uniqueItems forbids equal elements in an array.
	// +optional
	UniqueItems *bool `json:"uniqueItems,omitempty"`

	// format refines a string's type: the formats Kubernetes knows, such as
	// date-time, uri or uuid.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	Format string `json:"format,omitempty"`

	// maxLength caps a string's length.
	// +optional
	MaxLength *int64 `json:"maxLength,omitempty"`

	// minLength is the least length of a string.
	// +optional
	MinLength *int64 `json:"minLength,omitempty"`

	// pattern is a regular expression (ECMA 262) a string must match.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Pattern string `json:"pattern,omitempty"`

	// maximum caps a number.
	// +optional
	Maximum *int64 `json:"maximum,omitempty"`

	// exclusiveMaximum makes maximum itself out of range.
	// +optional
	ExclusiveMaximum *bool `json:"exclusiveMaximum,omitempty"`

	// minimum is the least value of a number.
	// +optional
	Minimum *int64 `json:"minimum,omitempty"`

	// exclusiveMinimum makes minimum itself out of range.
	// +optional
	ExclusiveMinimum *bool `json:"exclusiveMinimum,omitempty"`

	// x-kubernetes-preserve-unknown-fields keeps an object's fields that
	// properties do not describe instead of dropping them.
	// +optional
	XPreserveUnknownFields *bool `json:"x-kubernetes-preserve-unknown-fields,omitempty"`

	// enum lists the values allowed.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Enum []apiextensionsv1.JSON `json:"enum,omitempty"`

	// default is the value used when none is set.
	// +optional
	Default *apiextensionsv1.JSON `json:"default,omitempty"`

	// x-kubernetes-validations are CEL rules the value must pass.
	// +optional
	// +listType=map
	// +listMapKey=rule
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	XValidations []ValidationRule `json:"x-kubernetes-validations,omitempty"`

	// x-metadata is metadata for the variable itself, not part of its value.
	// +optional
	XMetadata VariableSchemaMetadata `json:"x-metadata,omitempty,omitzero"`

	// x-kubernetes-int-or-string lets the value be an integer or a string.
	// +optional
	XIntOrString *bool `json:"x-kubernetes-int-or-string,omitempty"`

	// allOf: the value must match every one of these schemas.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	AllOf []JSONSchemaProps `json:"allOf,omitempty"`

	// oneOf: the value must match exactly one of these schemas.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	OneOf []JSONSchemaProps `json:"oneOf,omitempty"`

	// anyOf: the value must match at least one of these schemas.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	AnyOf []JSONSchemaProps `json:"anyOf,omitempty"`

	// not: the value must not match this schema.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Not *JSONSchemaProps `json:"not,omitempty"`
}

// VariableSchemaMetadata is metadata a variable's schema carries for tools.
// +kubebuilder:validation:MinProperties=1
type VariableSchemaMetadata struct {
	// labels of the variable.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations of the variable.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ValidationRule is one CEL rule of a variable's schema.
type ValidationRule struct {
	// rule is the CEL expression; self is the value, oldSelf the previous
	// one in transition rules.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Rule string `json:"rule,omitempty"`

	// message is shown when the rule fails.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`

	// messageExpression is a CEL expression that builds the message; it
	// wins over message.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	MessageExpression string `json:"messageExpression,omitempty"`

	// reason is the kind of error reported when the rule fails.
	// +optional
	// +kubebuilder:validation:Enum=FieldValueInvalid;FieldValueForbidden;FieldValueRequired;FieldValueDuplicate
	// +kubebuilder:default=FieldValueInvalid
	Reason FieldValueErrorReason `json:"reason,omitempty"`

	// fieldPath is the path, relative to the rule's place in the schema,
	// that a failure is reported on.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	FieldPath string `json:"fieldPath,omitempty"`
}

// FieldValueErrorReason is the kind of error a failed validation rule reports.
type FieldValueErrorReason string

// The kinds of error a validation rule may report.
const (
	// FieldValueRequired reports a value that is missing.
	FieldValueRequired FieldValueErrorReason = "FieldValueRequired"
	// FieldValueDuplicate reports a value that appears twice.
	FieldValueDuplicate FieldValueErrorReason = "FieldValueDuplicate"
	// FieldValueInvalid reports a value that is wrong (the default).
	FieldValueInvalid FieldValueErrorReason = "FieldValueInvalid"
	// FieldValueForbidden reports a value that may not be set.
	FieldValueForbidden FieldValueErrorReason = "FieldValueForbidden"
)

// ClusterClassPatch changes generated objects: inline JSON patches or a
// runtime extension that computes them.
// +kubebuilder:validation:XValidation:rule="has(self.definitions) != has(self.external)",message="a patch needs exactly one of definitions (inline JSON patches) and external (a runtime extension): set one and remove the other"
type ClusterClassPatch struct {
	// name of the patch, unique in the class; "inline" is reserved.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self != 'inline'",message="patch name \"inline\" is reserved for the class's own variable definitions: choose another patch name"
	Name string `json:"name,omitempty"`

	// description of the patch, for people.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// enabledIf is a Go template over the variables that must render
	// "true" for the patch to apply; unset, the patch always applies.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	EnabledIf string `json:"enabledIf,omitempty"`

	// definitions are the inline patches. Set either definitions or external.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Definitions []PatchDefinition `json:"definitions,omitempty"`

	// external names the runtime extension handlers that compute and check
	// patches. Set either definitions or external.
	// +optional
	External *ExternalPatchDefinition `json:"external,omitempty"`
}

// ClusterClassUpgrade configures a class's Kubernetes upgrades.
// +kubebuilder:validation:MinProperties=1
type ClusterClassUpgrade struct {
	// external names runtime extensions that take part in upgrades.
	// +optional
	External ClusterClassUpgradeExternal `json:"external,omitempty,omitzero"`
}

// ClusterClassUpgradeExternal names upgrade runtime extensions.
// +kubebuilder:validation:MinProperties=1
type ClusterClassUpgradeExternal struct {
	// generateUpgradePlanExtension is the handler that computes the versions
	// an upgrade steps through, used instead of kubernetesVersions.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	GenerateUpgradePlanExtension string `json:"generateUpgradePlanExtension,omitempty"`
}

// PatchDefinition is a set of JSON patches and the objects they apply to.
type PatchDefinition struct {
	// selector picks the templates the patches apply to.
	// +required
	Selector PatchSelector `json:"selector,omitempty,omitzero"`

	// jsonPatches are applied in order.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	JSONPatches []JSONPatch `json:"jsonPatches,omitempty"`
}

// PatchSelector picks templates by API version, kind and place in the class.
type PatchSelector struct {
	// apiVersion of the templates, group/version.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[a-z]([-a-z0-9]*[a-z0-9])?$`
	APIVersion string `json:"apiVersion,omitempty"`

	// kind of the templates.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`
	Kind string `json:"kind,omitempty"`

	// matchResources says which of the class's templates of that kind match.
	// +required
	MatchResources PatchSelectorMatch `json:"matchResources,omitempty,omitzero"`
}

// PatchSelectorMatch names places in the class; a template matches if it sits
// in any of them.
// +kubebuilder:validation:MinProperties=1
type PatchSelectorMatch struct {
	// controlPlane matches the control plane template and its machine
	// infrastructure template.
	// +optional
	ControlPlane *bool `json:"controlPlane,omitempty"`

	// infrastructureCluster matches the infrastructure cluster template.
	// +optional
	InfrastructureCluster *bool `json:"infrastructureCluster,omitempty"`

	// machineDeploymentClass matches templates of the named worker classes.
	// +optional
	MachineDeploymentClass *PatchSelectorMatchMachineDeploymentClass `json:"machineDeploymentClass,omitempty"`

	// machinePoolClass matches templates of the named pool classes.
	// +optional
	MachinePoolClass *PatchSelectorMatchMachinePoolClass `json:"machinePoolClass,omitempty"`
}

// PatchSelectorMatchMachineDeploymentClass names worker classes.
type PatchSelectorMatchMachineDeploymentClass struct {
	// names of the classes; "*" matches all, and a leading or trailing "*"
	// matches a suffix or prefix.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Names []string `json:"names,omitempty"`
}

// PatchSelectorMatchMachinePoolClass names pool classes.
type PatchSelectorMatchMachinePoolClass struct {
	// names of the classes; "*" matches all, and a leading or trailing "*"
	// matches a suffix or prefix.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Names []string `json:"names,omitempty"`
}

// JSONPatch is one RFC 6902 operation, its value given inline or taken from
// a variable or a template.
type JSONPatch struct {
	// op is add, replace or remove.
	// +required
	// +kubebuilder:validation:Enum=add;replace;remove
	Op string `json:"op,omitempty"`

	// path is the JSON pointer of the field to change; it must start with
	// /spec/.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Path string `json:"path,omitempty"`

	// value is the literal value. Set value or valueFrom, not both.
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`

	// valueFrom computes the value. Set value or valueFrom, not both.
	// +optional
	ValueFrom *JSONPatchValue `json:"valueFrom,omitempty"`
}

// JSONPatchValue is where a patch value comes from: a variable or a template.
type JSONPatchValue struct {
	// variable is the name of a variable, or a path into one such as
	// "network.cidr"; builtin variables are under "builtin.".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Variable string `json:"variable,omitempty"`

	// template is a Go template over the variables that renders the value.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=10240
	Template string `json:"template,omitempty"`
}

// ExternalPatchDefinition names the runtime extension handlers of an
// external patch.
// +kubebuilder:validation:XValidation:rule="has(self.generatePatchesExtension) || has(self.validateTopologyExtension)",message="an external patch needs generatePatchesExtension, validateTopologyExtension or both: name at least one handler"
type ExternalPatchDefinition struct {
	// generatePatchesExtension is the handler that computes patches.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	GeneratePatchesExtension string `json:"generatePatchesExtension,omitempty"`

	// validateTopologyExtension is the handler that checks a topology.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ValidateTopologyExtension string `json:"validateTopologyExtension,omitempty"`

	// discoverVariablesExtension is the handler that declares variables.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	DiscoverVariablesExtension string `json:"discoverVariablesExtension,omitempty"`

	// settings are passed to the extension with every request.
	// +optional
	Settings map[string]string `json:"settings,omitempty"`
}

// ControlPlaneClassMachineInfrastructureTemplate is the infrastructure
// machine template of control plane Machines.
type ControlPlaneClassMachineInfrastructureTemplate struct {
	// templateRef points at the template.
	// +required
	TemplateRef ClusterClassTemplateReference `json:"templateRef,omitempty,omitzero"`
}

// MachineDeploymentClassBootstrapTemplate is a worker class's bootstrap
// config template.
type MachineDeploymentClassBootstrapTemplate struct {
	// templateRef points at the template.
	// +required
	TemplateRef ClusterClassTemplateReference `json:"templateRef,omitempty,omitzero"`
}

// MachineDeploymentClassInfrastructureTemplate is a worker class's
// infrastructure machine template.
type MachineDeploymentClassInfrastructureTemplate struct {
	// templateRef points at the template.
	// +required
	TemplateRef ClusterClassTemplateReference `json:"templateRef,omitempty,omitzero"`
}

// MachinePoolClassBootstrapTemplate is a pool class's bootstrap config template.
type MachinePoolClassBootstrapTemplate struct {
	// templateRef points at the template.
	// +required
	TemplateRef ClusterClassTemplateReference `json:"templateRef,omitempty,omitzero"`
}

// MachinePoolClassInfrastructureTemplate is a pool class's infrastructure
// machine pool template.
type MachinePoolClassInfrastructureTemplate struct {
	// templateRef points at the template.
	// +required
	TemplateRef ClusterClassTemplateReference `json:"templateRef,omitempty,omitzero"`
}

// ClusterClassTemplateReference points at a template in the ClusterClass's
// namespace.
type ClusterClassTemplateReference struct {
	// kind of the template.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`
	Kind string `json:"kind,omitempty"`

	// name of the template.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`

	// apiVersion of the template, group/version.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[a-z]([-a-z0-9]*[a-z0-9])?$`
	APIVersion string `json:"apiVersion,omitempty"`
}

// IsDefined tells whether any part of the reference is set.
func (r *ClusterClassTemplateReference) IsDefined() bool {
	return r != nil && (r.Kind != "" || r.Name != "" || r.APIVersion != "")
}

// GroupVersionKind is the referenced template's group, version and kind.
func (r *ClusterClassTemplateReference) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(r.APIVersion, r.Kind)
}

// ClusterClassStatus is what the ClusterClass controller observed.
// +kubebuilder:validation:MinProperties=1
type ClusterClassStatus struct {
	// conditions: VariablesReady, RefVersionsUpToDate, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// variables are every variable of the class, inline and discovered,
	// with where each definition came from.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Variables []ClusterClassStatusVariable `json:"variables,omitempty"`

	// observedGeneration is the generation of the spec the status describes.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// deprecated holds status fields of older API versions; Capstan does
	// not write them.
	// +optional
	Deprecated *DeprecatedConditionsStatus `json:"deprecated,omitempty"`
}

// ClusterClassStatusVariable is one variable and its definitions.
type ClusterClassStatusVariable struct {
	// name of the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`

	// definitionsConflict is true when the definitions differ; a Cluster
	// must then say which one its value is for.
	// +optional
	DefinitionsConflict *bool `json:"definitionsConflict,omitempty"`

	// definitions are the variable's definitions, one per source.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Definitions []ClusterClassStatusVariableDefinition `json:"definitions,omitempty"`
}

// ClusterClassStatusVariableDefinition is a variable's definition from one
// source: "inline" for the class's own, or an external patch's name.
type ClusterClassStatusVariableDefinition struct {
	// from is the source of the definition.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	From string `json:"from,omitempty"`

	// required makes a Cluster of this class set the variable.
	// +required
	Required *bool `json:"required,omitempty"`

	// deprecatedV1Beta1Metadata keeps the labels and annotations a v1beta1
	// variable carried.
	// +optional
	DeprecatedV1Beta1Metadata ClusterClassVariableMetadata `json:"deprecatedV1Beta1Metadata,omitempty,omitzero"`

	// schema is the OpenAPI schema a value must match.
	// +required
	Schema VariableSchema `json:"schema,omitempty,omitzero"`
}

// ClusterClass is a blueprint for Clusters: a Cluster names it in
// spec.topology.classRef and its objects are generated from the templates.
// Capstan stores and validates ClusterClasses; the controller that acts on
// them comes later.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=clusterclasses,shortName=cc,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=cluster-api"}
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Variables Ready",type="string",JSONPath=`.status.conditions[?(@.type=="VariablesReady")].status`,description="Whether the class's variables are known"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the ClusterClass was created"
type ClusterClass struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the blueprint.
	// +required
	Spec ClusterClassSpec `json:"spec,omitempty,omitzero"`

	// status is what the controller observed.
	// +optional
	Status ClusterClassStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the ClusterClass's conditions.
func (c *ClusterClass) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the ClusterClass's conditions.
func (c *ClusterClass) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// ClusterClassList is a list of ClusterClasses.
// +kubebuilder:object:root=true
type ClusterClassList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterClass{}, &ClusterClassList{})
}
