package kubelet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"capstan.dev/capstan/internal/certs"
)

// Files of the node's client credentials in Bootstrap's certificate
// directory.
const (
	ClientCertFile = "kubelet-client.crt"
	ClientKeyFile  = "kubelet-client.key"
)

// KubeletClientSigner is the signer of kubelet client certificates, which
// kube-controller-manager's CSR approver approves for bootstrap tokens.
const KubeletClientSigner = certificatesv1.KubeAPIServerClientKubeletSignerName

// NodesGroup is the group every node's identity belongs to.
const NodesGroup = "system:nodes"

// reuseMargin is how long an existing certificate must stay valid to be
// reused; a shorter-lived one is replaced at start-up.
const reuseMargin = 24 * time.Hour

// NodeUser is the user name of the node's identity.
func NodeUser(nodeName string) string { return "system:node:" + nodeName }

// Bootstrap returns the node's own client configuration: the same server and
// CA as bootstrap, authenticated by a client certificate for
// system:node:<nodeName>. A certificate already in certDir (kubelet-client.crt
// and kubelet-client.key) for that node and valid for more than a day is
// reused. Otherwise it generates a key, asks for a certificate with a
// CertificateSigningRequest made with the bootstrap credentials, waits until
// the request is approved and signed, and stores the pair in certDir. It
// fails when the request is denied or fails, naming it; it waits as long as
// ctx allows otherwise.
func Bootstrap(ctx context.Context, bootstrap *rest.Config, nodeName, certDir string) (*rest.Config, error) {
	if bootstrap == nil {
		return nil, errors.New("kubelet bootstrap: the bootstrap client configuration is nil")
	}
	if nodeName == "" {
		return nil, errors.New("kubelet bootstrap: the node name is empty")
	}
	certPath, keyPath := filepath.Join(certDir, ClientCertFile), filepath.Join(certDir, ClientKeyFile)
	if kp, err := certs.Load(certPath, keyPath); err == nil && nodeCertUsable(kp, nodeName, time.Now()) {
		return nodeConfig(bootstrap, certPath, keyPath), nil
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("kubelet bootstrap: generating a key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: NodeUser(nodeName), Organization: []string{NodesGroup}},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("kubelet bootstrap: creating the certificate request: %w", err)
	}
	request := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}

	cfg := rest.CopyConfig(bootstrap)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "capstan-kubelet-bootstrap"
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet bootstrap: client: %w", err)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		// Named after the key, like a kubelet's node-csr-…, so a retry with
		// the same key finds its own request.
		ObjectMeta: metav1.ObjectMeta{Name: "node-csr-" + digest(string(pubDER), nodeName)[:40]},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    request,
			SignerName: KubeletClientSigner,
			// ECDSA keys do not encipher, so no key encipherment usage.
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
	if err := createRetrying(ctx, client, csr); err != nil {
		return nil, fmt.Errorf("kubelet bootstrap: creating CertificateSigningRequest %s for %s: %w", csr.Name, NodeUser(nodeName), err)
	}

	certPEM, err := waitForCertificate(ctx, client, csr.Name)
	if err != nil {
		return nil, err
	}
	keyPEM, err := (&certs.KeyPair{Key: key}).KeyPEM()
	if err != nil {
		return nil, err
	}
	kp, err := certs.Parse(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("kubelet bootstrap: CertificateSigningRequest %s: the issued certificate: %w", csr.Name, err)
	}
	if kp.Cert.Subject.CommonName != NodeUser(nodeName) {
		return nil, fmt.Errorf("kubelet bootstrap: CertificateSigningRequest %s: the issued certificate is for %q, not %q", csr.Name, kp.Cert.Subject.CommonName, NodeUser(nodeName))
	}
	if err := kp.Write(certPath, keyPath); err != nil {
		return nil, fmt.Errorf("kubelet bootstrap: storing the node's certificate in %s: %w", certDir, err)
	}
	return nodeConfig(bootstrap, certPath, keyPath), nil
}

// nodeCertUsable reports whether kp is a client certificate of the node
// that stays valid for more than reuseMargin.
func nodeCertUsable(kp *certs.KeyPair, nodeName string, now time.Time) bool {
	c := kp.Cert
	clientAuth := len(c.ExtKeyUsage) == 0 || slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	return kp.ValidFor(now, reuseMargin) && clientAuth &&
		c.Subject.CommonName == NodeUser(nodeName) && slices.Contains(c.Subject.Organization, NodesGroup)
}

// nodeConfig is bootstrap's server and trust with the node's certificate
// instead of the bootstrap credentials. The files are named rather than
// copied so a renewed certificate on disk is picked up.
func nodeConfig(bootstrap *rest.Config, certPath, keyPath string) *rest.Config {
	cfg := rest.AnonymousClientConfig(bootstrap)
	cfg.TLSClientConfig.CertFile = certPath
	cfg.TLSClientConfig.KeyFile = keyPath
	return cfg
}

// waitForCertificate watches the request until it is signed, denied or
// failed.
func waitForCertificate(ctx context.Context, client kubernetes.Interface, name string) ([]byte, error) {
	csrs := client.CertificatesV1().CertificateSigningRequests()
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return csrs.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return csrs.Watch(ctx, o)
		},
	}
	var certPEM []byte
	_, err := watchtools.UntilWithSync(ctx, lw, &certificatesv1.CertificateSigningRequest{}, nil, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("kubelet bootstrap: CertificateSigningRequest %s was deleted before it was signed", name)
		}
		csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return false, nil
		}
		for _, c := range csr.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Status != "" {
				continue
			}
			switch c.Type {
			case certificatesv1.CertificateDenied:
				return false, fmt.Errorf("kubelet bootstrap: CertificateSigningRequest %s was denied (%s: %s)", name, c.Reason, c.Message)
			case certificatesv1.CertificateFailed:
				return false, fmt.Errorf("kubelet bootstrap: CertificateSigningRequest %s failed (%s: %s)", name, c.Reason, c.Message)
			}
		}
		if len(csr.Status.Certificate) > 0 {
			certPEM = csr.Status.Certificate
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("kubelet bootstrap: waiting for CertificateSigningRequest %s to be approved and signed: %w", name, ctx.Err())
		}
		return nil, err
	}
	return certPEM, nil
}

// createRetrying creates the request, retrying, as long as ctx allows, the
// failures that pass: a control plane whose etcd is taking a new member
// cannot write for a few seconds, and a load balancer may briefly have no
// healthy API server. Refusals (forbidden, invalid) are returned at once.
func createRetrying(ctx context.Context, client kubernetes.Interface, csr *certificatesv1.CertificateSigningRequest) error {
	delay := 500 * time.Millisecond
	for {
		_, err := client.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// transient tells the errors worth retrying from the refusals.
func transient(err error) bool {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return false
	}
	return true
}
