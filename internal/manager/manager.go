// Package manager assembles Capstan's controllers into one
// controller-runtime manager. `capstan manager` runs it against any
// cluster; `capstan up` runs the same manager inside the embedded plane.
package manager

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"capstan.dev/capstan/internal/providers/inmemory"
	"capstan.dev/capstan/internal/providers/local"
	"capstan.dev/capstan/internal/providers/qemu"
	"capstan.dev/capstan/internal/scheme"
	"capstan.dev/capstan/internal/webhook"
)

// WatchFilterLabel marks objects for one of several Capstan managers
// sharing a management cluster: a manager started with --watch-filter=X
// reconciles only objects labelled with this label and the value X.
const WatchFilterLabel = "cluster.x-k8s.io/watch-filter"

// Options configure the manager.
type Options struct {
	// MetricsAddr serves Prometheus metrics; "0" turns them off. On a
	// loopback address they are plain HTTP; on any other, HTTPS for
	// callers the API server authenticates and authorises (see metrics.go).
	MetricsAddr string
	// MetricsCertDir holds tls.crt and tls.key for metrics served on a
	// non-loopback address; empty, a self-signed certificate is made at start.
	MetricsCertDir string
	// ProbeAddr serves /healthz and /readyz; "0" turns them off.
	ProbeAddr string
	// LeaderElection makes one of several replicas active at a time.
	LeaderElection          bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	// Namespace, when set, limits the manager to one namespace.
	Namespace string
	// WatchFilter, when set, limits the manager to objects carrying
	// WatchFilterLabel with this value.
	WatchFilter string
	// Concurrency is the number of parallel reconciles per controller name;
	// absent names get DefaultConcurrency.
	Concurrency map[string]int
	// QPS and Burst limit the manager's client to the API server.
	QPS   float32
	Burst int
	// RevisionHistoryLimit is how many old, scaled-down MachineSets each
	// MachineDeployment keeps for rollback; nil keeps the controller's default.
	RevisionHistoryLimit *int32
	// AllowRestartInProcess lets a process build a manager again after an
	// earlier one stopped (tests that restart the manager); controller names
	// are then not checked for uniqueness across managers.
	AllowRestartInProcess bool
	// Local, when set, runs the local infrastructure provider's controllers
	// (LocalCluster, LocalMachine) with these options.
	Local *local.Options
	// InMemory, when set, runs the in-memory infrastructure provider's
	// controllers (InMemoryCluster, InMemoryMachine): simulated machines
	// for scale tests and benchmarks.
	InMemory *inmemory.Options
	// QEMU, when set, runs the QEMU infrastructure provider's controllers
	// (QEMUCluster, QEMUMachine): machines that are QEMU virtual machines on
	// this host.
	QEMU *qemu.Options
	// Webhook, when set, serves Capstan's admission webhooks (topology
	// Clusters, ClusterClasses) from this manager; see package webhook.
	Webhook *webhook.Options
	// ClusterKubeconfigDir, when set, is the directory where `capstan up
	// --cluster` leaves workload clusters' kubeconfigs
	// (ClusterKubeconfigPath); a Cluster's file is removed once the Cluster
	// is gone.
	ClusterKubeconfigDir string
	// SyncPeriod is how often every object is reconciled even without
	// changes; it bounds how long a missed event can go unnoticed.
	SyncPeriod time.Duration
}

// DefaultConcurrency is the number of parallel reconciles of a controller
// the options do not name.
const DefaultConcurrency = 10

// Controller names, as used in Options.Concurrency and in metrics.
const (
	ClusterController      = "cluster"
	ClusterClassController = "clusterclass"
	// ClusterTopologyController applies the managed topology of Clusters
	// with spec.topology.
	ClusterTopologyController     = "clustertopology"
	MachineController             = "machine"
	MachineSetController          = "machineset"
	MachineDeploymentController   = "machinedeployment"
	MachinePoolController         = "machinepool"
	MachineHealthCheckController  = "machinehealthcheck"
	KubeadmControlPlaneController = "kubeadmcontrolplane"
	KubeadmConfigController       = "kubeadmconfig"
	ClusterResourceSetController  = "clusterresourceset"
	// ClusterResourceSetBindingController deletes the bindings of deleted
	// Clusters.
	ClusterResourceSetBindingController = "clusterresourcesetbinding"
	LocalClusterController              = "localcluster"
	LocalMachineController              = "localmachine"
	QEMUClusterController               = qemu.QEMUClusterController
	QEMUMachineController               = qemu.QEMUMachineController
)

// watchFilter is the label selector of the objects the manager watches:
// those labelled for it with --watch-filter; nil (everything) without one.
func (o Options) watchFilter() (labels.Selector, error) {
	if o.WatchFilter == "" {
		return nil, nil
	}
	req, err := labels.NewRequirement(WatchFilterLabel, selection.Equals, []string{o.WatchFilter})
	if err != nil {
		return nil, fmt.Errorf("--watch-filter %q: %w", o.WatchFilter, err)
	}
	return labels.NewSelector().Add(*req), nil
}

func (o Options) concurrency(name string) int {
	if n, ok := o.Concurrency[name]; ok && n > 0 {
		return n
	}
	return DefaultConcurrency
}

// New builds a manager with every Capstan controller registered.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	if o.QPS > 0 {
		cfg.QPS = o.QPS
	}
	if o.Burst > 0 {
		cfg.Burst = o.Burst
	}
	cfg.UserAgent = "capstan-manager"
	cacheOpts := cache.Options{}
	if o.SyncPeriod > 0 {
		cacheOpts.SyncPeriod = &o.SyncPeriod
	}
	if o.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{o.Namespace: {}}
	}
	filter, err := o.watchFilter()
	if err != nil {
		return nil, err
	}
	cacheOpts.DefaultLabelSelector = filter
	id := o.LeaderElectionID
	if id == "" {
		id = "capstan-manager"
	}
	metrics, err := metricsOptions(o)
	if err != nil {
		return nil, err
	}
	secrets, err := secretCache()
	if err != nil {
		return nil, err
	}
	cacheOpts.ByObject = map[client.Object]cache.ByObject{&corev1.Secret{}: secrets}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme.New(),
		NewClient:                     newClient,
		Cache:                         cacheOpts,
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              id,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: ptr.To(o.AllowRestartInProcess)},
		Client: client.Options{Cache: &client.CacheOptions{
			// Provider objects are read as unstructured; without this every
			// such read would go to the API server.
			Unstructured: true,
			// Capstan reads few ConfigMaps, one at a time; caching all of a
			// management cluster's would cost memory and widen what a
			// manager holds of other teams' data. Secrets: see secrets.go.
			DisableFor: []client.Object{&corev1.ConfigMap{}},
		}},
	})
	if err != nil {
		return nil, err
	}
	if o.ProbeAddr != "0" && o.ProbeAddr != "" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
			if !mgr.GetCache().WaitForCacheSync(req.Context()) {
				return fmt.Errorf("caches not synced")
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if err := setupControllers(context.Background(), mgr, o); err != nil {
		return nil, err
	}
	return mgr, nil
}
