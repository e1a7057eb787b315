package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/kubeadm"
	"capstan.dev/capstan/internal/node/controlplane"
	"capstan.dev/capstan/internal/node/kubelet"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

// Well-known names kubeadm uses.
const (
	labelControlPlane         = "node-role.kubernetes.io/control-plane"
	labelExcludeLoadBalancers = "node.kubernetes.io/exclude-from-external-load-balancers"
	annotationEtcdClientURLs  = "kubeadm.kubernetes.io/etcd.advertise-client-urls"
	annotationAPIEndpoint     = "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"
)

// kubeadmInit is `kubeadm init --config path`.
func (a *agent) kubeadmInit(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the kubeadm configuration: %w", err)
	}
	docs, err := kubeadm.Parse(data)
	if err != nil {
		return err
	}
	if docs.Init == nil {
		return fmt.Errorf("%s has no InitConfiguration; kubeadm init needs one", path)
	}
	a.report(docs)
	if a.cp != nil {
		// Already started from the saved state (a restart between the start
		// and the journal entry): the cluster exists, make sure of its objects.
		return a.initObjects(ctx, &docs.Init.ClusterConfiguration)
	}
	if err := a.saveConfig(data); err != nil {
		return err
	}
	a.st.Role = RoleControlPlane
	a.st.NodeName = a.nodeName(docs.Init.NodeRegistration.Name)
	a.st.Version = docs.Init.KubernetesVersion
	if err := a.ensurePorts(); err != nil {
		return err
	}
	if err := a.st.save(a.root); err != nil {
		return err
	}
	cc := &docs.Init.ClusterConfiguration
	if err := a.startControlPlane(ctx, cc, ""); err != nil {
		return err
	}
	if err := a.initObjects(ctx, cc); err != nil {
		return err
	}
	n, err := createBootstrapTokens(ctx, a.cp.AdminConfig(), docs.Init.BootstrapTokens)
	if err != nil {
		return err
	}
	if n > 0 {
		a.log.Info("Created bootstrap tokens from the InitConfiguration", "count", n)
	}
	if err := a.startControlPlaneKubelet(docs.Init.NodeRegistration, docs.Init.LocalAPIEndpoint.BindPort); err != nil {
		return err
	}
	return a.markStarted()
}

func (a *agent) report(docs kubeadm.Documents) {
	for _, ig := range docs.Ignored {
		a.log.Info("Kubeadm configuration document ignored", "document", ig)
	}
	for _, w := range docs.Warnings {
		a.log.Info("Kubeadm configuration warning", "warning", w)
	}
}

func (a *agent) nodeName(fromConfig string) string {
	if fromConfig != "" {
		return fromConfig
	}
	return a.id.Hostname
}

func (a *agent) markStarted() error {
	a.st.Started = true
	return a.st.save(a.root)
}

// saveConfig keeps the kubeadm configuration for restarts.
func (a *agent) saveConfig(data []byte) error {
	p, _ := hostPath(a.root, configCopy)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, data, 0o600)
}

func (a *agent) loadConfig() (kubeadm.Documents, error) {
	p, _ := hostPath(a.root, configCopy)
	data, err := os.ReadFile(p)
	if err != nil {
		return kubeadm.Documents{}, fmt.Errorf("reading the saved kubeadm configuration: %w", err)
	}
	return kubeadm.Parse(data)
}

func (a *agent) ensurePorts() error {
	if a.st.Ports != nil {
		return nil
	}
	p, err := freePorts(3)
	if err != nil {
		return err
	}
	a.st.Ports = &Ports{APIServer: p[0], EtcdClient: p[1], EtcdPeer: p[2]}
	return nil
}

func (a *agent) apiServerAddress() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.st.Ports.APIServer))
}

// machinePath resolves a path kubeadm's configuration names (certificatesDir,
// etcd dataDir) under the machine root, with kubeadm's default.
func (a *agent) machinePath(p, def string) (string, error) {
	if p == "" {
		p = def
	}
	return hostPath(a.root, p)
}

// startControlPlane starts etcd and the control-plane components and
// publishes the API server once it is ready.
func (a *agent) startControlPlane(ctx context.Context, cc *kubeadmapi.ClusterConfiguration, initialCluster string) error {
	pki, err := a.machinePath(cc.CertificatesDir, "/etc/kubernetes/pki")
	if err != nil {
		return fmt.Errorf("ClusterConfiguration.certificatesDir: %w", err)
	}
	etcdDir := "/var/lib/etcd"
	if cc.Etcd.Local != nil && cc.Etcd.Local.DataDir != "" {
		etcdDir = cc.Etcd.Local.DataDir
	}
	if cc.Etcd.External != nil {
		return fmt.Errorf("ClusterConfiguration.etcd.external is not supported on a local machine; use local etcd")
	}
	etcdData, err := hostPath(a.root, etcdDir)
	if err != nil {
		return fmt.Errorf("ClusterConfiguration.etcd.local.dataDir: %w", err)
	}
	endpoint := cc.ControlPlaneEndpoint
	if endpoint == "" {
		endpoint = a.apiServerAddress()
	} else {
		a.endpoint = endpoint
	}
	a.keyAlgorithm = keyAlgorithm(cc)
	cfg := controlplane.Config{
		NodeName:                   a.st.NodeName,
		ClusterName:                cc.ClusterName,
		PKIDir:                     pki,
		KubeconfigDir:              filepath.Join(a.root, "etc", "kubernetes"),
		EtcdDataDir:                etcdData,
		AdvertiseAddress:           "127.0.0.1",
		Ports:                      controlplane.Ports{APIServer: a.st.Ports.APIServer, EtcdClient: a.st.Ports.EtcdClient, EtcdPeer: a.st.Ports.EtcdPeer},
		ControlPlaneEndpoint:       endpoint,
		CertSANs:                   cc.APIServer.CertSANs,
		KeyAlgorithm:               a.keyAlgorithm,
		ServiceSubnet:              cc.Networking.ServiceSubnet,
		PodSubnet:                  cc.Networking.PodSubnet,
		APIServerExtraArgs:         kubeadm.ArgsMap(cc.APIServer.ExtraArgs),
		ControllerManagerExtraArgs: kubeadm.ArgsMap(cc.ControllerManager.ExtraArgs),
		SchedulerExtraArgs:         kubeadm.ArgsMap(cc.Scheduler.ExtraArgs),
		EtcdInitialCluster:         initialCluster,
		Log:                        a.log.WithName("controlplane"),
	}
	a.log.Info("Starting the control plane", "apiServerPort", cfg.Ports.APIServer, "etcdClientPort", cfg.Ports.EtcdClient, "joiningEtcd", initialCluster != "")
	// kubeadm's default timeoutForControlPlane is 4 minutes.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(sctx, cfg)
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	a.cp = cp
	a.setStatus(func(s *machinedir.Status) {
		s.APIServerPort = a.st.Ports.APIServer
		s.EtcdClientURL = cp.EtcdClientURL()
	})
	if err := a.publishEndpoint(); err != nil {
		return err
	}
	a.log.Info("Control plane ready", "apiServer", a.apiServerAddress())
	return nil
}

// leaveLoadBalancer answers the Node's leave-load-balancer annotation: no
// new connections reach this API server once the load balancer re-read the
// directory, which it does within its check period.
//
// Connections the load balancer already made stay open, and clients keep
// using them; so the API server then shuts down gracefully, which finishes
// the requests in flight and sends the clients elsewhere, before the
// machine answers and its etcd member may be removed.
func (a *agent) leaveLoadBalancer(ctx context.Context) error {
	a.log.Info("Leaving the load balancer")
	a.removeEndpoint()
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	if a.cp != nil {
		a.cp.Leave(ctx)
		a.log.Info("API server stopped; only etcd runs until the machine is removed")
	}
	return nil
}

// startControlPlaneKubelet runs the kubelet of a control-plane machine with
// a node credential minted from the cluster CA, against its own API server.
//
// bindPort is the port kubeadm's configuration binds the API server to (0:
// kubeadm's 6443); the machine's API server listens on a port of its own,
// and a port-forward to its Pod on either arrives there.
func (a *agent) startControlPlaneKubelet(reg kubeadmapi.NodeRegistrationOptions, bindPort int32) error {
	ca, err := a.loadCA()
	if err != nil {
		return err
	}
	// The kubelet reaches the cluster through the control-plane endpoint,
	// not its own API server, which stops when the machine leaves.
	server := "https://" + a.apiServerAddress()
	if a.endpoint != "" {
		server = "https://" + a.endpoint
	}
	nodeCfg, err := clientConfig(ca, a.keyAlgorithm, server, "system:node:"+a.st.NodeName, []string{"system:nodes"}, 0)
	if err != nil {
		return err
	}
	labels := nodeLabels(reg)
	labels[labelControlPlane] = ""
	labels[labelExcludeLoadBalancers] = ""
	taints := reg.Taints
	if taints == nil {
		taints = []corev1.Taint{{Key: labelControlPlane, Effect: corev1.TaintEffectNoSchedule}}
	}
	health := func(component string) func(context.Context) error {
		return func(ctx context.Context) error {
			if a.cp == nil {
				return fmt.Errorf("%s is not running", component)
			}
			return a.cp.Health(ctx)[component]
		}
	}
	// The static Pods' well-known ports lead to where this machine's
	// components listen: a port-forward to etcd-<node> port 2379 (how
	// KubeadmControlPlane reaches etcd) arrives at this member.
	etcdClient := net.JoinHostPort("127.0.0.1", strconv.Itoa(a.st.Ports.EtcdClient))
	pods := []kubelet.StaticPod{
		{Component: "etcd", Healthy: health("etcd"), Annotations: map[string]string{annotationEtcdClientURLs: a.cp.EtcdClientURL()},
			Ports: map[int32]string{etcdClientPort: etcdClient}},
		{Component: "kube-apiserver", Healthy: health("kube-apiserver"), Annotations: map[string]string{annotationAPIEndpoint: a.apiServerAddress()},
			Ports: map[int32]string{apiServerBindPort: a.apiServerAddress()}},
		{Component: "kube-controller-manager", Healthy: health("kube-controller-manager")},
		{Component: "kube-scheduler", Healthy: health("kube-scheduler")},
	}
	if bindPort != 0 {
		pods[1].Ports[bindPort] = a.apiServerAddress()
	}
	api, err := kubeletServer(ca, a.keyAlgorithm, a.st.NodeName)
	if err != nil {
		return err
	}
	a.startKubelet(kubelet.Options{
		Config:       nodeCfg,
		ProviderID:   kubeletArg(reg, "provider-id"),
		LabelsClient: a.labelsClient(),
		Labels:       labels,
		Taints:       taints,
		StaticPods:   pods,
		OnLeave:      a.leaveLoadBalancer,
		Server:       api,
	})
	return nil
}

// The ports kubeadm's etcd and kube-apiserver listen on by default.
const (
	etcdClientPort    = 2379
	apiServerBindPort = 6443
)

// kubeletServer is how a control-plane machine's kubelet serves its API: a
// serving certificate from the cluster CA for the node's address (the API
// server verifies it with --kubelet-certificate-authority), and callers
// authenticated by client certificates from the same CA, in practice the
// API server's kubelet client certificate. A worker has no CA key to issue
// a serving certificate with, and no static Pods to forward to.
func kubeletServer(ca *certs.KeyPair, alg certs.KeyAlgorithm, nodeName string) (*kubelet.ServerOptions, error) {
	kp, err := ca.Issue(certs.Request{
		CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"},
		DNSNames: []string{nodeName, "localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Server: true, KeyAlgorithm: alg,
	}, time.Now())
	if err != nil {
		return nil, fmt.Errorf("issuing the kubelet's serving certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &kubelet.ServerOptions{
		Certificate: tls.Certificate{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert},
		ClientCAs:   pool,
	}, nil
}

func (a *agent) loadCA() (*certs.KeyPair, error) {
	pki := filepath.Join(a.root, "etc", "kubernetes", "pki")
	ca, err := certs.Load(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		return nil, fmt.Errorf("loading the cluster CA (the bootstrap data writes /etc/kubernetes/pki/ca.crt and ca.key on control-plane machines): %w", err)
	}
	return ca, nil
}

// keyAlgorithm is the algorithm of the keys kubeadm makes for the cluster
// cc describes. kubeadm's own accessor is used because it also honours the
// older PublicKeysECDSA feature gate that v1beta3 configurations use.
func keyAlgorithm(cc *kubeadmapi.ClusterConfiguration) certs.KeyAlgorithm {
	return certs.KeyAlgorithm(cc.EncryptionAlgorithmType())
}

// clientConfig mints a client certificate with a key of algorithm alg from
// the CA and returns a rest.Config using it; lifetime 0 means the certs
// package default.
func clientConfig(ca *certs.KeyPair, alg certs.KeyAlgorithm, server, user string, groups []string, lifetime time.Duration) (*rest.Config, error) {
	kp, err := ca.Issue(certs.Request{CommonName: user, Organization: groups, Client: true, Lifetime: lifetime, KeyAlgorithm: alg}, time.Now())
	if err != nil {
		return nil, fmt.Errorf("issuing a client certificate for %s: %w", user, err)
	}
	key, err := kp.KeyPEM()
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: ca.CertPEM(), CertData: kp.CertPEM(), KeyData: key,
		},
		QPS: 20, Burst: 40,
	}, nil
}

// nodeLabels are the labels the kubelet's --node-labels would set.
func nodeLabels(reg kubeadmapi.NodeRegistrationOptions) map[string]string {
	labels := map[string]string{}
	for _, kv := range strings.Split(kubeletArg(reg, "node-labels"), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if k != "" {
			labels[k] = v
		}
	}
	return labels
}

// kubeletArg is the value of one of the kubelet's extra arguments ("" when
// absent); the last one given wins, as with the kubelet's own flags.
func kubeletArg(reg kubeadmapi.NodeRegistrationOptions, name string) string {
	var v string
	for _, arg := range reg.KubeletExtraArgs {
		if strings.TrimLeft(arg.Name, "-") == name {
			v = arg.Value
		}
	}
	return v
}

// startKubelet runs the simulated kubelet in the background; its failure
// is fatal to the machine.
func (a *agent) startKubelet(o kubelet.Options) {
	o.NodeName = a.st.NodeName
	if o.ProviderID == "" {
		o.ProviderID = a.id.ProviderID
	}
	o.KubeletVersion = a.id.Version
	if o.KubeletVersion == "" {
		o.KubeletVersion = a.st.Version
	}
	o.Address = "127.0.0.1"
	// Capstan's manager Pod runs as a process under the machine's "/".
	o.RootDir, o.LocalDir = a.root, a.localDir
	o.Log = a.log.WithName("kubelet")
	ctx, cancel := context.WithCancel(context.Background())
	a.kubeletCancel = cancel
	a.kubeletDone = make(chan struct{})
	a.log.Info("Starting the kubelet", "node", o.NodeName)
	go func() {
		defer close(a.kubeletDone)
		err := kubelet.Run(ctx, o)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = fmt.Errorf("the kubelet stopped")
		}
		a.fatal <- fmt.Errorf("kubelet: %w", err)
	}()
}

// labelsClient is the admin identity the kubelet sets restricted labels
// with, through the control-plane endpoint when there is one.
func (a *agent) labelsClient() *rest.Config {
	cfg := a.cp.AdminConfig()
	if a.endpoint != "" {
		cfg.Host = "https://" + a.endpoint
	}
	return cfg
}
