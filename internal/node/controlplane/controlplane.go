package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/embedded"
)

// Ports are the loopback ports of one machine's components.
type Ports struct {
	APIServer, EtcdClient, EtcdPeer int
}

// Config describes one machine's control plane.
type Config struct {
	NodeName, ClusterName string
	// PKIDir is a kubeadm pki directory holding ca.crt/ca.key,
	// sa.key/sa.pub, front-proxy-ca.crt/key and etcd/ca.crt/key; the leaf
	// certificates are issued into it.
	PKIDir string
	// KubeconfigDir receives admin.conf, controller-manager.conf and
	// scheduler.conf (kubeadm: /etc/kubernetes).
	KubeconfigDir string
	EtcdDataDir   string
	// AdvertiseAddress is always 127.0.0.1 for now.
	AdvertiseAddress string
	// Ports are chosen and persisted by the caller.
	Ports Ports
	// ControlPlaneEndpoint is "127.0.0.1:<lb port>"; its host goes into the
	// serving certificate and admin.conf points at it.
	ControlPlaneEndpoint string
	CertSANs             []string
	// KeyAlgorithm is the algorithm of the keys the machine generates for
	// its certificates (ClusterConfiguration.encryptionAlgorithm; empty
	// means certs.DefaultKeyAlgorithm).
	KeyAlgorithm certs.KeyAlgorithm
	// ServiceSubnet and PodSubnet default to 10.96.0.0/12 and 10.244.0.0/16.
	ServiceSubnet, PodSubnet string
	// Extra arguments are passed to the components as flags, after (and so
	// over) the machine's own; an unknown flag is an error naming it.
	APIServerExtraArgs, ControllerManagerExtraArgs, SchedulerExtraArgs map[string]string
	// EtcdInitialCluster is "" to start a new single-member cluster, or etcd's
	// --initial-cluster including this member, after AddEtcdMember. It is not
	// used once the member has data.
	EtcdInitialCluster string
	Log                logr.Logger
}

// ControlPlane is a machine's running control plane.
type ControlPlane struct {
	cfg   Config
	admin *rest.Config
	etcd  *embed.Etcd

	stopAPIServer context.CancelFunc
	// apiStopped is closed when the API server returned, apiErr its error.
	apiStopped     chan struct{}
	apiErr         error
	stopComponents context.CancelFunc
	cm             *embedded.ControllerManager
	scheduler      *embedded.Scheduler

	done     chan error
	stopOnce sync.Once
	stopping chan struct{}
	// leaving is closed by Leave: from then on only etcd runs, and the
	// other components stopping is expected.
	leaveOnce sync.Once
	leaving   chan struct{}
}

// The service account issuer, as kubeadm configures it.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

func (c *Config) defaults() error {
	if c.NodeName == "" {
		return errors.New("control plane: NodeName is empty")
	}
	if c.ServiceSubnet == "" {
		c.ServiceSubnet = "10.96.0.0/12"
	}
	if c.PodSubnet == "" {
		c.PodSubnet = "10.244.0.0/16"
	}
	if c.AdvertiseAddress == "" {
		c.AdvertiseAddress = "127.0.0.1"
	}
	if c.ClusterName == "" {
		c.ClusterName = "kubernetes"
	}
	if c.ControlPlaneEndpoint == "" {
		c.ControlPlaneEndpoint = c.local()
	}
	if _, err := firstIP(c.ServiceSubnet); err != nil {
		return fmt.Errorf("service subnet %q: %w", c.ServiceSubnet, err)
	}
	if c.Ports.APIServer == 0 || c.Ports.EtcdClient == 0 || c.Ports.EtcdPeer == 0 {
		return fmt.Errorf("control plane: every port must be chosen (got %+v)", c.Ports)
	}
	return nil
}

func (c *Config) local() string {
	return net.JoinHostPort(c.AdvertiseAddress, strconv.Itoa(c.Ports.APIServer))
}

func (c *Config) etcdClientURL() url.URL {
	return url.URL{Scheme: "https", Host: net.JoinHostPort(c.AdvertiseAddress, strconv.Itoa(c.Ports.EtcdClient))}
}

func (c *Config) etcdPeerURL() url.URL {
	return url.URL{Scheme: "https", Host: net.JoinHostPort(c.AdvertiseAddress, strconv.Itoa(c.Ports.EtcdPeer))}
}

// Start issues missing certificates, writes the kubeconfigs, starts etcd and
// kube-apiserver, waits for /readyz, then starts the controllers and the
// scheduler. It returns once the API server is ready.
func Start(ctx context.Context, cfg Config) (_ *ControlPlane, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	p := pki(cfg.PKIDir)
	now := time.Now()
	if err := cfg.ensureLeaves(p, now); err != nil {
		return nil, err
	}
	ca, err := p.loadCA(clusterCA)
	if err != nil {
		return nil, err
	}
	if err := cfg.writeKubeconfigs(ca, now); err != nil {
		return nil, err
	}
	cp := &ControlPlane{cfg: cfg, done: make(chan error, 1), stopping: make(chan struct{}), leaving: make(chan struct{})}
	if cp.admin, err = clientConfig(cfg.local(), ca, certs.Request{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}, Client: true, KeyAlgorithm: cfg.KeyAlgorithm}, now); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()

	listener, err := net.Listen("tcp", net.JoinHostPort(cfg.AdvertiseAddress, strconv.Itoa(cfg.Ports.APIServer)))
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver port %d: %w", cfg.Ports.APIServer, err)
	}
	if cp.etcd, err = cfg.startEtcd(ctx, p); err != nil {
		listener.Close()
		return nil, err
	}
	// A joining member is a learner, which serves the API server nothing
	// that needs consensus: it becomes a voting member first.
	if err := promoteLearner(ctx, cp.etcd, cfg.Log); err != nil {
		listener.Close()
		return nil, err
	}

	apiCtx, stopAPI := context.WithCancel(context.Background())
	cp.stopAPIServer = stopAPI
	args := append(cfg.apiServerArgs(p), embedded.FlagArgs(cfg.APIServerExtraArgs)...)
	apiDone, err := embedded.RunAPIServer(apiCtx, args, listener, cp.admin)
	if err != nil {
		return nil, err
	}
	cp.apiStopped = make(chan struct{})
	go func() {
		cp.apiErr = <-apiDone
		close(cp.apiStopped)
	}()

	compCtx, stopComponents := context.WithCancel(context.Background())
	cp.stopComponents = stopComponents
	cmClient, err := clientConfig(cfg.local(), ca, certs.Request{CommonName: "system:kube-controller-manager", Client: true, KeyAlgorithm: cfg.KeyAlgorithm}, now)
	if err != nil {
		return nil, err
	}
	cmClient.QPS, cmClient.Burst = 20, 30
	if cp.cm, err = embedded.StartControllerManager(compCtx, embedded.ControllerManagerConfig{
		Client: cmClient,
		Args:   append(cfg.controllerManagerArgs(p), embedded.FlagArgs(cfg.ControllerManagerExtraArgs)...),
		Log:    cfg.Log.WithName("kube-controller-manager"),
	}); err != nil {
		return nil, err
	}
	if cp.scheduler, err = embedded.StartScheduler(compCtx, embedded.SchedulerConfig{
		Args: append(cfg.schedulerArgs(), embedded.FlagArgs(cfg.SchedulerExtraArgs)...),
		Log:  cfg.Log.WithName("kube-scheduler"),
	}); err != nil {
		return nil, err
	}
	go cp.watch()
	return cp, nil
}

// watch turns the first fatal failure of any component into Done. Once
// the machine leaves, only etcd's failures count: the others were stopped.
func (cp *ControlPlane) watch() {
	apiStopped, cmDone, schedulerDone := cp.apiStopped, cp.cm.Done(), cp.scheduler.Done()
	leaving := cp.leaving
	var err error
	for err == nil {
		select {
		case <-cp.stopping:
			return
		case <-leaving:
			apiStopped, cmDone, schedulerDone, leaving = nil, nil, nil, nil
		case <-apiStopped:
			err = fmt.Errorf("kube-apiserver stopped: %v", cp.apiErr)
		case e := <-cp.etcd.Err():
			err = fmt.Errorf("etcd stopped: %w", e)
		case <-cp.etcd.Server.StopNotify():
			err = errors.New("etcd stopped")
		case err = <-cmDone:
			if err == nil {
				err = errors.New("kube-controller-manager stopped")
			}
		case err = <-schedulerDone:
			if err == nil {
				err = errors.New("kube-scheduler stopped")
			}
		}
	}
	select {
	case <-cp.stopping:
		// Stop ended it; that is no failure.
	default:
		cp.done <- err
	}
}

// Leave takes the machine out of serving before its etcd member is removed:
// the scheduler and the controllers stop (their leases pass to other
// machines), then the API server shuts down gracefully — requests in flight
// finish and clients holding connections are told to go elsewhere — while
// etcd keeps running until the member is removed or the machine stops.
func (cp *ControlPlane) Leave(ctx context.Context) {
	cp.leaveOnce.Do(func() {
		close(cp.leaving)
		if cp.stopComponents != nil {
			cp.stopComponents()
		}
		if cp.stopAPIServer != nil {
			cp.stopAPIServer()
		}
	})
	if cp.apiStopped != nil {
		select {
		case <-cp.apiStopped:
		case <-ctx.Done():
		case <-time.After(60 * time.Second):
		}
	}
}

func (c *Config) startEtcd(ctx context.Context, p pki) (*embed.Etcd, error) {
	join := c.EtcdInitialCluster != ""
	if _, err := os.Stat(filepath.Join(c.EtcdDataDir, "member")); err == nil {
		// A member that has data knows its cluster; the initial-cluster
		// flags are only read on first start.
		join = false
	}
	return embedded.StartEtcd(ctx, embedded.EtcdConfig{
		Name:           c.NodeName,
		Dir:            c.EtcdDataDir,
		ClientURL:      c.etcdClientURL(),
		PeerURL:        c.etcdPeerURL(),
		ClientTLS:      transport.TLSInfo{CertFile: p.crt("etcd/server"), KeyFile: p.key("etcd/server"), TrustedCAFile: p.crt(etcdCA), ClientCertAuth: true},
		PeerTLS:        transport.TLSInfo{CertFile: p.crt("etcd/peer"), KeyFile: p.key("etcd/peer"), TrustedCAFile: p.crt(etcdCA), ClientCertAuth: true},
		InitialCluster: c.EtcdInitialCluster,
		Join:           join,
		// A joining member catches up with the leader before it serves.
		ReadyTimeout: 3 * time.Minute,
	})
}

// apiServerArgs are the flags kubeadm gives kube-apiserver, adapted to
// loopback.
func (c *Config) apiServerArgs(p pki) []string {
	return []string{
		"--advertise-address=" + c.AdvertiseAddress,
		"--bind-address=" + c.AdvertiseAddress,
		"--secure-port=" + strconv.Itoa(c.Ports.APIServer),
		"--allow-privileged=true",
		"--authorization-mode=Node,RBAC",
		"--client-ca-file=" + p.crt(clusterCA),
		"--enable-admission-plugins=NodeRestriction",
		"--enable-bootstrap-token-auth=true",
		"--etcd-servers=" + (&url.URL{Scheme: "https", Host: c.etcdClientURL().Host}).String(),
		"--etcd-cafile=" + p.crt(etcdCA),
		"--etcd-certfile=" + p.crt("apiserver-etcd-client"),
		"--etcd-keyfile=" + p.key("apiserver-etcd-client"),
		"--kubelet-client-certificate=" + p.crt("apiserver-kubelet-client"),
		// The kubelets of control-plane machines serve certificates from
		// the cluster CA; checking them keeps a process that took a dead
		// kubelet's loopback port from receiving port-forwards.
		"--kubelet-certificate-authority=" + p.crt(clusterCA),
		"--kubelet-client-key=" + p.key("apiserver-kubelet-client"),
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--proxy-client-cert-file=" + p.crt("front-proxy-client"),
		"--proxy-client-key-file=" + p.key("front-proxy-client"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-client-ca-file=" + p.crt(frontProxyCA),
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + p.path("sa.pub"),
		"--service-account-signing-key-file=" + p.path("sa.key"),
		"--service-cluster-ip-range=" + c.ServiceSubnet,
		"--tls-cert-file=" + p.crt("apiserver"),
		"--tls-private-key-file=" + p.key("apiserver"),
		// Every machine advertises 127.0.0.1, which the kubernetes Service's
		// endpoints may not hold (loopback); there is no Service network
		// behind them anyway.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
}

// controllerManagerArgs are kubeadm's kube-controller-manager flags.
func (c *Config) controllerManagerArgs(p pki) []string {
	return []string{
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--use-service-account-credentials=true",
		"--cluster-name=" + c.ClusterName,
		"--cluster-signing-cert-file=" + p.crt(clusterCA),
		"--cluster-signing-key-file=" + p.key(clusterCA),
		"--root-ca-file=" + p.crt(clusterCA),
		"--service-account-private-key-file=" + p.path("sa.key"),
		"--cluster-cidr=" + c.PodSubnet,
		"--service-cluster-ip-range=" + c.ServiceSubnet,
		"--leader-elect=true",
		"--kube-api-qps=20",
		"--kube-api-burst=30",
	}
}

func (c *Config) schedulerArgs() []string {
	return []string{
		"--kubeconfig=" + filepath.Join(c.KubeconfigDir, "scheduler.conf"),
		"--leader-elect=true",
		"--kube-api-qps=20",
		"--kube-api-burst=30",
	}
}

// kubeconfigs are the files kubeadm writes for the components and the admin.
func (c *Config) kubeconfigs() []struct {
	file, server string
	req          certs.Request
} {
	return []struct {
		file, server string
		req          certs.Request
	}{
		{"admin.conf", "https://" + c.ControlPlaneEndpoint, certs.Request{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}, Client: true, KeyAlgorithm: c.KeyAlgorithm}},
		{"controller-manager.conf", "https://" + c.local(), certs.Request{CommonName: "system:kube-controller-manager", Client: true, KeyAlgorithm: c.KeyAlgorithm}},
		{"scheduler.conf", "https://" + c.local(), certs.Request{CommonName: "system:kube-scheduler", Client: true, KeyAlgorithm: c.KeyAlgorithm}},
	}
}

// writeKubeconfigs writes the kubeconfigs that are missing; existing ones
// stay, so a client holding admin.conf keeps working across restarts.
func (c *Config) writeKubeconfigs(ca *certs.KeyPair, now time.Time) error {
	for _, k := range c.kubeconfigs() {
		path := filepath.Join(c.KubeconfigDir, k.file)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		kp, err := ca.Issue(k.req, now)
		if err != nil {
			return err
		}
		body, err := certs.Kubeconfig(k.server, c.ClusterName, k.req.CommonName, ca.CertPEM(), kp)
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(path, body, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

// clientConfig is an in-memory client identity issued by the cluster CA.
func clientConfig(hostPort string, ca *certs.KeyPair, req certs.Request, now time.Time) (*rest.Config, error) {
	kp, err := ca.Issue(req, now)
	if err != nil {
		return nil, err
	}
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: "https://" + hostPort,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: ca.CertPEM(), CertData: kp.CertPEM(), KeyData: keyPEM,
		},
		QPS: 20, Burst: 30,
	}, nil
}

// AdminConfig is a system:masters client of this machine's API server.
func (cp *ControlPlane) AdminConfig() *rest.Config { return rest.CopyConfig(cp.admin) }

// EtcdClientURL is this machine's etcd member's client URL.
func (cp *ControlPlane) EtcdClientURL() string {
	u := cp.cfg.etcdClientURL()
	return u.String()
}

// Done yields an error when a component failed on its own.
func (cp *ControlPlane) Done() <-chan error { return cp.done }

// Health reports each component: nil is healthy.
func (cp *ControlPlane) Health(ctx context.Context) map[string]error {
	h := map[string]error{}
	if cp.etcd == nil {
		h["etcd"] = errors.New("etcd is not running")
	} else if cp.etcd.Server.Leader() == types.ID(0) {
		h["etcd"] = errors.New("etcd member has no leader")
	} else {
		h["etcd"] = nil
	}
	h["kube-apiserver"] = cp.apiServerReady(ctx)
	h["kube-controller-manager"] = errors.New("kube-controller-manager is not running")
	if cp.cm != nil {
		h["kube-controller-manager"] = cp.cm.Healthy()
	}
	h["kube-scheduler"] = errors.New("kube-scheduler is not running")
	if cp.scheduler != nil {
		h["kube-scheduler"] = cp.scheduler.Healthy()
	}
	return h
}

func (cp *ControlPlane) apiServerReady(ctx context.Context) error {
	cfg := cp.AdminConfig()
	cfg.Timeout = 2 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var status int
	res := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
	if res.Error() != nil {
		return fmt.Errorf("kube-apiserver /readyz: %w", res.Error())
	}
	if status != 200 {
		return fmt.Errorf("kube-apiserver /readyz answered %d", status)
	}
	return nil
}

// Stop shuts the components down: the scheduler and the controllers (their
// leases released), then the API server (in-flight requests drained), then
// etcd. It is safe to call more than once.
func (cp *ControlPlane) Stop() {
	cp.stopOnce.Do(func() {
		close(cp.stopping)
		if cp.stopComponents != nil {
			cp.stopComponents()
			if cp.cm != nil {
				cp.cm.Wait()
			}
			if cp.scheduler != nil {
				cp.scheduler.Wait()
			}
		}
		if cp.stopAPIServer != nil {
			cp.stopAPIServer()
			if cp.apiStopped != nil {
				select {
				case <-cp.apiStopped:
				case <-time.After(60 * time.Second):
				}
			}
		}
		if cp.etcd != nil {
			cp.etcd.Close()
		}
	})
}
