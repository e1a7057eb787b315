// Package conditions sets and reads v1beta2 conditions ([]metav1.Condition)
// on Capstan's objects and reads them from provider objects.
package conditions

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Setter is an object with conditions in its status.
type Setter interface {
	GetGeneration() int64
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}

// Set records c on obj for the object's current generation. The transition
// time moves only when the status does, so an unchanged condition never
// causes a write.
func Set(obj Setter, c metav1.Condition) {
	c.ObservedGeneration = obj.GetGeneration()
	conds := obj.GetConditions()
	meta.SetStatusCondition(&conds, c)
	obj.SetConditions(conds)
}

// Get returns obj's condition of type t, or nil.
func Get(obj interface{ GetConditions() []metav1.Condition }, t string) *metav1.Condition {
	return meta.FindStatusCondition(obj.GetConditions(), t)
}

// IsTrue tells whether obj has condition t with status True.
func IsTrue(obj interface{ GetConditions() []metav1.Condition }, t string) bool {
	c := Get(obj, t)
	return c != nil && c.Status == metav1.ConditionTrue
}

// FromUnstructured reads condition t from a provider object's
// status.conditions, if it reports one in the v1beta2 shape.
func FromUnstructured(u *unstructured.Unstructured, t string) *metav1.Condition {
	list, found, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	if err != nil || !found {
		return nil
	}
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok || m["type"] != t {
			continue
		}
		c := &metav1.Condition{Type: t}
		s, _ := m["status"].(string)
		c.Status = metav1.ConditionStatus(s)
		c.Reason, _ = m["reason"].(string)
		c.Message, _ = m["message"].(string)
		if ts, ok := m["lastTransitionTime"].(string); ok {
			if parsed, err := time.Parse(time.RFC3339, ts); err == nil {
				c.LastTransitionTime = metav1.NewTime(parsed)
			}
		}
		return c
	}
	return nil
}
