package workload

import (
	"fmt"
	goruntime "runtime"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"capstan.dev/capstan/internal/scheme"
	"capstan.dev/capstan/internal/version"
)

// KubeconfigDataKey is the key of the kubeconfig in a <cluster>-kubeconfig
// Secret (Cluster API contract).
const KubeconfigDataKey = "value"

// KubeconfigSecretName is the name of the Secret, in the Cluster's namespace,
// that holds the admin kubeconfig of the named Cluster's workload cluster.
func KubeconfigSecretName(cluster string) string { return cluster + "-kubeconfig" }

// Defaults of Options.
const (
	DefaultQPS              = 20
	DefaultBurst            = 30
	DefaultTimeout          = 10 * time.Second
	DefaultProbeInterval    = 10 * time.Second
	DefaultProbeTimeout     = 5 * time.Second
	DefaultFailureThreshold = 3
	DefaultRetryInterval    = 10 * time.Second
	// DefaultSecretRecheckInterval bounds how long a rotated kubeconfig goes
	// unnoticed while a connection works.
	DefaultSecretRecheckInterval = 10 * time.Second
)

// Options configure a ClusterCache. The zero value is usable.
type Options struct {
	// Scheme maps Go types to kinds in workload clusters. Default: scheme.New().
	Scheme *runtime.Scheme
	// Logger receives the cache's logs. Default (zero value):
	// controller-runtime's logger, named "workload-cluster-cache".
	Logger logr.Logger

	// QPS and Burst limit the client-side request rate to each workload
	// cluster (per client kind: cached client, uncached reader, probe).
	QPS   float32
	Burst int
	// Timeout bounds each direct (non-watch) request to a workload cluster.
	Timeout time.Duration
	// UserAgent is sent with every request. Default names Capstan and its
	// version.
	UserAgent string

	// ProbeInterval is how often each connected cluster's API server is probed.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe (and the probe made when connecting).
	ProbeTimeout time.Duration
	// FailureThreshold is the number of consecutive failed probes after which
	// a cluster is disconnected.
	FailureThreshold int
	// RetryInterval is how long after a failed connection attempt GetClient
	// and Watch return that failure again without retrying. A changed
	// kubeconfig Secret ends the wait early.
	RetryInterval time.Duration
	// SecretRecheckInterval is how long a working connection is used before
	// its kubeconfig Secret is read again to notice a rotation. Controllers
	// ask for clients on every reconcile; re-reading the Secret each time
	// would make Secret GETs the management cluster's busiest request.
	// Negative: re-read on every call.
	SecretRecheckInterval time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Scheme == nil {
		o.Scheme = scheme.New()
	}
	if o.Logger.GetSink() == nil {
		o.Logger = ctrllog.Log.WithName("workload-cluster-cache")
	}
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.UserAgent == "" {
		o.UserAgent = fmt.Sprintf("capstan/%s (%s/%s) workload-cluster-cache", version.Version, goruntime.GOOS, goruntime.GOARCH)
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = DefaultFailureThreshold
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.SecretRecheckInterval == 0 {
		o.SecretRecheckInterval = DefaultSecretRecheckInterval
	}
	switch {
	case o.QPS < 0 || o.Burst < 0:
		return o, fmt.Errorf("workload: QPS and Burst must not be negative")
	case o.Timeout < 0 || o.ProbeInterval < 0 || o.ProbeTimeout < 0 || o.RetryInterval < 0:
		return o, fmt.Errorf("workload: durations must not be negative")
	case o.FailureThreshold < 0:
		return o, fmt.Errorf("workload: FailureThreshold must not be negative")
	}
	return o, nil
}
