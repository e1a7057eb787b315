package contract

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestClonedReference(t *testing.T) {
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "FooMachineTemplate",
		"metadata": map[string]any{"name": "t"},
	}}
	want := clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "FooMachine", Name: "m-1"}
	if got := ClonedReference(tmpl, "m-1"); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// The reference names what CloneTemplate creates, as ReferenceTo of the
	// created object would.
	clone := &unstructured.Unstructured{}
	clone.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
	clone.SetKind("FooMachine")
	clone.SetName("m-1")
	if got := ReferenceTo(clone); got != want {
		t.Errorf("ReferenceTo %+v, want %+v", got, want)
	}
}

func TestSetByManager(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: sub, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	m := &clusterv1.Machine{}
	m.ManagedFields = []metav1.ManagedFieldsEntry{
		entry("creator", metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{"f:infrastructureRef":{"f:name":{}},"f:clusterName":{}}}`),
		entry("other", metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{"f:bootstrap":{"f:configRef":{"f:name":{}}}}}`),
		entry("creator", metav1.ManagedFieldsOperationUpdate, "status", `{"f:spec":{"f:bootstrap":{"f:configRef":{}}}}`),
		entry("creator", metav1.ManagedFieldsOperationApply, "", `{"f:spec":{"f:bootstrap":{"f:configRef":{}}}}`),
	}
	for _, tt := range []struct {
		manager string
		path    []string
		want    bool
	}{
		{"creator", []string{"spec", "infrastructureRef"}, true},
		{"creator", []string{"spec", "clusterName"}, true},
		// Written by someone else, or through status or an apply only.
		{"creator", []string{"spec", "bootstrap", "configRef"}, false},
		{"other", []string{"spec", "bootstrap", "configRef"}, true},
		{"other", []string{"spec", "infrastructureRef"}, false},
		{"nobody", []string{"spec"}, false},
	} {
		if got := SetByManager(m, tt.manager, tt.path...); got != tt.want {
			t.Errorf("SetByManager(%s, %v) = %v, want %v", tt.manager, tt.path, got, tt.want)
		}
	}
}
