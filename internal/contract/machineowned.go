package contract

import (
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// ClonedReference is the reference a Machine holds to the object
// CloneTemplate makes from tmpl under name. It is known before that object
// exists, so a Machine can be created first and its objects after it.
func ClonedReference(tmpl *unstructured.Unstructured, name string) clusterv1.ContractVersionedObjectReference {
	return clusterv1.ContractVersionedObjectReference{
		APIGroup: tmpl.GroupVersionKind().Group,
		Kind:     strings.TrimSuffix(tmpl.GetKind(), TemplateSuffix),
		Name:     name,
	}
}

// MachineOwner is the controller reference a Machine holds on its bootstrap
// and infrastructure objects. The Machine controller sets exactly this one,
// so an object created with it already needs no write from that controller.
func MachineOwner(m *clusterv1.Machine) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(), Kind: clusterv1.MachineKind,
		Name: m.Name, UID: m.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

// SetByManager tells whether manager wrote the field at path (such as
// "spec", "infrastructureRef") of obj through a create, update or patch of
// the object itself, as its managed fields record it. A controller that
// creates a Machine and then its objects uses it to tell its own Machines
// from ones a user made (whose objects are the user's to create).
func SetByManager(obj metav1.Object, manager string, path ...string) bool {
	for _, fields := range FieldsSetBy(obj, manager) {
		found := true
		for _, p := range path {
			next, ok := fields["f:"+p].(map[string]any)
			if !ok {
				found = false
				break
			}
			fields = next
		}
		if found {
			return true
		}
	}
	return false
}

// FieldsSetBy is, for each managed-fields entry of manager's creates,
// updates and patches of obj itself (not of a subresource, not applies), the
// decoded field set ({"f:metadata": {"f:labels": {"f:a": {}}}, ...}).
func FieldsSetBy(obj metav1.Object, manager string) []map[string]any {
	return fieldSets(obj, manager, metav1.ManagedFieldsOperationUpdate)
}

// FieldsAppliedBy is FieldsSetBy for manager's server-side applies.
func FieldsAppliedBy(obj metav1.Object, manager string) []map[string]any {
	return fieldSets(obj, manager, metav1.ManagedFieldsOperationApply)
}

func fieldSets(obj metav1.Object, manager string, op metav1.ManagedFieldsOperationType) []map[string]any {
	var sets []map[string]any
	for _, entry := range obj.GetManagedFields() {
		if entry.Manager != manager || entry.Operation != op || entry.Subresource != "" || entry.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(entry.FieldsV1.Raw, &fields); err == nil {
			sets = append(sets, fields)
		}
	}
	return sets
}
