package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/providers/inmemory"
	"capstan.dev/capstan/internal/providers/local"
	"capstan.dev/capstan/internal/providers/qemu"
	"capstan.dev/capstan/internal/webhook"
)

func newManagerCommand() *cobra.Command {
	var (
		o               manager.Options
		kubeconfig      string
		concurrency     []string
		revisionHistory int32
		localDir        string
		qemuDir         string
		qemuImageCache  string
		inMemory        bool
		hooks           = webhook.Options{Namespace: deploy.Namespace}
	)
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run Capstan's controllers against a management cluster",
		Long: `Run every Capstan controller against the management cluster named by
--kubeconfig (or the in-cluster configuration when run as a Pod). Start several
replicas with --leader-elect for high availability.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New())
			var err error
			if o.Concurrency, err = parseConcurrency(concurrency); err != nil {
				return err
			}
			if cmd.Flags().Changed("revision-history-limit") {
				if revisionHistory < 0 {
					return fmt.Errorf("--revision-history-limit %d: want 0 or more", revisionHistory)
				}
				o.RevisionHistoryLimit = &revisionHistory
			}
			if localDir != "" {
				o.Local = &local.Options{Dir: localDir}
			}
			if inMemory {
				o.InMemory = &inmemory.Options{}
			}
			if qemuDir != "" {
				o.QEMU = &qemu.Options{Dir: qemuDir, ImageCacheDir: qemuImageCache}
			}
			if hooks.BindAddress != "0" {
				o.Webhook = &hooks
			}
			cfg, err := managementConfig(kubeconfig)
			if err != nil {
				return fmt.Errorf("no management cluster to talk to: %w; pass --kubeconfig", err)
			}
			mgr, err := manager.New(cfg, o)
			if err != nil {
				return err
			}
			return mgr.Start(ctrl.SetupSignalHandler())
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the management cluster (default: $KUBECONFIG, then in-cluster)")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", manager.DefaultMetricsAddr, "address of the Prometheus metrics endpoint; 0 turns it off. Off loopback (e.g. :8443) it serves HTTPS to callers the API server authenticates and allows GET /metrics")
	f.StringVar(&o.MetricsCertDir, "metrics-cert-dir", "", "directory with tls.crt and tls.key for metrics served off loopback (default: a self-signed certificate made at start)")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", manager.DefaultProbeAddr, "address of the /healthz and /readyz endpoints (plain HTTP, no authentication: keep it on loopback or a Pod's network); 0 turns them off")
	f.BoolVar(&o.LeaderElection, "leader-elect", false, "elect one active replica among several")
	f.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the Pod's namespace)")
	f.StringVar(&o.LeaderElectionID, "leader-election-id", "capstan-manager", "name of the leader election Lease")
	f.StringVar(&o.Namespace, "namespace", "", "reconcile only objects in this namespace (default: all)")
	f.StringVar(&o.WatchFilter, "watch-filter", "", "reconcile only objects labelled "+manager.WatchFilterLabel+"=<value>")
	f.StringSliceVar(&concurrency, "concurrency", nil, "parallel reconciles per controller, e.g. machine=20,cluster=5 (default "+strconv.Itoa(manager.DefaultConcurrency)+" each)")
	f.Float32Var(&o.QPS, "kube-api-qps", 50, "queries per second the manager may make to the API server")
	f.IntVar(&o.Burst, "kube-api-burst", 100, "burst of queries above --kube-api-qps")
	f.Int32Var(&revisionHistory, "revision-history-limit", plan.DefaultRevisionHistoryLimit, "old, scaled-down MachineSets each MachineDeployment keeps for rollback")
	f.StringVar(&localDir, "local-dir", "", "run the local infrastructure provider, keeping its machines under this directory (off when empty)")
	f.StringVar(&qemuDir, "qemu-dir", "", "run the QEMU infrastructure provider, keeping its virtual machines, load balancers and guest image under this directory (off when empty)")
	f.StringVar(&qemuImageCache, "qemu-image-cache", "", "with --qemu-dir, the directory of built guest images (default <qemu-dir>/_images)")
	f.BoolVar(&inMemory, "in-memory", false, "run the in-memory infrastructure provider: simulated machines, whose API servers listen on 127.0.0.1")
	f.StringVar(&hooks.BindAddress, "webhook-bind-address", "127.0.0.1:0", "address the admission webhooks listen on (port 0: any free port); 0 turns them off, and with them the checks of topology Clusters and ClusterClasses")
	f.StringVar(&hooks.Service, "webhook-service", "", "Service in --webhook-namespace (port 443) through which the API server reaches the webhooks; unset, it dials https://127.0.0.1:<port> (an API server on this host)")
	f.StringVar(&hooks.Namespace, "webhook-namespace", deploy.Namespace, "namespace of the webhooks' certificate Secret and Service")
	f.DurationVar(&o.SyncPeriod, "sync-period", 10*time.Minute, "how often every object is reconciled without a change")
	return cmd
}

// managementConfig loads --kubeconfig, else $KUBECONFIG, else the Pod's
// in-cluster configuration.
func managementConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return ctrl.GetConfig()
}

func parseConcurrency(pairs []string) (map[string]int, error) {
	known := map[string]bool{
		manager.ClusterController: true, manager.ClusterClassController: true, manager.MachineController: true,
		manager.MachineSetController: true, manager.MachineDeploymentController: true, manager.MachinePoolController: true,
		manager.MachineHealthCheckController: true, manager.KubeadmConfigController: true,
		manager.KubeadmControlPlaneController: true, manager.LocalClusterController: true,
		manager.LocalMachineController: true, inmemory.InMemoryClusterController: true,
		inmemory.InMemoryMachineController: true, manager.ClusterResourceSetController: true,
		manager.ClusterResourceSetBindingController: true,
	}
	out := map[string]int{}
	for _, p := range pairs {
		name, value, ok := strings.Cut(p, "=")
		n, err := strconv.Atoi(value)
		if !ok || err != nil || n < 1 {
			return nil, fmt.Errorf("--concurrency %q: want <controller>=<positive number>", p)
		}
		if !known[name] {
			return nil, fmt.Errorf("--concurrency %q: unknown controller %q", p, name)
		}
		out[name] = n
	}
	return out, nil
}
