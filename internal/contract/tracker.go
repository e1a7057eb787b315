package contract

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Watcher is what a controller offers to start more watches after it has
// started; controller.Controller satisfies it.
type Watcher interface {
	Watch(src source.Source) error
}

// Tracker starts one watch per provider kind, the first time a controller
// meets an object of that kind. Controllers call Watch on every reconcile;
// all but the first call for a kind are free.
type Tracker struct {
	Controller Watcher
	Cache      cache.Cache
	Handler    handler.EventHandler
	Predicates []predicate.Predicate

	mu      sync.Mutex
	watched map[schema.GroupKind]bool
}

// Watch makes sure the tracker's controller hears about changes to objects
// of gvk.
func (t *Tracker) Watch(gvk schema.GroupVersionKind) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.watched[gvk.GroupKind()] {
		return nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := t.Controller.Watch(source.Kind[client.Object](t.Cache, obj, t.Handler, t.Predicates...)); err != nil {
		return err
	}
	if t.watched == nil {
		t.watched = map[schema.GroupKind]bool{}
	}
	t.watched[gvk.GroupKind()] = true
	return nil
}
