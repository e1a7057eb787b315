package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/cluster-bootstrap/token/jws"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/kubeadm"
	"capstan.dev/capstan/internal/node/controlplane"
	"capstan.dev/capstan/internal/node/kubelet"
)

// defaultDiscoveryTimeout is kubeadm's discovery timeout default.
const defaultDiscoveryTimeout = 5 * time.Minute

// kubeadmJoin is `kubeadm join --config path`.
func (a *agent) kubeadmJoin(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the kubeadm configuration: %w", err)
	}
	docs, err := kubeadm.Parse(data)
	if err != nil {
		return err
	}
	if docs.Join == nil {
		return fmt.Errorf("%s has no JoinConfiguration; kubeadm join needs one", path)
	}
	a.report(docs)
	if a.st.Started {
		// Started from the saved state before the journal recorded the join.
		return nil
	}
	join := docs.Join
	a.st.NodeName = a.nodeName(join.NodeRegistration.Name)
	a.st.Joined = true
	caPEM, server, err := a.discover(ctx, join.Discovery)
	if err != nil {
		return err
	}
	a.st.Server = server
	if join.ControlPlane != nil {
		return a.joinControlPlane(ctx, data, join, caPEM, server)
	}
	if err := a.saveConfig(data); err != nil {
		return err
	}
	a.st.Role = RoleWorker
	if a.id.Version == "" {
		a.st.Version = a.clusterVersion(ctx, join, caPEM, server)
	}
	if err := atomicfile.WriteFile(filepath.Join(a.root, "etc", "kubernetes", "pki", "ca.crt"), caPEM, 0o644); err != nil {
		return err
	}
	if err := a.st.save(a.root); err != nil {
		return err
	}
	if err := a.startWorkerKubelet(ctx, join, caPEM); err != nil {
		return err
	}
	return a.markStarted()
}

// clusterVersion reads the cluster's Kubernetes version from
// kube-system/kubeadm-config with the bootstrap token, which kubeadm's RBAC
// lets joining nodes read. It is "" when that fails: the version is only
// what the Node reports.
func (a *agent) clusterVersion(ctx context.Context, join *kubeadmapi.JoinConfiguration, caPEM []byte, server string) string {
	token := join.Discovery.TLSBootstrapToken
	if token == "" && join.Discovery.BootstrapToken != nil {
		token = join.Discovery.BootstrapToken.Token
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: server, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, Timeout: 10 * time.Second})
	if err != nil {
		return ""
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, kubeadmConfigMap, metav1.GetOptions{})
	if err != nil {
		a.log.Info("Could not read the cluster's version; the Node reports none", "error", err.Error())
		return ""
	}
	docs, err := kubeadm.Parse([]byte(cm.Data["ClusterConfiguration"]))
	if err != nil || docs.Cluster == nil {
		a.log.Info("Could not read the cluster's version; the Node reports none", "error", fmt.Sprint(err))
		return ""
	}
	return docs.Cluster.KubernetesVersion
}

// discover finds the cluster the way kubeadm's token discovery does: read
// kube-public/cluster-info without trusting the server, accept its CA only
// if it matches a pinned hash, then read it again over verified TLS. It
// returns the CA bundle and the API server URL from cluster-info.
func (a *agent) discover(ctx context.Context, d kubeadmapi.Discovery) ([]byte, string, error) {
	bt := d.BootstrapToken
	if bt == nil {
		return nil, "", errors.New("JoinConfiguration.discovery.bootstrapToken is required: file discovery is not supported on a local machine")
	}
	if bt.APIServerEndpoint == "" {
		return nil, "", errors.New("JoinConfiguration.discovery.bootstrapToken.apiServerEndpoint is required")
	}
	if len(bt.CACertHashes) == 0 && !bt.UnsafeSkipCAVerification {
		return nil, "", errors.New("JoinConfiguration.discovery.bootstrapToken: set caCertHashes (or unsafeSkipCAVerification: true) so the cluster CA can be trusted")
	}
	timeout := defaultDiscoveryTimeout
	if d.Timeout != nil && d.Timeout.Duration > 0 {
		timeout = d.Timeout.Duration
	}
	tokenID, tokenSecret, ok := strings.Cut(bt.Token, ".")
	if !ok || tokenID == "" || tokenSecret == "" {
		return nil, "", errors.New("JoinConfiguration.discovery.bootstrapToken.token is not a bootstrap token (<id>.<secret>)")
	}
	endpoint := "https://" + bt.APIServerEndpoint
	a.log.Info("Discovering the cluster", "endpoint", bt.APIServerEndpoint)

	var caPEM []byte
	var server string
	var last error
	// Attempts run under ctx, not the poll's deadline, so the last error
	// reported is a real answer rather than the deadline cutting a request.
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		fail := func(err error) (bool, error) {
			last = err
			return false, nil
		}
		insecure := &rest.Config{Host: endpoint, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, Timeout: 10 * time.Second}
		kc, sig, err := readClusterInfo(ctx, insecure, tokenID)
		if err != nil {
			return fail(err)
		}
		// The signature proves that whoever serves cluster-info knows the
		// token: the bootstrap signer controller signs it with every
		// signing token. Kubeadm waits for it the same way.
		if sig == "" {
			return fail(fmt.Errorf("kube-public/cluster-info is not signed for bootstrap token %s yet (the token Secret needs usage-bootstrap-signing and kube-controller-manager's bootstrapsigner controller)", tokenID))
		}
		if !jws.DetachedTokenIsValid(sig, string(kc), tokenID, tokenSecret) {
			return fail(fmt.Errorf("kube-public/cluster-info's signature for bootstrap token %s does not verify: the server does not know this token", tokenID))
		}
		caPEM, server, err = clusterInfoCA(kc)
		if err != nil {
			// A malformed cluster-info will not get better.
			return false, err
		}
		if !bt.UnsafeSkipCAVerification {
			if err := checkPins(caPEM, bt.CACertHashes); err != nil {
				return false, err
			}
		}
		verified := &rest.Config{Host: endpoint, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, Timeout: 10 * time.Second}
		again, _, err := readClusterInfo(ctx, verified, tokenID)
		if err != nil {
			return fail(fmt.Errorf("reading cluster-info over verified TLS: %w", err))
		}
		if !bytes.Equal(again, kc) {
			return fail(errors.New("cluster-info changed between the unverified and the verified read"))
		}
		return true, nil
	})
	if err != nil {
		if last != nil && (errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err)) {
			return nil, "", fmt.Errorf("discovering the cluster at %s: %w (last error: %v)", bt.APIServerEndpoint, err, last)
		}
		return nil, "", fmt.Errorf("discovering the cluster at %s: %w", bt.APIServerEndpoint, err)
	}
	return caPEM, server, nil
}

// readClusterInfo returns cluster-info's kubeconfig and its signature for
// the token ID ("" when not signed).
func readClusterInfo(ctx context.Context, cfg *rest.Config, tokenID string) ([]byte, string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-public").Get(ctx, clusterInfoMap, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	kc, ok := cm.Data["kubeconfig"]
	if !ok {
		return nil, "", errors.New("kube-public/cluster-info has no kubeconfig key")
	}
	return []byte(kc), cm.Data["jws-kubeconfig-"+tokenID], nil
}

func clusterInfoCA(kubeconfig []byte) ([]byte, string, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, "", fmt.Errorf("kube-public/cluster-info kubeconfig: %w", err)
	}
	names := make([]string, 0, len(cfg.Clusters))
	for n := range cfg.Clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, "", errors.New("kube-public/cluster-info kubeconfig has no cluster")
	}
	c := cfg.Clusters[names[0]]
	if len(c.CertificateAuthorityData) == 0 || c.Server == "" {
		return nil, "", errors.New("kube-public/cluster-info kubeconfig has no server or certificate-authority-data")
	}
	return c.CertificateAuthorityData, c.Server, nil
}

// checkPins accepts the CA when one of its certificates matches a pin.
func checkPins(caPEM []byte, pins []string) error {
	rest := caPEM
	var got []string
	for {
		var cert []byte
		cert, rest = nextPEM(rest)
		if cert == nil {
			break
		}
		c, err := certs.ParseCert(cert)
		if err != nil {
			return fmt.Errorf("kube-public/cluster-info CA: %w", err)
		}
		pin := certs.PublicKeyPin(c)
		got = append(got, pin)
		for _, want := range pins {
			if strings.EqualFold(strings.TrimSpace(want), pin) {
				return nil
			}
		}
	}
	return fmt.Errorf("the cluster's CA (%s) matches none of JoinConfiguration.discovery.bootstrapToken.caCertHashes %v; refusing to join a cluster that may not be the intended one", strings.Join(got, ", "), pins)
}

// nextPEM splits the first PEM block off b.
func nextPEM(b []byte) (block, rest []byte) {
	start := bytes.Index(b, []byte("-----BEGIN "))
	if start < 0 {
		return nil, nil
	}
	endMarker := []byte("-----END ")
	end := bytes.Index(b[start:], endMarker)
	if end < 0 {
		return nil, nil
	}
	end += start
	nl := bytes.IndexByte(b[end:], '\n')
	if nl < 0 {
		return b[start:], nil
	}
	return b[start : end+nl+1], b[end+nl+1:]
}

// startWorkerKubelet TLS-bootstraps the kubelet with the bootstrap token
// (a still-valid certificate from an earlier start is reused) and runs it.
func (a *agent) startWorkerKubelet(ctx context.Context, join *kubeadmapi.JoinConfiguration, caPEM []byte) error {
	token := join.Discovery.TLSBootstrapToken
	if token == "" && join.Discovery.BootstrapToken != nil {
		token = join.Discovery.BootstrapToken.Token
	}
	bootstrap := &rest.Config{Host: a.st.Server, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
	certDir := filepath.Join(a.root, "var", "lib", "kubelet", "pki")
	// kubeadm's own TLS bootstrap timeout; Bootstrap would wait for ever.
	bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	nodeCfg, err := kubelet.Bootstrap(bctx, bootstrap, a.st.NodeName, certDir)
	if err != nil {
		return fmt.Errorf("TLS bootstrap of the kubelet: %w", err)
	}
	a.startKubelet(kubelet.Options{
		Config:     nodeCfg,
		ProviderID: kubeletArg(join.NodeRegistration, "provider-id"),
		Labels:     nodeLabels(join.NodeRegistration),
		Taints:     join.NodeRegistration.Taints,
	})
	return nil
}

// joinControlPlane adds this machine to the cluster's etcd and starts
// another control plane. The cluster certificates are on disk already.
func (a *agent) joinControlPlane(ctx context.Context, joinData []byte, join *kubeadmapi.JoinConfiguration, caPEM []byte, server string) error {
	ca, err := a.loadCA()
	if err != nil {
		return err
	}
	if err := checkPins(caPEM, []string{certs.PublicKeyPin(ca.Cert)}); err != nil {
		return fmt.Errorf("the CA in /etc/kubernetes/pki/ca.crt is not the CA of the cluster being joined: %w", err)
	}
	// A short-lived admin credential for reading the cluster's configuration
	// and etcd members; kubeadm uses the uploaded admin certificates alike.
	// Its key follows the CA's algorithm: the cluster's configured one is in
	// the configuration this credential is needed to read.
	caAlgorithm, err := certs.KeyAlgorithmOf(ca.Cert.PublicKey)
	if err != nil {
		caAlgorithm = certs.DefaultKeyAlgorithm
	}
	admin, err := clientConfig(ca, caAlgorithm, server, "capstan:node-join:"+a.st.NodeName, []string{"system:masters"}, time.Hour)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	var ccYAML string
	var clientURLs []string
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, defaultDiscoveryTimeout, true, func(ctx context.Context) (bool, error) {
		cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, kubeadmConfigMap, metav1.GetOptions{})
		if err != nil {
			last = fmt.Errorf("reading kube-system/kubeadm-config: %w", err)
			return false, nil
		}
		ccYAML = cm.Data["ClusterConfiguration"]
		if ccYAML == "" {
			return false, errors.New("kube-system/kubeadm-config has no ClusterConfiguration key")
		}
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "component=etcd,tier=control-plane"})
		if err != nil {
			last = fmt.Errorf("listing the etcd mirror pods: %w", err)
			return false, nil
		}
		clientURLs = clientURLs[:0]
		for _, p := range pods.Items {
			if p.Spec.NodeName == a.st.NodeName {
				continue
			}
			for _, u := range strings.Split(p.Annotations[annotationEtcdClientURLs], ",") {
				if u = strings.TrimSpace(u); u != "" {
					clientURLs = append(clientURLs, u)
				}
			}
		}
		if len(clientURLs) == 0 {
			last = errors.New("no etcd-<node> mirror pod in kube-system carries " + annotationEtcdClientURLs)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last error: %v)", err, last)
		}
		return fmt.Errorf("reading the cluster's configuration and etcd members: %w", err)
	}
	docs, err := kubeadm.Parse([]byte(ccYAML))
	if err != nil || docs.Cluster == nil {
		return fmt.Errorf("kube-system/kubeadm-config ClusterConfiguration: %v", err)
	}
	// Saved together so a restart has both the cluster's configuration and
	// this node's registration.
	if err := a.saveConfig([]byte(ccYAML + "\n---\n" + string(joinData))); err != nil {
		return err
	}
	a.st.Role = RoleControlPlane
	a.st.Version = docs.Cluster.KubernetesVersion
	if err := a.ensurePorts(); err != nil {
		return err
	}
	if err := a.st.save(a.root); err != nil {
		return err
	}
	if a.st.EtcdInitialCluster == "" {
		pki, err := a.machinePath(docs.Cluster.CertificatesDir, "/etc/kubernetes/pki")
		if err != nil {
			return err
		}
		peerURL := fmt.Sprintf("https://127.0.0.1:%d", a.st.Ports.EtcdPeer)
		a.log.Info("Adding an etcd member", "name", a.st.NodeName, "peerURL", peerURL, "clientURLs", clientURLs)
		initial, err := addEtcdMemberWithRetry(ctx, a.log, pki, keyAlgorithm(docs.Cluster), clientURLs, a.st.NodeName, peerURL)
		if err != nil {
			return fmt.Errorf("adding this machine's etcd member: %w", err)
		}
		a.st.EtcdInitialCluster = initial
		if err := a.st.save(a.root); err != nil {
			return err
		}
	}
	if err := a.startControlPlane(ctx, docs.Cluster, a.st.EtcdInitialCluster); err != nil {
		return err
	}
	if err := a.startControlPlaneKubelet(join.NodeRegistration, joinBindPort(join)); err != nil {
		return err
	}
	return a.markStarted()
}

// joinBindPort is the port a control-plane join binds its API server to
// (0: kubeadm's default).
func joinBindPort(join *kubeadmapi.JoinConfiguration) int32 {
	if join.ControlPlane == nil {
		return 0
	}
	return join.ControlPlane.LocalAPIEndpoint.BindPort
}

// resume starts the components of a machine that was set up before this
// process, from what it saved, without initialising anything again.
func (a *agent) resume(ctx context.Context) error {
	docs, err := a.loadConfig()
	if err != nil {
		return err
	}
	switch {
	case a.st.Role == RoleControlPlane && docs.Init != nil:
		if err := a.startControlPlane(ctx, &docs.Init.ClusterConfiguration, ""); err != nil {
			return err
		}
		return a.startControlPlaneKubelet(docs.Init.NodeRegistration, docs.Init.LocalAPIEndpoint.BindPort)
	case a.st.Role == RoleControlPlane && docs.Join != nil && docs.Cluster != nil:
		if err := a.startControlPlane(ctx, docs.Cluster, a.st.EtcdInitialCluster); err != nil {
			return err
		}
		return a.startControlPlaneKubelet(docs.Join.NodeRegistration, joinBindPort(docs.Join))
	case a.st.Role == RoleWorker && docs.Join != nil:
		caPEM, err := os.ReadFile(filepath.Join(a.root, "etc", "kubernetes", "pki", "ca.crt"))
		if err != nil {
			return err
		}
		return a.startWorkerKubelet(ctx, docs.Join, caPEM)
	}
	return fmt.Errorf("saved state (role %q) does not match the saved kubeadm configuration %s", a.st.Role, configCopy)
}

// etcdMemberAddTimeout bounds how long a join keeps asking etcd to take the
// new member, as kubeadm does.
const etcdMemberAddTimeout = 2 * time.Minute

// addEtcdMemberWithRetry adds the member, retrying while etcd refuses
// because it is not ready for another member yet: etcd turns a member
// change down ("unhealthy cluster") until every member has been connected
// for a few seconds, which a member that joined just before has not.
func addEtcdMemberWithRetry(ctx context.Context, log logr.Logger, pki string, alg certs.KeyAlgorithm, clientURLs []string, name, peerURL string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdMemberAddTimeout)
	defer cancel()
	delay := time.Second
	for {
		initial, err := controlplane.AddEtcdMember(ctx, pki, alg, clientURLs, name, peerURL)
		if err == nil {
			return initial, nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		log.Info("etcd did not take the member yet; retrying", "error", err.Error(), "after", delay)
		select {
		case <-ctx.Done():
			return "", err
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}
