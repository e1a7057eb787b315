package kubelet_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/etcdclient"
	"capstan.dev/capstan/internal/node/kubelet"
	"capstan.dev/capstan/internal/portforward"
	"capstan.dev/capstan/test/fixture"
)

// TestPortForwardThroughAPIServer reaches a machine's etcd as
// KubeadmControlPlane does: a port-forward to the etcd static Pod through
// a real kube-apiserver, which connects to the kubelet's API with its
// kubelet client certificate and checks the kubelet's serving certificate;
// the kubelet authorizes the API server and joins the stream to the
// member's client port; TLS with the etcd CA runs end to end over it.
func TestPortForwardThroughAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full control plane")
	}
	c := workloadPlane(t)
	ctx := context.Background()
	name := "pf-1"
	pki := filepath.Join(workloadDir, "pki")
	ca, err := certs.Load(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	etcdCA, err := certs.Load(filepath.Join(pki, "etcd", "ca.crt"), filepath.Join(pki, "etcd", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	etcdURL, err := url.Parse(workload.EtcdClientURL())
	if err != nil {
		t.Fatal(err)
	}
	startOn(t, c, kubelet.Options{
		Config: clientOf(t, ca, kubelet.NodeUser(name), kubelet.NodesGroup), NodeName: name, KubeletVersion: "v1.35.8",
		StaticPods: []kubelet.StaticPod{
			{Component: "etcd", Ports: map[int32]string{etcdclient.ClientPort: etcdURL.Host}},
			{Component: "kube-apiserver"},
		},
		Server: &kubelet.ServerOptions{Certificate: servingCertificate(t, ca, name), ClientCAs: pool(ca.Cert)},
	})
	var kubeletPort int32
	fixture.Eventually(t, "Node reporting the kubelet API's port, and both mirror pods", time.Minute, func(ctx context.Context) string {
		nd, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		kubeletPort = nd.Status.DaemonEndpoints.KubeletEndpoint.Port
		if kubeletPort == 10250 || kubeletPort == 0 {
			return fmt.Sprintf("kubelet port %d", kubeletPort)
		}
		for _, pod := range []string{"etcd-" + name, "kube-apiserver-" + name} {
			if _, err := c.CoreV1().Pods(kubelet.MirrorPodNamespace).Get(ctx, pod, metav1.GetOptions{}); err != nil {
				return err.Error()
			}
		}
		return ""
	})

	dialer, err := portforward.NewDialer(workload.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	member, err := etcdclient.ForPod(ctx, etcdclient.PodConfig{Dialer: dialer, Namespace: "kube-system", Pod: "etcd-" + name,
		CA: etcdCA, CommonName: "kubelet-test", DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	listCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	list, err := member.MemberList(listCtx)
	if err != nil {
		t.Fatalf("listing etcd members through the port-forward: %v", err)
	}
	if len(list.Members) != 1 || list.Members[0].Name != "cp-0" {
		t.Errorf("etcd members %v, want only cp-0", list.Members)
	}
	// A second request reuses the forwarded connection.
	if _, err := member.MemberList(listCtx); err != nil {
		t.Errorf("second request: %v", err)
	}

	// A Pod that does not exist: the API server refuses the upgrade.
	_, err = dialer.Dial(ctx, "kube-system", "etcd-nope", etcdclient.ClientPort)
	var status *apierrors.StatusError
	if !errors.As(err, &status) || !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "cannot port-forward to kube-system/etcd-nope port 2379") {
		t.Errorf("forwarding to a missing Pod: %v, want a NotFound naming the Pod and port", err)
	}

	// A port nothing is mapped to: the kubelet says so on the error stream,
	// which the dial or the first read reports (the kubelet may refuse the
	// data stream before it is fully open).
	conn, err := dialer.Dial(ctx, "kube-system", "kube-apiserver-"+name, 6443)
	if err == nil {
		_, err = io.ReadAll(conn)
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "nothing listens on port 6443") {
		t.Errorf("forwarding to a port nothing listens on: %v", err)
	}

	// The kubelet API itself: callers need a client certificate from the
	// cluster CA, and the API server's permission for nodes/proxy.
	endpoint := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(int(kubeletPort))) + "/portForward/kube-system/etcd-" + name
	for _, tc := range []struct {
		what   string
		client *tls.Certificate
		want   string
	}{
		{what: "without a client certificate", want: "certificate"},
		{what: "as a user without nodes/proxy", client: clientCertificate(t, ca, "nobody"), want: "403 Forbidden"},
	} {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool(ca.Cert), MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if tc.client == nil {
					return &tls.Certificate{}, nil
				}
				return tc.client, nil
			},
		}}}
		resp, err := hc.Post(endpoint, "", nil)
		got := fmt.Sprint(err)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got = resp.Status + ": " + string(body)
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("calling the kubelet API %s: %s, want %q", tc.what, got, tc.want)
		}
	}
}

// clientOf is a client of the workload plane as user in groups, with a
// certificate from ca.
func clientOf(t *testing.T, ca *certs.KeyPair, user string, groups ...string) *rest.Config {
	t.Helper()
	kp, err := ca.Issue(certs.Request{CommonName: user, Organization: groups, Client: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(workload.AdminConfig())
	cfg.CertData, cfg.KeyData = kp.CertPEM(), keyPEM
	return cfg
}

func clientCertificate(t *testing.T, ca *certs.KeyPair, user string) *tls.Certificate {
	t.Helper()
	kp, err := ca.Issue(certs.Request{CommonName: user, Client: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}
}

// servingCertificate is a kubelet serving certificate for 127.0.0.1, as a
// control-plane machine issues its own.
func servingCertificate(t *testing.T, ca *certs.KeyPair, node string) tls.Certificate {
	t.Helper()
	kp, err := ca.Issue(certs.Request{CommonName: kubelet.NodeUser(node), Organization: []string{kubelet.NodesGroup},
		DNSNames: []string{node}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}
}

func pool(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}
