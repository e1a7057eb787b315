package workload

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// accessor is one live connection to one workload cluster, built from one
// version of its kubeconfig: clients, an informer cache and the watches
// started in it. It is replaced, never repaired: when the kubeconfig changes
// or the cluster stops answering, it is stopped and a new one is built on next
// use.
type accessor struct {
	key     client.ObjectKey
	hash    [sha256.Size]byte // of the kubeconfig it was built from
	version string            // resourceVersion of that Secret, for logs
	host    string

	config    *rest.Config
	transport http.RoundTripper // shared by every client below
	probe     rest.Interface
	cache     *guardedCache
	client    client.Client // cached reads for watched kinds, direct otherwise
	reader    client.Client // always direct

	ctx       context.Context // cancelled by stop
	cancel    context.CancelFunc
	cacheDone chan struct{}

	// watchMu serialises Watch calls, so a watch name is started once.
	watchMu sync.Mutex
	watches map[string]struct{}

	mu       sync.Mutex
	closed   bool
	cleanups []func()
}

// parseKubeconfig turns kubeconfig bytes into the rest.Config every client of
// the cluster uses.
func parseKubeconfig(key client.ObjectKey, data []byte, opts Options) (*rest.Config, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, notConnected(key, ReasonKubeconfigInvalid, err,
			"the %q key of Secret %s/%s is not a valid kubeconfig (%v); replace it with the workload cluster's admin kubeconfig",
			KubeconfigDataKey, key.Namespace, KubeconfigSecretName(key.Name), err)
	}
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	cfg.Timeout = opts.Timeout
	cfg.UserAgent = opts.UserAgent
	// A Proxy function makes client-go build a transport for this config
	// alone instead of keeping one in its process-wide cache forever; the
	// accessor closes it when it stops.
	if cfg.Proxy == nil {
		cfg.Proxy = http.ProxyFromEnvironment
	}
	return cfg, nil
}

// newAccessor connects to a workload cluster: it builds the clients, probes
// the API server once (so an unreachable cluster is reported at once rather
// than by a read hanging) and starts the informer cache.
func newAccessor(ctx, parent context.Context, key client.ObjectKey, data []byte, version string, opts Options, log logr.Logger) (*accessor, error) {
	cfg, err := parseKubeconfig(key, data, opts)
	if err != nil {
		return nil, err
	}
	invalid := func(err error) error { return unusableKubeconfig(key, err) }
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, invalid(err)
	}
	a := &accessor{
		key:       key,
		hash:      sha256.Sum256(data),
		version:   version,
		host:      cfg.Host,
		config:    cfg,
		transport: transport,
		cacheDone: make(chan struct{}),
		watches:   map[string]struct{}{},
	}
	// Requests are bounded by cfg.Timeout; watches must not be, so the
	// informers get a client without one over the same connections.
	direct := &http.Client{Transport: transport, Timeout: cfg.Timeout}
	streaming := &http.Client{Transport: transport}
	ok := false
	defer func() {
		if !ok {
			utilnet.CloseIdleConnectionsFor(transport)
		}
	}()

	disco, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, direct)
	if err != nil {
		return nil, invalid(err)
	}
	a.probe = disco.RESTClient()
	if err := ping(ctx, a.probe, opts.ProbeTimeout); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, unreachable(key, cfg.Host, err, opts)
	}

	mapper, err := apiutil.NewDynamicRESTMapper(cfg, direct)
	if err != nil {
		return nil, invalid(err)
	}
	a.reader, err = client.New(cfg, client.Options{HTTPClient: direct, Scheme: opts.Scheme, Mapper: mapper})
	if err != nil {
		return nil, invalid(err)
	}
	clog := log.WithValues("cluster", key.String())
	informers, err := cache.New(cfg, cache.Options{
		HTTPClient: streaming,
		Scheme:     opts.Scheme,
		Mapper:     mapper,
		// Only kinds someone watches are cached; the client reads the rest
		// directly instead of silently starting an informer per kind read.
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            cache.TransformStripManagedFields(),
		DefaultWatchErrorHandler: func(_ context.Context, r *toolscache.Reflector, err error) {
			clog.V(1).Info("Watch of workload cluster failed; retrying", "reflector", r.TypeDescription(), "error", err.Error())
		},
	})
	if err != nil {
		return nil, invalid(err)
	}
	a.ctx, a.cancel = context.WithCancel(parent)
	a.cache = &guardedCache{Cache: informers, acc: a}
	a.client, err = client.New(cfg, client.Options{
		HTTPClient: direct,
		Scheme:     opts.Scheme,
		Mapper:     mapper,
		Cache: &client.CacheOptions{
			Reader:       routingReader{cached: a.cache, direct: a.reader},
			Unstructured: true,
		},
	})
	if err != nil {
		a.cancel()
		return nil, invalid(err)
	}
	go func() {
		defer close(a.cacheDone)
		if err := informers.Start(a.ctx); err != nil {
			clog.Error(err, "Informer cache of workload cluster stopped")
		}
	}()
	ok = true
	return a, nil
}

func unusableKubeconfig(key client.ObjectKey, err error) *NotConnectedError {
	return notConnected(key, ReasonKubeconfigInvalid, err,
		"cannot build a client from the kubeconfig in Secret %s/%s (%v); fix its %q key",
		key.Namespace, KubeconfigSecretName(key.Name), err, KubeconfigDataKey)
}

func unreachable(key client.ObjectKey, host string, err error, opts Options) *NotConnectedError {
	return notConnected(key, ReasonUnreachable, err,
		"its API server at %s did not answer a health probe (%v); check that the control plane is running and reachable from the manager at the address in Secret %s/%s (connection attempts pause for %s)",
		host, err, key.Namespace, KubeconfigSecretName(key.Name), opts.RetryInterval)
}

// ping asks the API server for its root path, which every conformant API
// server answers; /readyz is optional (upstream's simulated API servers do
// not serve it) and would report a healthy server as unreachable.
//
// A probe is one attempt: client-go's retries of a GET that met a closed
// connection would spend the probe's time in backoff and then report the
// expired deadline (as a rate limiter error) instead of what went wrong.
func ping(ctx context.Context, probe rest.Interface, timeout time.Duration) error {
	_, err := probe.Get().AbsPath("/").Timeout(timeout).MaxRetries(0).DoRaw(ctx)
	if err != nil {
		return probeError(err, timeout)
	}
	return nil
}

// probeError names the kind of failure in front of a failed probe's error,
// so that a condition tells a refused connection from a timeout or a TLS
// failure at a glance.
func probeError(err error, timeout time.Duration) error {
	var (
		netErr      net.Error
		certInvalid x509.CertificateInvalidError
		unknownCA   x509.UnknownAuthorityError
		hostname    x509.HostnameError
		verify      *tls.CertificateVerificationError
		record      tls.RecordHeaderError
	)
	kind := ""
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		kind = "connection refused"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		kind = fmt.Sprintf("timeout: no answer within %s", timeout)
	case errors.As(err, &certInvalid), errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &verify), errors.As(err, &record):
		kind = "TLS handshake failed"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		kind = "connection closed by the server"
	}
	if kind == "" {
		return err
	}
	return fmt.Errorf("%s: %w", kind, err)
}

func (a *accessor) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// onStop registers f to run when the accessor stops; it reports false (and
// does not register f) when the accessor has already stopped.
func (a *accessor) onStop(f func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.cleanups = append(a.cleanups, f)
	return true
}

// stop closes the connection: informers and their watches end, event
// handlers are released, idle connections are closed. It waits for the
// informers to finish and is safe to call more than once.
func (a *accessor) stop() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		<-a.cacheDone
		return
	}
	a.closed = true
	cleanups := a.cleanups
	a.cleanups = nil
	a.mu.Unlock()

	for _, f := range cleanups {
		f()
	}
	a.cancel()
	<-a.cacheDone
	utilnet.CloseIdleConnectionsFor(a.transport)
}

// guardedCache is the accessor's informer cache as seen by clients and
// sources: once the accessor stops, calls fail at once with a
// NotConnectedError instead of blocking on informers that will never sync.
type guardedCache struct {
	cache.Cache
	acc *accessor
}

// bind returns ctx, also cancelled when the accessor stops.
func (g *guardedCache) bind(ctx context.Context) (context.Context, func(), error) {
	if g.acc.ctx.Err() != nil {
		return nil, nil, droppedError(g.acc.key)
	}
	ctx, cancel := context.WithCancel(ctx)
	release := context.AfterFunc(g.acc.ctx, cancel)
	return ctx, func() { release(); cancel() }, nil
}

func (g *guardedCache) result(err error) error {
	if err != nil && g.acc.ctx.Err() != nil {
		return droppedError(g.acc.key)
	}
	return err
}

func (g *guardedCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ctx, done, err := g.bind(ctx)
	if err != nil {
		return err
	}
	defer done()
	return g.result(g.Cache.Get(ctx, key, obj, opts...))
}

func (g *guardedCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	ctx, done, err := g.bind(ctx)
	if err != nil {
		return err
	}
	defer done()
	return g.result(g.Cache.List(ctx, list, opts...))
}

func (g *guardedCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	ctx, done, err := g.bind(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	i, err := g.Cache.GetInformer(ctx, obj, opts...)
	return i, g.result(err)
}

// routingReader reads from the cache the kinds it has an informer for and
// from the API server everything else.
type routingReader struct {
	cached client.Reader
	direct client.Reader
}

func notCached(err error) bool {
	var nc *cache.ErrResourceNotCached
	return errors.As(err, &nc)
}

func (r routingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.cached.Get(ctx, key, obj, opts...)
	if notCached(err) {
		return r.direct.Get(ctx, key, obj, opts...)
	}
	return err
}

func (r routingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := r.cached.List(ctx, list, opts...)
	if notCached(err) {
		return r.direct.List(ctx, list, opts...)
	}
	return err
}
