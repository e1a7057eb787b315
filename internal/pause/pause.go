// Package pause answers one question for every controller: may it act on an
// object now? A Cluster's spec.paused stops work on everything that belongs
// to the cluster; the cluster.x-k8s.io/paused annotation stops work on the
// one object that carries it.
package pause

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
)

// Check tells whether obj is paused, and why.
func Check(cluster *clusterv1.Cluster, obj metav1.Object) (bool, string) {
	if cluster != nil && cluster.Spec.Paused != nil && *cluster.Spec.Paused {
		return true, "Cluster spec.paused is true"
	}
	if _, ok := obj.GetAnnotations()[clusterv1.PausedAnnotation]; ok {
		return true, "the object has the " + clusterv1.PausedAnnotation + " annotation"
	}
	return false, ""
}

// Reconcile sets obj's Paused condition and tells whether the controller
// must stop here.
func Reconcile(cluster *clusterv1.Cluster, obj interface {
	metav1.Object
	conditions.Setter
}) bool {
	paused, why := Check(cluster, obj)
	if paused {
		conditions.Set(obj, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionTrue, Reason: clusterv1.PausedReason, Message: why})
	} else {
		conditions.Set(obj, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason})
	}
	return paused
}
