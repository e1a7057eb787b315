package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// keepAliveEvery is how often an idle stream sends a comment, so that
// proxies and browsers keep it open.
const keepAliveEvery = 15 * time.Second

// hub tells the open streams what changed. A stream is only marked and
// woken; it reads the current state itself when it sends, so a burst of
// changes to one object costs one event, whatever its length.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

func newHub() *hub { return &hub{subs: map[*subscriber]struct{}{}} }

// subscriber is one open stream and what it has still to send.
type subscriber struct {
	detail    client.ObjectKey // the cluster whose detail it follows, if any
	hasDetail bool
	wake      chan struct{}

	mu          sync.Mutex
	clusters    map[client.ObjectKey]struct{}
	detailDirty bool
}

func (h *hub) subscribe(detail client.ObjectKey, hasDetail bool) *subscriber {
	sub := &subscriber{detail: detail, hasDetail: hasDetail, wake: make(chan struct{}, 1), clusters: map[client.ObjectKey]struct{}{}}
	h.mu.Lock()
	h.subs[sub] = struct{}{}
	h.mu.Unlock()
	return sub
}

func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	delete(h.subs, sub)
	h.mu.Unlock()
}

// change is what an object's change means to the streams: the Cluster
// whose row changed, if any, and which detail views are affected: one
// cluster's, or, when the object names no cluster, every one in namespace.
type change struct {
	cluster   *client.ObjectKey
	namespace string
	detailOf  string // cluster name; "" means any cluster in namespace
	anyInNS   bool
}

func (h *hub) publish(c change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		marked := false
		sub.mu.Lock()
		if c.cluster != nil {
			sub.clusters[*c.cluster] = struct{}{}
			marked = true
		}
		if sub.hasDetail && sub.detail.Namespace == c.namespace && (c.anyInNS || sub.detail.Name == c.detailOf) {
			sub.detailDirty = true
			marked = true
		}
		sub.mu.Unlock()
		if marked {
			select {
			case sub.wake <- struct{}{}:
			default:
			}
		}
	}
}

// take hands over what the stream has to send and clears it.
func (sub *subscriber) take() ([]client.ObjectKey, bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	keys := make([]client.ObjectKey, 0, len(sub.clusters))
	for k := range sub.clusters {
		keys = append(keys, k)
	}
	clear(sub.clusters)
	dirty := sub.detailDirty
	sub.detailDirty = false
	return keys, dirty
}

// changeHandler turns the informers' notifications into hub changes.
func (s *Server) changeHandler() toolscache.ResourceEventHandler {
	on := func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if c, ok := changeOf(obj); ok {
			s.hub.publish(c)
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, obj any) { on(obj) },
		DeleteFunc: on,
	}
}

func changeOf(obj any) (change, bool) {
	switch o := obj.(type) {
	case *clusterv1.Cluster:
		key := client.ObjectKeyFromObject(o)
		return change{cluster: &key, namespace: o.Namespace, detailOf: o.Name}, true
	case *corev1.Event:
		if o.InvolvedObject.Kind == "Cluster" {
			return change{namespace: o.Namespace, detailOf: o.InvolvedObject.Name}, true
		}
		return change{namespace: o.Namespace, anyInNS: true}, true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return change{}, false
	}
	if name := m.GetLabels()[clusterv1.ClusterNameLabel]; name != "" {
		return change{namespace: m.GetNamespace(), detailOf: name}, true
	}
	return change{namespace: m.GetNamespace(), anyInNS: true}, true
}

// handleWatch streams changes as Server-Sent Events: every Cluster's row at
// connect and whenever it changes, its removal, and, with ?cluster=NS/NAME,
// that cluster's detail whenever anything of it changes.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported by this connection")
		return
	}
	var detail client.ObjectKey
	hasDetail := false
	if q := r.URL.Query().Get("cluster"); q != "" {
		ns, name, ok := strings.Cut(q, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			writeError(w, http.StatusBadRequest, "cluster="+q+": give NAMESPACE/NAME")
			return
		}
		detail, hasDetail = client.ObjectKey{Namespace: ns, Name: name}, true
	}
	ctx := r.Context()
	// Subscribe before the first list, so that no change falls between.
	sub := s.hub.subscribe(detail, hasDetail)
	defer s.hub.unsubscribe(sub)

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) bool {
		data, err := json.Marshal(v)
		if err != nil {
			return false
		}
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
		return err == nil
	}
	summaries, err := s.summaries(ctx)
	if err != nil {
		send("error", map[string]string{"error": err.Error()})
	}
	for i := range summaries {
		if !send("cluster", &summaries[i]) {
			return
		}
	}
	if hasDetail {
		s.sendDetail(ctx, detail, send)
	}
	flusher.Flush()

	keepAlive := time.NewTicker(keepAliveEvery)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-sub.wake:
			// Let the burst this change belongs to gather first.
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.opts.Coalesce):
			}
			keys, dirty := sub.take()
			for _, key := range keys {
				c := &clusterv1.Cluster{}
				err := s.cache.Get(ctx, key, c)
				switch {
				case apierrors.IsNotFound(err):
					if !send("cluster-deleted", map[string]string{"namespace": key.Namespace, "name": key.Name}) {
						return
					}
				case err == nil:
					sum := summarize(c)
					if !send("cluster", &sum) {
						return
					}
				}
			}
			if dirty {
				s.sendDetail(ctx, detail, send)
			}
			flusher.Flush()
		}
	}
}

func (s *Server) sendDetail(ctx context.Context, key client.ObjectKey, send func(string, any) bool) {
	d, status, err := s.detail(ctx, key)
	if err != nil {
		send("detail-error", errorReply{Error: err.Error(), Code: status})
		return
	}
	send("detail", d)
}
