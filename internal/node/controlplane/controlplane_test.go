package controlplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/embedded"
	"capstan.dev/capstan/test/fixture"
)

// One control plane per test binary: kube-apiserver's registries are
// process-wide.
var (
	cp     *ControlPlane
	pkiDir string
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "controlplane-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	pkiDir = filepath.Join(dir, "pki")
	if err := writeClusterPKI(pkiDir); err != nil {
		return 0, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err = Start(ctx, Config{
		NodeName:             "cp-0",
		ClusterName:          "test",
		PKIDir:               pkiDir,
		KubeconfigDir:        filepath.Join(dir, "kubernetes"),
		EtcdDataDir:          filepath.Join(dir, "etcd"),
		Ports:                Ports{APIServer: ports[0], EtcdClient: ports[1], EtcdPeer: ports[2]},
		ControlPlaneEndpoint: "127.0.0.1:" + fmt.Sprint(ports[0]),
		Log:                  klog.Background(),
	})
	if err != nil {
		return 0, fmt.Errorf("starting the control plane: %w", err)
	}
	defer cp.Stop()
	return m.Run(), nil
}

// writeClusterPKI writes what cloud-init writes for a control-plane machine.
func writeClusterPKI(dir string) error {
	now := time.Now()
	for _, name := range []string{"ca", "etcd/ca", "front-proxy-ca"} {
		ca, err := certs.NewCA(strings.ReplaceAll(name, "/", "-"), certs.DefaultKeyAlgorithm, now, 24*time.Hour)
		if err != nil {
			return err
		}
		if err := ca.Write(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")); err != nil {
			return err
		}
	}
	key, pub, err := certs.NewServiceAccountKey(certs.DefaultKeyAlgorithm)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "sa.key"), key, 0o600); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "sa.pub"), pub, 0o644)
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func admin(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func namespace(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	ns, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func TestReadyAndHealthy(t *testing.T) {
	var status int
	res := admin(t).Discovery().RESTClient().Get().AbsPath("/readyz").Do(context.Background()).StatusCode(&status)
	if res.Error() != nil || status != 200 {
		t.Fatalf("/readyz: %d %v", status, res.Error())
	}
	fixture.Eventually(t, "every component healthy", time.Minute, func(ctx context.Context) string {
		for name, err := range cp.Health(ctx) {
			if err != nil {
				return fmt.Sprintf("%s: %v", name, err)
			}
		}
		return fixture.Unless(len(cp.Health(ctx)) == 4, "")
	})
	if !strings.HasPrefix(cp.EtcdClientURL(), "https://127.0.0.1:") {
		t.Errorf("etcd client URL %q", cp.EtcdClientURL())
	}
	select {
	case err := <-cp.Done():
		t.Fatalf("a component failed: %v", err)
	default:
	}
}

func TestKubeconfigsAndServingCertificate(t *testing.T) {
	kc := filepath.Join(filepath.Dir(pkiDir), "kubernetes")
	for _, f := range []string{"admin.conf", "controller-manager.conf", "scheduler.conf"} {
		if _, err := os.Stat(filepath.Join(kc, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	cert, err := certs.ParseCert(mustRead(t, filepath.Join(pkiDir, "apiserver.crt")))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"localhost", "cp-0", "kubernetes.default.svc.cluster.local"} {
		if !slices.Contains(cert.DNSNames, name) {
			t.Errorf("serving certificate lacks DNS name %s: %v", name, cert.DNSNames)
		}
	}
	for _, ip := range []string{"127.0.0.1", "10.96.0.1"} {
		if !slices.ContainsFunc(cert.IPAddresses, net.ParseIP(ip).Equal) {
			t.Errorf("serving certificate lacks IP %s: %v", ip, cert.IPAddresses)
		}
	}
	// Minting again changes nothing that is current.
	before := mustRead(t, filepath.Join(pkiDir, "apiserver.crt"))
	if err := cp.cfg.ensureLeaves(pki(pkiDir), time.Now()); err != nil {
		t.Fatal(err)
	}
	if string(before) != string(mustRead(t, filepath.Join(pkiDir, "apiserver.crt"))) {
		t.Error("a current serving certificate was re-issued")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDeploymentIsScheduled(t *testing.T) {
	c := admin(t)
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}
	node, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(ctx, "worker-1", metav1.DeleteOptions{}) })
	room := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	node.Status.Capacity, node.Status.Allocatable = room, room
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	ns := namespace(t, c)
	labels := map[string]string{"app": "web"}
	replicas := int32(2)
	_, err = c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "2 pods bound to worker-1", time.Minute, func(ctx context.Context) string {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "worker-1" {
				bound++
			}
		}
		return fixture.Unless(len(pods.Items) == 2 && bound == 2, fmt.Sprintf("%d pods, %d bound", len(pods.Items), bound))
	})
}

func TestNamespaceDeletionCompletes(t *testing.T) {
	c := admin(t)
	ctx := context.Background()
	ns := namespace(t, c)
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "namespace gone", time.Minute, func(ctx context.Context) string {
		_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprint(err))
	})
}

const (
	tokenID     = "abcdef"
	tokenSecret = "0123456789abcdef"
)

// bootstrapToken creates the token Secret the KubeadmConfig controller
// creates, once for every test that needs it.
func bootstrapToken(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	_, err := c.CoreV1().Secrets("kube-system").Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + tokenID},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": tokenID, "token-secret": tokenSecret,
			"expiration":                     time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
			"auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token",
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func TestBootstrapSignerSignsClusterInfo(t *testing.T) {
	c := admin(t)
	bootstrapToken(t, c)
	_, err := c.CoreV1().ConfigMaps("kube-public").Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-info"},
		Data:       map[string]string{"kubeconfig": "apiVersion: v1\nkind: Config\nclusters: []\n"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "cluster-info signed", time.Minute, func(ctx context.Context) string {
		cm, err := c.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(cm.Data["jws-kubeconfig-"+tokenID] != "", "")
	})
}

func TestBootstrapTokenCSRIsApprovedAndSigned(t *testing.T) {
	c := admin(t)
	ctx := context.Background()
	bootstrapToken(t, c)
	group := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:bootstrappers:kubeadm:default-node-token"}
	// kubeadm's bindings for joining nodes.
	for name, role := range map[string]string{
		"kubeadm:kubelet-bootstrap":          "system:node-bootstrapper",
		"kubeadm:node-autoapprove-bootstrap": "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
	} {
		_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{group},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	anon := rest.AnonymousClientConfig(cp.AdminConfig())
	anon.BearerToken = tokenID + "." + tokenSecret
	bootstrapper, err := kubernetes.NewForConfig(anon)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:worker-2", Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	var csr *certificatesv1.CertificateSigningRequest
	fixture.Eventually(t, "bootstrap token accepted", 30*time.Second, func(ctx context.Context) string {
		csr, err = bootstrapper.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "node-csr-"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			},
		}, metav1.CreateOptions{})
		return fixture.Unless(err == nil, fmt.Sprint(err))
	})
	fixture.Eventually(t, "CSR approved and signed", time.Minute, func(ctx context.Context) string {
		got, err := c.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(len(got.Status.Certificate) > 0, fmt.Sprintf("conditions %v", got.Status.Conditions))
	})
	got, _ := c.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
	cert, err := certs.ParseCert(got.Status.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certs.ParseCert(mustRead(t, filepath.Join(pkiDir, "ca.crt")))
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		t.Errorf("kubelet client certificate is not signed by the cluster CA: %v", err)
	}
}

func TestSecondEtcdMemberJoins(t *testing.T) {
	ctx := context.Background()
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	peer := url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	client := url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	initial, err := AddEtcdMember(ctx, pkiDir, certs.DefaultKeyAlgorithm, []string{cp.EtcdClientURL()}, "cp-1", peer.String())
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("cp-0=https://127.0.0.1:%d,cp-1=%s", cp.cfg.Ports.EtcdPeer, peer.String())
	if initial != want {
		t.Fatalf("initial cluster %q, want %q", initial, want)
	}
	again, err := AddEtcdMember(ctx, pkiDir, certs.DefaultKeyAlgorithm, []string{cp.EtcdClientURL()}, "cp-1", peer.String())
	if err != nil || again != initial {
		t.Fatalf("adding again: %q, %v; want %q", again, err, initial)
	}

	// Added as a learner, the member does not count towards the quorum:
	// the API server keeps writing before it starts.
	c := admin(t)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.CoreV1().ConfigMaps("default").Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "before-start-"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a write while the added member has not started: %v", err)
	}

	p := pki(pkiDir)
	tlsInfo := func(leaf string) transport.TLSInfo {
		return transport.TLSInfo{CertFile: p.crt(leaf), KeyFile: p.key(leaf), TrustedCAFile: p.crt(etcdCA), ClientCertAuth: true}
	}
	second, err := embedded.StartEtcd(ctx, embedded.EtcdConfig{
		Name: "cp-1", Dir: t.TempDir(), ClientURL: client, PeerURL: peer,
		ClientTLS: tlsInfo("etcd/server"), PeerTLS: tlsInfo("etcd/peer"),
		InitialCluster: initial, Join: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !second.Server.IsLearner() {
		t.Error("the joining member started as a voting member, want a learner")
	}
	if err := promoteLearner(ctx, second, klog.Background()); err != nil {
		t.Fatal(err)
	}
	cli, err := etcdClient(ctx, p, certs.DefaultKeyAlgorithm, []string{cp.EtcdClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// Leave as a real removal would: out of the cluster first, so the
	// first member keeps its quorum of one.
	defer func() {
		// etcd refuses to remove a member until every member has been
		// connected for a few seconds.
		fixture.Eventually(t, "second member removed", 30*time.Second, func(ctx context.Context) string {
			_, err := cli.MemberRemove(ctx, uint64(second.Server.MemberID()))
			return fixture.Unless(err == nil, fmt.Sprint(err))
		})
		second.Close()
	}()
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var started []string
	for _, m := range list.Members {
		if m.IsLearner {
			t.Errorf("member %s is still a learner after its promotion", m.Name)
		}
		if m.Name != "" {
			started = append(started, m.Name)
		}
	}
	slices.Sort(started)
	if strings.Join(started, ",") != "cp-0,cp-1" {
		t.Fatalf("started members %v", started)
	}
	// The API server still writes through the first member with two
	// voting members in the cluster.
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "after-join-"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
