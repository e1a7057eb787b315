package workload

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// Health is what the cache knows about its connection to one workload
// cluster; the Cluster controller turns it into the RemoteConnectionProbe
// condition.
type Health struct {
	// Connected is true while the cache holds a working connection: the last
	// connection attempt succeeded and fewer than FailureThreshold probes
	// have failed since.
	Connected bool
	// LastProbeTime is when the API server was last probed (zero if never).
	LastProbeTime time.Time
	// LastProbeSuccessTime is when a probe last succeeded (zero if never).
	LastProbeSuccessTime time.Time
	// ConsecutiveFailures counts failed probes since the last success.
	ConsecutiveFailures int
	// Message explains a missing or failing connection and what to do; empty
	// when healthy. It never contains credentials.
	Message string
}

// maxParallelProbes bounds the probes in flight in one round.
const maxParallelProbes = 32

// Health returns the health of the cluster's connection. A cluster nobody has
// asked for (or that was disconnected with Disconnect) is reported as not
// connected.
func (c *ClusterCache) Health(cluster client.ObjectKey) Health {
	c.mu.Lock()
	e := c.clusters[cluster]
	stopped := c.stopped
	c.mu.Unlock()
	if e == nil {
		msg := "no connection has been requested for this cluster yet"
		if stopped {
			msg = stoppedError(cluster).Message
		}
		return Health{Message: msg}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.health
}

// probeAll probes every connected cluster once, in parallel.
func (c *ClusterCache) probeAll(ctx context.Context) {
	c.mu.Lock()
	entries := make([]*clusterEntry, 0, len(c.clusters))
	for _, e := range c.clusters {
		entries = append(entries, e)
	}
	c.mu.Unlock()

	var wg sync.WaitGroup
	slots := make(chan struct{}, maxParallelProbes)
	for _, e := range entries {
		e.mu.Lock()
		acc, recheck := e.acc, e.acc == nil && e.down && !e.announced
		e.mu.Unlock()
		if recheck {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				c.recheck(ctx, e)
			})
			continue
		}
		if acc == nil {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			c.probe(ctx, e, acc)
		})
	}
	wg.Wait()
}

func (c *ClusterCache) probe(ctx context.Context, e *clusterEntry, acc *accessor) {
	err := ping(ctx, acc.probe, c.opts.ProbeTimeout)
	if ctx.Err() != nil {
		return // stopping; the probe proves nothing
	}
	now := time.Now()
	log := c.log.WithValues("cluster", e.key.String())

	e.mu.Lock()
	if e.acc != acc {
		e.mu.Unlock()
		return // replaced or dropped meanwhile
	}
	h := &e.health
	h.LastProbeTime = now
	if err == nil {
		recovered := h.ConsecutiveFailures > 0
		if recovered {
			log.Info("Workload cluster answers health probes again", "failedProbes", h.ConsecutiveFailures)
		}
		h.ConsecutiveFailures = 0
		h.LastProbeSuccessTime = now
		h.Message = ""
		e.unanswered = nil
		e.mu.Unlock()
		if recovered {
			// Its clients are served again: whoever reported it silent
			// reads it afresh.
			c.notify(e.key)
		}
		return
	}
	h.ConsecutiveFailures++
	n := h.ConsecutiveFailures
	e.unanswered = notConnected(e.key, ReasonUnreachable, err,
		"its API server at %s does not answer (%v); what was read from it before is not reported as current until it answers a health probe again",
		acc.host, err)
	if n < c.opts.FailureThreshold {
		h.Message = fmt.Sprintf("health probe of the API server at %s failed (%d of %d before disconnecting): %v", acc.host, n, c.opts.FailureThreshold, err)
		e.mu.Unlock()
		log.V(1).Info("Health probe of workload cluster failed", "failures", n, "threshold", c.opts.FailureThreshold, "error", err.Error())
		if n == 1 {
			// Its clients are refused from now on: whoever reported on
			// it must report that it cannot be read.
			c.notify(e.key)
		}
		return
	}
	e.mu.Unlock()

	msg := fmt.Sprintf("disconnected after %d consecutive failed health probes of the API server at %s (last: %v); check that the control plane is running and reachable from the manager; the connection is rebuilt on next use",
		n, acc.host, err)
	log.Info("Workload cluster failed its health probes; disconnecting", "failures", n, "error", err.Error())
	c.drop(e, acc, msg)
}

// recheck asks a cluster that stopped answering, and has no connection,
// whether it answers again; the first time it does, the controllers are
// told, and their next GetClient connects at once instead of waiting out
// RetryInterval.
func (c *ClusterCache) recheck(ctx context.Context, e *clusterEntry) {
	if err := c.Probe(ctx, e.key); err != nil || ctx.Err() != nil {
		return
	}
	if !e.connectMu.TryLock() {
		return // someone is connecting right now
	}
	e.failedErr = nil
	e.connectMu.Unlock()
	e.mu.Lock()
	fresh := e.acc == nil && e.down && !e.announced
	e.announced = true
	e.mu.Unlock()
	if fresh {
		c.log.Info("Workload cluster answers again", "cluster", e.key.String())
		c.notify(e.key)
	}
}

// HealthChanges returns a new channel that receives an event each time a
// cluster becomes connected or disconnected (when the cache notices: a
// connection built, health probes failing, a kubeconfig Secret removed; not
// on Disconnect), stops answering its health probes or answers again. The event's object is a Cluster with only its namespace and
// name set. Events for one cluster are coalesced while the receiver lags, so
// the sender never blocks and nothing is lost; re-read Health on receipt. The
// channel is closed when the cache stops. Every call makes a separate
// subscription; see HealthSource to feed a controller.
func (c *ClusterCache) HealthChanges() <-chan event.GenericEvent {
	s := &subscriber{
		out:     make(chan event.GenericEvent),
		wake:    make(chan struct{}, 1),
		pending: map[client.ObjectKey]struct{}{},
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		close(s.out)
		return s.out
	}
	c.subs = append(c.subs, s)
	c.subsWG.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.subsWG.Done()
		s.run(c.ctx)
	}()
	return s.out
}

// HealthSource returns a source for the Cluster controller: it delivers
// HealthChanges to h, or, when h is nil, enqueues the Cluster itself.
//
//	ctrl.NewControllerManagedBy(mgr).For(&clusterv1.Cluster{}).
//		WatchesRawSource(clusterCache.HealthSource(nil))
func (c *ClusterCache) HealthSource(h handler.EventHandler) source.Source {
	if h == nil {
		h = &handler.EnqueueRequestForObject{}
	}
	return source.Channel(c.HealthChanges(), h)
}

func (c *ClusterCache) notify(key client.ObjectKey) {
	c.mu.Lock()
	subs := append([]*subscriber(nil), c.subs...)
	c.mu.Unlock()
	for _, s := range subs {
		s.push(key)
	}
}

// subscriber is one HealthChanges channel with its queue of clusters to
// announce.
type subscriber struct {
	out  chan event.GenericEvent
	wake chan struct{}

	mu      sync.Mutex
	pending map[client.ObjectKey]struct{}
	order   []client.ObjectKey
}

func (s *subscriber) push(key client.ObjectKey) {
	s.mu.Lock()
	if _, ok := s.pending[key]; !ok {
		s.pending[key] = struct{}{}
		s.order = append(s.order, key)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) next() (client.ObjectKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.order) == 0 {
		return client.ObjectKey{}, false
	}
	key := s.order[0]
	s.order = s.order[1:]
	delete(s.pending, key)
	return key, true
}

func (s *subscriber) run(ctx context.Context) {
	defer close(s.out)
	for {
		key, ok := s.next()
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		ev := event.GenericEvent{Object: &clusterv1.Cluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster"},
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		}}
		select {
		case s.out <- ev:
		case <-ctx.Done():
			return
		}
	}
}

// Probe asks the cluster's API server once, with the kubeconfig in its
// Secret, whether it answers. Unlike GetClient it keeps no connection and
// records no failure, so it does not hold back the first real connection by
// RetryInterval: it is for reporting on a cluster nobody needs yet, such as
// one whose control plane is still coming up. A nil error means the API
// server answered; otherwise the error is a NotConnectedError that names the
// cause.
func (c *ClusterCache) Probe(ctx context.Context, cluster client.ObjectKey) error {
	data, _, err := c.readKubeconfig(ctx, cluster)
	if err != nil {
		return err
	}
	cfg, err := parseKubeconfig(cluster, data, c.opts)
	if err != nil {
		return err
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return unusableKubeconfig(cluster, err)
	}
	defer utilnet.CloseIdleConnectionsFor(transport)
	disco, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, &http.Client{Transport: transport, Timeout: cfg.Timeout})
	if err != nil {
		return unusableKubeconfig(cluster, err)
	}
	if err := ping(ctx, disco.RESTClient(), c.opts.ProbeTimeout); err != nil {
		return notConnected(cluster, ReasonUnreachable, err,
			"its API server at %s did not answer a health probe (%v)", cfg.Host, err)
	}
	return nil
}
