package workload

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Watcher is what Watch delivers a source to; controller.Controller (and
// its typed variant for reconcile.Request) satisfies it.
type Watcher interface {
	Watch(src source.Source) error
}

// WatchInput describes a watch of one kind in a workload cluster.
type WatchInput struct {
	// Name identifies the watch within the cluster, for example
	// "machine/nodes": a second Watch with the same name for the same
	// connection does nothing.
	Name string
	// Watcher receives the source, normally the calling controller.
	Watcher Watcher
	// Kind is the object type to watch, e.g. &corev1.Node{}; it must be in
	// the cache's scheme.
	Kind client.Object
	// Handler maps events to reconcile requests, e.g.
	// handler.EnqueueRequestsFromMapFunc(nodeToMachine).
	Handler handler.EventHandler
	// Predicates filter events before Handler sees them.
	Predicates []predicate.Predicate
}

// Watch starts, once per name and connection, an informer for in.Kind in the
// cluster's cache and hands in.Watcher a source delivering its events to
// in.Handler. From then on, reads of that kind through GetClient's client come
// from the cache.
//
// A watch lives as long as the connection: when the cluster is disconnected
// (failed probes, rotated kubeconfig, Disconnect) it stops with it. Call Watch
// on every reconcile that needs it; it is cheap once the watch exists, and it
// re-creates the watch on the new connection after a reconnect.
func (c *ClusterCache) Watch(ctx context.Context, cluster client.ObjectKey, in WatchInput) error {
	switch {
	case in.Name == "":
		return errors.New("workload: WatchInput.Name is required")
	case in.Watcher == nil:
		return errors.New("workload: WatchInput.Watcher is required")
	case in.Kind == nil:
		return errors.New("workload: WatchInput.Kind is required")
	case in.Handler == nil:
		return errors.New("workload: WatchInput.Handler is required")
	}
	gvk, err := apiutil.GVKForObject(in.Kind, c.opts.Scheme)
	if err != nil {
		return fmt.Errorf("workload: cannot watch %T: %w", in.Kind, err)
	}
	acc, err := c.connect(ctx, cluster)
	if err != nil {
		return err
	}

	acc.watchMu.Lock()
	defer acc.watchMu.Unlock()
	if acc.isClosed() {
		return droppedError(cluster)
	}
	if _, ok := acc.watches[in.Name]; ok {
		return nil
	}
	src := &kindSource{
		acc:        acc,
		kind:       in.Kind,
		desc:       fmt.Sprintf("%s in workload cluster %s", gvk.Kind, cluster),
		handler:    in.Handler,
		predicates: in.Predicates,
		log:        c.log.WithValues("cluster", cluster.String(), "watch", in.Name),
	}
	if err := in.Watcher.Watch(src); err != nil {
		return fmt.Errorf("starting watch %q of %s: %w", in.Name, src.desc, err)
	}
	acc.watches[in.Name] = struct{}{}
	c.log.V(1).Info("Watching workload cluster", "cluster", cluster.String(), "watch", in.Name, "kind", gvk.Kind)
	return nil
}

// kindSource is a source.Source over one informer of a workload cluster's
// cache. Unlike source.Kind it never waits for the informer to sync and never
// retries in the background, so a cluster that goes away leaves nothing
// behind in the controller; and it is not a SyncingSource, so a slow workload
// cluster cannot fail a controller's start.
type kindSource struct {
	acc        *accessor
	kind       client.Object
	desc       string
	handler    handler.EventHandler
	predicates []predicate.Predicate
	log        logr.Logger
}

var _ source.Source = &kindSource{}

func (s *kindSource) String() string { return s.desc }

// Start registers the handler with the informer, creating and starting the
// informer if needed, without waiting for it to sync.
func (s *kindSource) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	// A connection closed before the controller got round to starting the
	// source is not the controller's failure (returning an error here would
	// stop a controller that is starting): the watch ended with the
	// connection, and the next Watch call on a new connection starts it again.
	if s.acc.isClosed() {
		s.log.V(1).Info("Not starting watch: its connection to the workload cluster has closed")
		return nil
	}
	informer, err := s.acc.cache.GetInformer(ctx, s.kind, cache.BlockUntilSynced(false))
	if err != nil {
		if ReasonOf(err) == ReasonDisconnected {
			s.log.V(1).Info("Not starting watch: its connection to the workload cluster has closed")
			return nil
		}
		return err
	}
	reg, err := informer.AddEventHandler(&forwarder{ctx: ctx, queue: queue, src: s})
	if err != nil {
		return err
	}
	// The handler goes when the controller stops or the connection closes,
	// whichever comes first.
	release := context.AfterFunc(ctx, func() { _ = informer.RemoveEventHandler(reg) })
	if !s.acc.onStop(func() { release() }) {
		release() // closed meanwhile; the informer has stopped anyway
	}
	return nil
}

// forwarder turns informer notifications into controller-runtime events.
type forwarder struct {
	ctx   context.Context
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	src   *kindSource
}

var _ toolscache.ResourceEventHandler = &forwarder{}

func (f *forwarder) object(obj any) (client.Object, bool) {
	o, ok := obj.(client.Object)
	if !ok {
		f.src.log.Error(nil, "Informer delivered an object that is not a client.Object", "type", fmt.Sprintf("%T", obj))
	}
	return o, ok
}

func (f *forwarder) OnAdd(obj any, isInInitialList bool) {
	o, ok := f.object(obj)
	if !ok {
		return
	}
	ev := event.CreateEvent{Object: o, IsInInitialList: isInInitialList}
	for _, p := range f.src.predicates {
		if !p.Create(ev) {
			return
		}
	}
	f.src.handler.Create(f.ctx, ev, f.queue)
}

func (f *forwarder) OnUpdate(oldObj, newObj any) {
	o, ok := f.object(oldObj)
	if !ok {
		return
	}
	n, ok := f.object(newObj)
	if !ok {
		return
	}
	ev := event.UpdateEvent{ObjectOld: o, ObjectNew: n}
	for _, p := range f.src.predicates {
		if !p.Update(ev) {
			return
		}
	}
	f.src.handler.Update(f.ctx, ev, f.queue)
}

func (f *forwarder) OnDelete(obj any) {
	ev := event.DeleteEvent{}
	// A delete the informer missed arrives as a tombstone with the last
	// state it saw.
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
		ev.DeleteStateUnknown = true
	}
	o, ok := f.object(obj)
	if !ok {
		return
	}
	ev.Object = o
	for _, p := range f.src.predicates {
		if !p.Delete(ev) {
			return
		}
	}
	f.src.handler.Delete(f.ctx, ev, f.queue)
}
