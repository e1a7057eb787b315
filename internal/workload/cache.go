package workload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// ClusterCache gives controllers cached, health-checked access to workload
// clusters. One is shared by all controllers of a manager; see the package
// documentation.
type ClusterCache struct {
	secrets client.Reader
	opts    Options
	log     logr.Logger

	// ctx is the parent of every connection; cancelled when Start ends.
	ctx    context.Context
	cancel context.CancelFunc
	subsWG sync.WaitGroup

	mu       sync.Mutex
	clusters map[client.ObjectKey]*clusterEntry
	subs     []*subscriber
	started  bool
	stopped  bool
}

var (
	_ manager.Runnable               = &ClusterCache{}
	_ manager.LeaderElectionRunnable = &ClusterCache{}
)

// clusterEntry is what the cache knows about one workload cluster: its
// current connection, if any, and its health.
type clusterEntry struct {
	key client.ObjectKey

	// connectMu serialises connecting and disconnecting this cluster; it is
	// held across network calls, so never while holding mu or the cache's mu.
	connectMu sync.Mutex
	removed   bool // by Disconnect or shutdown; the entry must not be used again
	// The last failed connection attempt, for RetryInterval.
	failedHash [sha256.Size]byte
	failedAt   time.Time
	failedErr  error

	// mu guards acc and health; held briefly, never across network calls.
	mu     sync.Mutex
	acc    *accessor
	health Health
	// secretReadAt is when the kubeconfig Secret behind acc was last read.
	secretReadAt time.Time
	// unanswered is set while acc's latest health probe has failed: the
	// informers then hold what the cluster said before it went silent, and
	// clients are refused with this error until a probe succeeds again.
	unanswered *NotConnectedError
	// down is set when the cluster stopped answering (probes failed, or a
	// connection attempt found it unreachable) and it has no connection:
	// the probe loop then keeps asking it, to wake the controllers as soon
	// as it answers again; announced says that has been done once.
	down, announced bool
}

// New returns a ClusterCache that reads kubeconfig Secrets through secrets
// (normally the manager's client; a working connection re-reads its Secret
// at most every SecretRecheckInterval to notice a rotated kubeconfig). Add
// it to the manager (mgr.Add) so that its health probes run and everything it
// opened is closed when the manager stops.
func New(secrets client.Reader, opts Options) (*ClusterCache, error) {
	if secrets == nil {
		return nil, errors.New("workload: New needs a reader for kubeconfig Secrets")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &ClusterCache{
		secrets:  secrets,
		opts:     opts,
		log:      opts.Logger,
		ctx:      ctx,
		cancel:   cancel,
		clusters: map[client.ObjectKey]*clusterEntry{},
	}, nil
}

// GetClient returns a client for the workload cluster of the given Cluster
// (namespace and name of the Cluster object). Reads of kinds watched in that
// cluster (see Watch) are served from its informer cache; other reads and all
// writes go to its API server. The client is built on first use and reused
// until the cluster is disconnected or its kubeconfig Secret changes.
//
// Errors matching ErrClusterNotConnected mean the cluster has no kubeconfig
// yet, has an invalid one, or is unreachable; their message says which.
func (c *ClusterCache) GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error) {
	acc, err := c.connect(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return acc.client, nil
}

// GetReader returns a reader of the workload cluster that always asks its API
// server, never the cache: for lists with field selectors (such as Pods by
// spec.nodeName) and for reads that must not be stale.
func (c *ClusterCache) GetReader(ctx context.Context, cluster client.ObjectKey) (client.Reader, error) {
	acc, err := c.connect(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return acc.reader, nil
}

// GetRESTConfig returns a copy of the rest.Config the cluster's clients use,
// for clients this package does not provide (port forwarding, etcd).
func (c *ClusterCache) GetRESTConfig(ctx context.Context, cluster client.ObjectKey) (*rest.Config, error) {
	acc, err := c.connect(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return rest.CopyConfig(acc.config), nil
}

// Disconnect closes and forgets everything about the cluster: its clients
// stop reading from the cache, its informers and watches stop, and its health
// is forgotten. Call it when the Cluster is deleted. A later GetClient
// connects afresh.
func (c *ClusterCache) Disconnect(cluster client.ObjectKey) {
	c.mu.Lock()
	e := c.clusters[cluster]
	delete(c.clusters, cluster)
	c.mu.Unlock()
	if e == nil {
		return
	}
	if acc := e.retire(); acc != nil {
		acc.stop()
		c.log.Info("Disconnected from workload cluster", "cluster", cluster.String())
	}
}

// NeedLeaderElection reports false: the cache writes nothing to the
// management cluster and must serve every runnable that needs it.
func (c *ClusterCache) NeedLeaderElection() bool { return false }

// Start runs the health probes until ctx ends, then closes every connection
// and waits for them to close. It implements manager.Runnable.
func (c *ClusterCache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("workload: ClusterCache started twice")
	}
	c.started = true
	c.mu.Unlock()
	defer c.shutdown()

	ticker := time.NewTicker(c.opts.ProbeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			c.probeAll(ctx)
		}
	}
}

func (c *ClusterCache) shutdown() {
	c.cancel()
	c.mu.Lock()
	c.stopped = true
	entries := c.clusters
	c.clusters = map[client.ObjectKey]*clusterEntry{}
	c.subs = nil
	c.mu.Unlock()

	var wg sync.WaitGroup
	for _, e := range entries {
		if acc := e.retire(); acc != nil {
			wg.Go(acc.stop)
		}
	}
	wg.Wait()
	c.subsWG.Wait()
}

// retire marks the entry unusable and takes its connection away.
func (e *clusterEntry) retire() *accessor {
	e.connectMu.Lock()
	defer e.connectMu.Unlock()
	e.removed = true
	e.mu.Lock()
	defer e.mu.Unlock()
	acc := e.acc
	e.acc = nil
	e.health.Connected = false
	return acc
}

func (c *ClusterCache) entry(key client.ObjectKey) (*clusterEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, stoppedError(key)
	}
	e := c.clusters[key]
	if e == nil {
		e = &clusterEntry{key: key}
		c.clusters[key] = e
	}
	return e, nil
}

// connect returns the cluster's live connection, building it if needed.
//
// A connection whose cluster failed its latest health probe is kept (its
// informers resume when the cluster answers again) but not handed out: what
// it would serve is what the cluster said before it went silent, and callers
// would report that as the cluster's present state.
func (c *ClusterCache) connect(ctx context.Context, key client.ObjectKey) (*accessor, error) {
	if key.Name == "" || key.Namespace == "" {
		return nil, fmt.Errorf("workload: cluster key %q needs a namespace and a name", key.String())
	}
	for {
		e, err := c.entry(key)
		if err != nil {
			return nil, err
		}
		acc, err := c.connectEntry(ctx, e)
		if err == nil && acc != nil {
			e.mu.Lock()
			unanswered := e.unanswered
			if e.acc != acc {
				unanswered = nil
			}
			e.mu.Unlock()
			if unanswered != nil {
				return nil, unanswered
			}
		}
		if e.isRemoved() {
			// Disconnected while we were connecting: start over with a
			// fresh entry rather than resurrect a forgotten one.
			if acc != nil {
				acc.stop()
			}
			if c.ctx.Err() != nil {
				return nil, stoppedError(key)
			}
			continue
		}
		return acc, err
	}
}

func (e *clusterEntry) isRemoved() bool {
	e.connectMu.Lock()
	defer e.connectMu.Unlock()
	return e.removed
}

func (c *ClusterCache) connectEntry(ctx context.Context, e *clusterEntry) (*accessor, error) {
	e.mu.Lock()
	current, readAt := e.acc, e.secretReadAt
	e.mu.Unlock()
	if current != nil && !current.isClosed() && time.Since(readAt) < c.opts.SecretRecheckInterval {
		return current, nil
	}
	data, version, err := c.readKubeconfig(ctx, e.key)
	if err != nil {
		var nc *NotConnectedError
		if errors.As(err, &nc) {
			// The Secret is gone or broken: whatever connection was built
			// from an earlier version of it must not outlive it.
			c.drop(e, nil, nc.Message)
		}
		return nil, err
	}
	hash := sha256.Sum256(data)

	e.connectMu.Lock()
	defer e.connectMu.Unlock()
	if e.removed {
		return nil, nil
	}
	if c.ctx.Err() != nil {
		return nil, stoppedError(e.key)
	}
	e.mu.Lock()
	old := e.acc
	e.mu.Unlock()
	if old != nil {
		if old.hash == hash && !old.isClosed() {
			e.mu.Lock()
			e.secretReadAt = time.Now()
			e.mu.Unlock()
			return old, nil
		}
		if old.hash != hash {
			c.log.Info("Kubeconfig Secret of workload cluster changed; reconnecting", "cluster", e.key.String(), "resourceVersion", version)
		}
		e.mu.Lock()
		if e.acc == old {
			e.acc = nil
		}
		e.mu.Unlock()
		old.stop()
	}
	if e.failedErr != nil && bytes.Equal(e.failedHash[:], hash[:]) && time.Since(e.failedAt) < c.opts.RetryInterval {
		return nil, e.failedErr
	}

	// The connection attempt is bounded by the caller and by the cache's
	// own lifetime.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()
	acc, err := newAccessor(actx, c.ctx, e.key, data, version, c.opts, c.log)
	now := time.Now()
	if err != nil {
		if ctx.Err() != nil || c.ctx.Err() != nil {
			// The caller gave up or the manager is stopping: that says
			// nothing about the cluster.
			if c.ctx.Err() != nil {
				return nil, stoppedError(e.key)
			}
			return nil, err
		}
		e.failedHash, e.failedAt, e.failedErr = hash, now, err
		var nc *NotConnectedError
		msg := err.Error()
		if errors.As(err, &nc) {
			msg = nc.Message
		}
		probed := ReasonOf(err) == ReasonUnreachable
		if probed {
			// Unreachable: the probe loop asks again, and announces the
			// cluster again once it answers.
			e.mu.Lock()
			e.down, e.announced = true, false
			e.mu.Unlock()
		}
		c.setDisconnected(e, msg, probed, now)
		c.log.Info("Cannot connect to workload cluster", "cluster", e.key.String(), "reason", string(ReasonOf(err)), "error", msg)
		return nil, err
	}
	e.failedErr = nil

	e.mu.Lock()
	was := e.health.Connected
	e.acc = acc
	e.secretReadAt = now
	e.health = Health{Connected: true, LastProbeTime: now, LastProbeSuccessTime: now}
	e.unanswered, e.down, e.announced = nil, false, false
	e.mu.Unlock()
	c.log.Info("Connected to workload cluster", "cluster", e.key.String(), "host", acc.host, "resourceVersion", version)
	if !was {
		c.notify(e.key)
	}
	return acc, nil
}

// setDisconnected records a failed connection attempt in the health.
func (c *ClusterCache) setDisconnected(e *clusterEntry, msg string, probed bool, now time.Time) {
	e.mu.Lock()
	was := e.health.Connected
	e.health.Connected = false
	e.health.Message = msg
	if probed {
		e.health.LastProbeTime = now
		e.health.ConsecutiveFailures++
	}
	e.mu.Unlock()
	if was {
		c.notify(e.key)
	}
}

// drop closes the cluster's connection (only if it is still acc, when acc is
// not nil) and records why.
func (c *ClusterCache) drop(e *clusterEntry, acc *accessor, msg string) {
	e.connectMu.Lock()
	e.mu.Lock()
	cur := e.acc
	if acc != nil && cur != acc {
		e.mu.Unlock()
		e.connectMu.Unlock()
		return
	}
	e.acc = nil
	was := e.health.Connected
	e.health.Connected = false
	e.health.Message = msg
	if e.unanswered != nil {
		// Dropped because it stopped answering: keep asking.
		e.down, e.announced = true, false
	}
	e.unanswered = nil
	e.mu.Unlock()
	e.connectMu.Unlock()
	if cur != nil {
		cur.stop()
	}
	if was {
		c.notify(e.key)
	}
}

// readKubeconfig reads the cluster's kubeconfig from its Secret.
func (c *ClusterCache) readKubeconfig(ctx context.Context, key client.ObjectKey) ([]byte, string, error) {
	name := KubeconfigSecretName(key.Name)
	secret := &corev1.Secret{}
	if err := c.secrets.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", notConnected(key, ReasonKubeconfigMissing, err,
				"its kubeconfig Secret %s/%s does not exist yet; the control plane provider creates it once the API server is up, or create it with the cluster's admin kubeconfig under the key %q",
				key.Namespace, name, KubeconfigDataKey)
		}
		return nil, "", fmt.Errorf("reading kubeconfig Secret %s/%s of workload cluster %s: %w", key.Namespace, name, key, err)
	}
	data := secret.Data[KubeconfigDataKey]
	if len(data) == 0 {
		return nil, "", notConnected(key, ReasonKubeconfigInvalid, nil,
			"its kubeconfig Secret %s/%s has no %q key; put the cluster's admin kubeconfig there",
			key.Namespace, name, KubeconfigDataKey)
	}
	return data, secret.ResourceVersion, nil
}
