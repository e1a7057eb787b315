package contract

import (
	"context"
	"fmt"
	"maps"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// TemplateSuffix ends the kind of every provider template.
const TemplateSuffix = "Template"

// Clone describes an object to create from a provider template.
type Clone struct {
	Namespace, Name, ClusterName string
	// Labels and Annotations are added to the template's
	// spec.template.metadata ones (and win over them).
	Labels, Annotations map[string]string
	// Owner becomes the clone's only owner reference.
	Owner metav1.OwnerReference
}

// CloneTemplate creates, from a template (a kind ending in Template), an
// object of the kind without the suffix in the version the provider's
// contract label names: its spec is the template's spec.template.spec, its
// labels and annotations are the template's spec.template.metadata ones plus
// the clone's, the cluster name label, and which template it came from.
//
// An object of that name that already exists counts as created: an earlier
// attempt of the same creator made it (a manager stopped before recording
// it). What comes back then names it and holds what this call would have
// written, not what the existing object holds.
func CloneTemplate(ctx context.Context, r *Resolver, c client.Client, tmpl *unstructured.Unstructured, clone Clone) (*unstructured.Unstructured, error) {
	gk := schema.GroupKind{Group: tmpl.GroupVersionKind().Group, Kind: strings.TrimSuffix(tmpl.GetKind(), TemplateSuffix)}
	gvk, err := r.GroupVersionKind(ctx, clusterv1.ContractVersionedObjectReference{APIGroup: gk.Group, Kind: gk.Kind, Name: clone.Name})
	if err != nil {
		return nil, err
	}
	obj, err := FromTemplate(tmpl, gvk, clone)
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating %s %s from %s %s: %w", gvk.Kind, clone.Name, tmpl.GetKind(), tmpl.GetName(), err)
	}
	return obj, nil
}

// FromTemplate is the object CloneTemplate creates, computed without I/O: of
// kind gvk, its spec the template's spec.template.spec, its labels and
// annotations the template's spec.template.metadata ones plus the clone's,
// the cluster name label (when clone.ClusterName is set) and the cloned-from
// annotations. The clone's owner becomes its only owner reference; a zero
// Owner leaves it without one.
func FromTemplate(tmpl *unstructured.Unstructured, gvk schema.GroupVersionKind, clone Clone) (*unstructured.Unstructured, error) {
	src, _, err := unstructured.NestedMap(tmpl.Object, "spec", "template")
	if err != nil {
		return nil, fmt.Errorf("reading spec.template of %s %s: %w", tmpl.GetKind(), tmpl.GetName(), err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	if spec, ok := src["spec"]; ok {
		obj.Object["spec"] = spec
	}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(clone.Namespace)
	obj.SetName(clone.Name)

	labels, _, _ := unstructured.NestedStringMap(src, "metadata", "labels")
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, clone.Labels)
	if clone.ClusterName != "" {
		labels[clusterv1.ClusterNameLabel] = clone.ClusterName
	}
	obj.SetLabels(labels)

	annotations, _, _ := unstructured.NestedStringMap(src, "metadata", "annotations")
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(annotations, clone.Annotations)
	annotations[clusterv1.TemplateClonedFromNameAnnotation] = tmpl.GetName()
	annotations[clusterv1.TemplateClonedFromGroupKindAnnotation] = tmpl.GroupVersionKind().GroupKind().String()
	obj.SetAnnotations(annotations)

	if clone.Owner.Name != "" {
		obj.SetOwnerReferences([]metav1.OwnerReference{clone.Owner})
	}
	return obj, nil
}

// ReferenceTo is a version-less reference to obj, as Machines hold them.
func ReferenceTo(obj *unstructured.Unstructured) clusterv1.ContractVersionedObjectReference {
	return clusterv1.ContractVersionedObjectReference{APIGroup: obj.GroupVersionKind().Group, Kind: obj.GetKind(), Name: obj.GetName()}
}
