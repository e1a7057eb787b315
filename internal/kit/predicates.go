package kit

import (
	"reflect"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/pause"
)

// ClusterAspect picks one part of a Cluster that a controller's objects
// depend on.
type ClusterAspect func(*clusterv1.Cluster) any

// The parts of a Cluster that controllers of the objects in it act on.
var (
	ClusterPaused ClusterAspect = func(c *clusterv1.Cluster) any {
		paused, _ := pause.Check(c, c)
		return paused
	}
	ClusterInfrastructureProvisioned ClusterAspect = func(c *clusterv1.Cluster) any {
		return ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false)
	}
	ClusterControlPlaneInitialized ClusterAspect = func(c *clusterv1.Cluster) any {
		return ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false)
	}
	ClusterEndpoint ClusterAspect = func(c *clusterv1.Cluster) any { return c.Spec.ControlPlaneEndpoint }
	ClusterDeleting ClusterAspect = func(c *clusterv1.Cluster) any { return !c.DeletionTimestamp.IsZero() }
)

// ClusterChanged passes the Cluster events that matter to objects depending
// on the given aspects: creations and deletions, and updates that change one
// of the aspects. A Cluster's status changes many times as it comes up; the
// objects in it need to hear of few of them.
func ClusterChanged(aspects ...ClusterAspect) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*clusterv1.Cluster)
		after, ok2 := e.ObjectNew.(*clusterv1.Cluster)
		if !ok1 || !ok2 {
			return true
		}
		for _, aspect := range aspects {
			if !reflect.DeepEqual(aspect(before), aspect(after)) {
				return true
			}
		}
		return false
	}}
}

// NotStatusOnly drops the update events of an object that changed nothing
// but its status, which its own controller writes: reacting to them would
// only compute the same again. The cache's periodic resyncs (no change at
// all) pass.
var NotStatusOnly = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	if o == nil || n == nil {
		return true
	}
	return o.GetResourceVersion() == n.GetResourceVersion() ||
		o.GetGeneration() != n.GetGeneration() ||
		!reflect.DeepEqual(o.GetLabels(), n.GetLabels()) ||
		!reflect.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
		!reflect.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
		!reflect.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
		!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
}}
