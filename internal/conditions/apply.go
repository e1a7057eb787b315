package conditions

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/pace"
)

// Object is an API object with conditions in its status.
type Object interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}

// Apply writes one condition of another controller's object by server-side
// apply as fieldManager: the write carries only that condition, so it can
// neither conflict with nor drop the conditions others own (a Machine's
// UpToDate belongs to its owner, its Ready to the Machine controller). It
// writes nothing when the condition already says the same; the transition
// time moves only with the status. obj is updated in memory as well, its
// resourceVersion to the one the write produced.
func Apply(ctx context.Context, c client.Client, obj Object, gvk schema.GroupVersionKind, cond metav1.Condition, fieldManager string, now time.Time) error {
	old := Get(obj, cond.Type)
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		return nil
	}
	cond.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	if old != nil && old.Status == cond.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvk.GroupVersion().String(),
		"kind":       gvk.Kind,
		"metadata":   map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace(), "uid": string(obj.GetUID())},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": cond.Type, "status": string(cond.Status), "reason": cond.Reason, "message": cond.Message,
			"lastTransitionTime": cond.LastTransitionTime.UTC().Format(time.RFC3339),
		}}},
	}}
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return client.IgnoreNotFound(err)
	}
	conds := obj.GetConditions()
	meta.SetStatusCondition(&conds, cond)
	obj.SetConditions(conds)
	if rv := u.GetResourceVersion(); rv != "" {
		obj.SetResourceVersion(rv)
	}
	return nil
}

// ApplyPaced is Apply for a controller that keeps its writes in p: a copy
// of obj older than the controller's own last apply writes nothing (from it
// the controller would apply the same again; that write's watch event
// brings it back), and a write made is recorded in p.
func ApplyPaced(ctx context.Context, c client.Client, p *pace.Pacer, obj Object, gvk schema.GroupVersionKind, cond metav1.Condition, fieldManager string, now time.Time) error {
	if p.Behind(obj) {
		return nil
	}
	read := obj.GetResourceVersion()
	if err := Apply(ctx, c, obj, gvk, cond, fieldManager, now); err != nil {
		return err
	}
	if obj.GetResourceVersion() != read {
		p.Wrote(obj)
	}
	return nil
}
