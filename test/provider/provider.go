// Package provider is a minimal infrastructure, bootstrap and control plane
// provider for tests: CRDs that carry the Cluster API contract label and
// accept any spec and status, and helpers that set the contract's status
// fields the way a real provider's controller would. Tests drive it by hand,
// so Capstan's core is tested against the contract itself rather than
// against one provider's behaviour.
package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// The test provider's API groups.
const (
	InfrastructureGroup = "infrastructure.test.capstan.dev"
	BootstrapGroup      = "bootstrap.test.capstan.dev"
	ControlPlaneGroup   = "controlplane.test.capstan.dev"
)

// Kind describes one test provider kind.
type Kind struct {
	Group, Kind string
	// Contract is the value of the CRD's contract label: the versions that
	// implement the v1beta2 contract ("v1beta2", or "v1beta1" for a provider
	// that still uses the v1beta1 status fields).
	Contract string
	// Version is the only version the CRD serves.
	Version string
	// Scale adds a scale subresource (control planes).
	Scale bool
}

// The kinds the provider defines.
var (
	InfraCluster            = Kind{Group: InfrastructureGroup, Kind: "TestCluster", Contract: "v1beta2", Version: "v1beta2"}
	InfraMachine            = Kind{Group: InfrastructureGroup, Kind: "TestMachine", Contract: "v1beta2", Version: "v1beta2"}
	InfraMachineTemplate    = Kind{Group: InfrastructureGroup, Kind: "TestMachineTemplate", Contract: "v1beta2", Version: "v1beta2"}
	LegacyInfraMachine      = Kind{Group: InfrastructureGroup, Kind: "LegacyTestMachine", Contract: "v1beta1", Version: "v1beta1"}
	BootstrapConfig         = Kind{Group: BootstrapGroup, Kind: "TestBootstrapConfig", Contract: "v1beta2", Version: "v1beta2"}
	BootstrapConfigTemplate = Kind{Group: BootstrapGroup, Kind: "TestBootstrapConfigTemplate", Contract: "v1beta2", Version: "v1beta2"}
	ControlPlane            = Kind{Group: ControlPlaneGroup, Kind: "TestControlPlane", Contract: "v1beta2", Version: "v1beta2", Scale: true}
	// InfraMachinePool is a machine pool whose instances the test plays:
	// it makes no infrastructure machines (no MachinePool Machines).
	InfraMachinePool = Kind{Group: InfrastructureGroup, Kind: "TestMachinePool", Contract: "v1beta2", Version: "v1beta2"}
)

// Kinds lists every kind of the provider.
var Kinds = []Kind{InfraCluster, InfraMachine, InfraMachineTemplate, LegacyInfraMachine, BootstrapConfig, BootstrapConfigTemplate, ControlPlane, InfraMachinePool}

// GVK is the kind's GroupVersionKind.
func (k Kind) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

// Ref is a contract reference to an object of this kind.
func (k Kind) Ref(name string) clusterv1.ContractVersionedObjectReference {
	return clusterv1.ContractVersionedObjectReference{APIGroup: k.Group, Kind: k.Kind, Name: name}
}

// New returns an object of this kind with the given spec.
func (k Kind) New(namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(k.GVK())
	u.SetNamespace(namespace)
	u.SetName(name)
	if spec == nil {
		spec = map[string]any{}
	}
	u.Object["spec"] = spec
	return u
}

// CRD is the kind's CustomResourceDefinition.
func (k Kind) CRD() *apiextensionsv1.CustomResourceDefinition {
	plural := strings.ToLower(k.Kind) + "s"
	open := true
	anything := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &open}
	version := apiextensionsv1.CustomResourceDefinitionVersion{
		Name: k.Version, Served: true, Storage: true,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"apiVersion": {Type: "string"}, "kind": {Type: "string"}, "metadata": {Type: "object"},
				"spec": anything, "status": anything,
			},
		}},
		Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
	}
	if k.Scale {
		selector := ".status.selector"
		version.Subresources.Scale = &apiextensionsv1.CustomResourceSubresourceScale{
			SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: &selector,
		}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:   plural + "." + k.Group,
			Labels: map[string]string{clusterv1.ContractVersionLabel: k.Contract},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: k.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: k.Kind, ListKind: k.Kind + "List", Plural: plural, Singular: strings.ToLower(k.Kind),
			},
			Scope:    apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version},
		},
	}
}

// Install creates the provider's CRDs (if absent) and waits until they are
// served.
func Install(ctx context.Context, c client.Client) error {
	for _, k := range Kinds {
		crd := k.CRD()
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, k := range Kinds {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(k.GVK().GroupVersion().WithKind(k.Kind + "List"))
			if err := c.List(ctx, list, client.Limit(1)); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// SetStatus merges fields into an object's status, as the provider's
// controller would.
func SetStatus(ctx context.Context, c client.Client, obj *unstructured.Unstructured, status map[string]any) error {
	patch := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	body, err := patch.MarshalJSON()
	if err != nil {
		return err
	}
	return c.Status().Patch(ctx, obj, client.RawPatch("application/merge-patch+json", body))
}
