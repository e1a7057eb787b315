package kubelet_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/node/kubelet"
	"capstan.dev/capstan/test/fixture"
)

// csrsFor lists the CertificateSigningRequests asking for nodeName's
// identity.
func csrsFor(t *testing.T, c kubernetes.Interface, nodeName string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := c.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, csr := range list.Items {
		if req := parseCSR(t, csr); req.Subject.CommonName == kubelet.NodeUser(nodeName) {
			out = append(out, csr)
		}
	}
	return out
}

func parseCSR(t *testing.T, csr certificatesv1.CertificateSigningRequest) *x509.CertificateRequest {
	t.Helper()
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		t.Fatalf("CSR %s: request is not PEM", csr.Name)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatalf("CSR %s: %v", csr.Name, err)
	}
	return req
}

// awaitCSR waits for the one request for nodeName.
func awaitCSR(t *testing.T, c kubernetes.Interface, nodeName string) certificatesv1.CertificateSigningRequest {
	t.Helper()
	var found []certificatesv1.CertificateSigningRequest
	fixture.Eventually(t, "CSR for "+nodeName, 10*time.Second, func(context.Context) string {
		found = csrsFor(t, c, nodeName)
		return fixture.Unless(len(found) == 1, "none yet")
	})
	return found[0]
}

// approveAndSign does what kube-controller-manager's approver and signer
// would: approve, then sign with the cluster CA.
func approveAndSign(t *testing.T, c kubernetes.Interface, csr certificatesv1.CertificateSigningRequest, ca *certs.KeyPair) {
	t.Helper()
	ctx := context.Background()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "TestApproved", Message: "approved by the test",
	})
	approved, err := c.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, &csr, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("approving %s: %v", csr.Name, err)
	}
	req := parseCSR(t, csr)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      req.Subject,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	approved.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if _, err := c.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, approved, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("signing %s: %v", csr.Name, err)
	}
}

type bootstrapResult struct {
	cfg *rest.Config
	err error
}

func bootstrapAsync(name, dir string) chan bootstrapResult {
	done := make(chan bootstrapResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfg, err := kubelet.Bootstrap(ctx, env.Config, name, dir)
		done <- bootstrapResult{cfg, err}
	}()
	return done
}

func TestBootstrap(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	name := "n-" + env.Namespace(t)
	dir := filepath.Join(t.TempDir(), "pki")
	t.Cleanup(func() {
		for _, csr := range csrsFor(t, c, name) {
			_ = c.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), csr.Name, metav1.DeleteOptions{})
		}
	})

	done := bootstrapAsync(name, dir)
	csr := awaitCSR(t, c, name)
	if csr.Spec.SignerName != "kubernetes.io/kube-apiserver-client-kubelet" ||
		!slices.Equal(csr.Spec.Usages, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}) {
		t.Errorf("CSR spec %+v", csr.Spec)
	}
	if req := parseCSR(t, csr); !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("CSR subject %v", req.Subject)
	}
	select {
	case r := <-done:
		t.Fatalf("Bootstrap returned before the CSR was signed: %v", r.err)
	case <-time.After(500 * time.Millisecond):
	}
	approveAndSign(t, c, csr, planeCA(t))
	r := <-done
	if r.err != nil {
		t.Fatalf("Bootstrap: %v", r.err)
	}

	// The returned configuration is the node.
	nodeClient, err := kubernetes.NewForConfig(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := nodeClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("who am I: %v", err)
	}
	if u := review.Status.UserInfo; u.Username != "system:node:"+name || !slices.Contains(u.Groups, "system:nodes") {
		t.Errorf("authenticated as %+v", u)
	}
	if r.cfg.BearerToken != "" || r.cfg.Host != env.Config.Host {
		t.Errorf("config %+v", r.cfg)
	}
	if info, err := os.Stat(filepath.Join(dir, kubelet.ClientKeyFile)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", info, err)
	}

	// A second start reuses the certificate without asking again.
	again, err := kubelet.Bootstrap(ctx, env.Config, name, dir)
	if err != nil {
		t.Fatalf("second Bootstrap: %v", err)
	}
	if again.CertFile != r.cfg.CertFile {
		t.Errorf("second Bootstrap uses %s, first %s", again.CertFile, r.cfg.CertFile)
	}
	if n := len(csrsFor(t, c, name)); n != 1 {
		t.Errorf("%d CSRs after reuse, want 1", n)
	}

	// Another node's certificate in the directory is not reused.
	other := "other-" + name
	t.Cleanup(func() {
		for _, csr := range csrsFor(t, c, other) {
			_ = c.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), csr.Name, metav1.DeleteOptions{})
		}
	})
	done = bootstrapAsync(other, dir)
	awaitCSR(t, c, other)
	// Deny it: Bootstrap fails naming the request.
	denied := awaitCSR(t, c, other)
	denied.Status.Conditions = append(denied.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "TestDenied", Message: "not this one",
	})
	if _, err := c.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, denied.Name, &denied, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = <-done
	if r.err == nil || !strings.Contains(r.err.Error(), denied.Name) || !strings.Contains(r.err.Error(), "denied") {
		t.Fatalf("Bootstrap with a denied CSR: %v", r.err)
	}
	// The first node's pair is untouched.
	if kp, err := certs.Load(filepath.Join(dir, kubelet.ClientCertFile), filepath.Join(dir, kubelet.ClientKeyFile)); err != nil || kp.Cert.Subject.CommonName != "system:node:"+name {
		t.Errorf("stored pair after a denied request: %v", err)
	}
}

// An expiring certificate is replaced.
func TestBootstrapRenewsExpiring(t *testing.T) {
	c := admin(t)
	name := "n-" + env.Namespace(t)
	dir := t.TempDir()
	t.Cleanup(func() {
		for _, csr := range csrsFor(t, c, name) {
			_ = c.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), csr.Name, metav1.DeleteOptions{})
		}
	})
	old, err := planeCA(t).Issue(certs.Request{CommonName: kubelet.NodeUser(name), Organization: []string{kubelet.NodesGroup}, Client: true, Lifetime: 12 * time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Write(filepath.Join(dir, kubelet.ClientCertFile), filepath.Join(dir, kubelet.ClientKeyFile)); err != nil {
		t.Fatal(err)
	}
	done := bootstrapAsync(name, dir)
	approveAndSign(t, c, awaitCSR(t, c, name), planeCA(t))
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	kp, err := certs.Load(filepath.Join(dir, kubelet.ClientCertFile), filepath.Join(dir, kubelet.ClientKeyFile))
	if err != nil || kp.Cert.SerialNumber.Cmp(old.Cert.SerialNumber) == 0 || !kp.ValidFor(time.Now(), 300*24*time.Hour) {
		t.Errorf("certificate not renewed: %v", err)
	}
}
