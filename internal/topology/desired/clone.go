package desired

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
)

// objectFromTemplate makes the object a template describes (kind without
// the Template suffix, same API version) in the Cluster's namespace: the
// template's spec.template, the given labels and annotations over its
// spec.template.metadata ones, the cluster name and topology owned labels,
// and the cloned-from annotations. ownedByCluster adds the Cluster's owner
// reference; the infrastructure cluster and control plane get none here
// (the Cluster controller adopts them once the Cluster refers to them).
func objectFromTemplate(in Input, tmpl *unstructured.Unstructured, name string, labels, annotations map[string]string, ownedByCluster bool) (*unstructured.Unstructured, error) {
	gvk := tmpl.GroupVersionKind()
	gvk.Kind = strings.TrimSuffix(gvk.Kind, contract.TemplateSuffix)
	clone := contract.Clone{
		Namespace:   in.Cluster.Namespace,
		Name:        name,
		ClusterName: in.Cluster.Name,
		Labels:      merged(labels, map[string]string{clusterv1.ClusterTopologyOwnedLabel: ""}),
		Annotations: annotations,
	}
	if ownedByCluster {
		clone.Owner = contract.ClusterOwner(in.Cluster)
	}
	obj, err := contract.FromTemplate(tmpl, gvk, clone)
	if err != nil {
		return nil, fmt.Errorf("making %s %s from %s %s: %w", gvk.Kind, name, tmpl.GetKind(), tmpl.GetName(), err)
	}
	return obj, nil
}

// templateFromTemplate is the Cluster's own copy of a class template: same
// kind and spec, the template's labels plus the cluster name, topology
// owned and extra labels, its annotations plus the cloned-from ones (without
// kubectl's last-applied configuration), owned by the Cluster. Nothing the
// API server assigned (uid, resourceVersion, managed fields...) is carried.
func templateFromTemplate(in Input, tmpl *unstructured.Unstructured, name string, extraLabels map[string]string) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(tmpl.GetAPIVersion())
	out.SetKind(tmpl.GetKind())
	out.SetNamespace(in.Cluster.Namespace)
	out.SetName(name)

	labels := merged(tmpl.GetLabels(), extraLabels)
	labels[clusterv1.ClusterNameLabel] = in.Cluster.Name
	labels[clusterv1.ClusterTopologyOwnedLabel] = ""
	out.SetLabels(labels)

	annotations := merged(tmpl.GetAnnotations(), nil)
	delete(annotations, corev1.LastAppliedConfigAnnotation)
	annotations[clusterv1.TemplateClonedFromNameAnnotation] = tmpl.GetName()
	annotations[clusterv1.TemplateClonedFromGroupKindAnnotation] = tmpl.GroupVersionKind().GroupKind().String()
	out.SetAnnotations(annotations)

	out.SetOwnerReferences([]metav1.OwnerReference{contract.ClusterOwner(in.Cluster)})
	if spec, ok := tmpl.Object["spec"]; ok {
		out.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	return out
}

// setValue sets a typed value (a struct, a slice, a number) at path, in the
// JSON form the object's API has it.
func setValue(u *unstructured.Unstructured, value any, path ...string) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return unstructured.SetNestedField(u.Object, normalizeNumbers(v), path...)
}

// normalizeNumbers turns the float64 numbers JSON decoding gives into the
// int64 the API machinery uses for whole numbers.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
	}
	return v
}
