package certs

import (
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

func TestIssueChainsToCA(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("test-ca", DefaultKeyAlgorithm, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(Request{CommonName: "server", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Lifetime: 48 * time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost", CurrentTime: now}); err != nil {
		t.Fatalf("leaf does not verify against its CA: %v", err)
	}
	if !leaf.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("leaf expires %s, want capped at the CA's %s", leaf.Cert.NotAfter, ca.Cert.NotAfter)
	}
	if _, err := leaf.Issue(Request{CommonName: "x"}, now); err == nil {
		t.Error("a leaf issued a certificate")
	}
	if !leaf.ValidFor(now, time.Hour) || leaf.ValidFor(now, 25*time.Hour) {
		t.Error("ValidFor does not follow NotAfter")
	}
}

func TestWriteLoadRoundTripAndMismatch(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("ca", DefaultKeyAlgorithm, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other", DefaultKeyAlgorithm, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "pki", "ca.crt"), filepath.Join(dir, "pki", "ca.key")
	if err := ca.Write(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(keyPath); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", info.Mode(), err)
	}
	got, err := Load(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Cert.Equal(ca.Cert) {
		t.Error("loaded certificate differs")
	}
	otherKey, _ := other.KeyPEM()
	if _, err := Parse(ca.CertPEM(), otherKey); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched pair: got %v", err)
	}
}

// The pin must be what kubeadm computes, which openssl reproduces as the
// SHA-256 of the DER public key.
func TestPublicKeyPinMatchesOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	ca, err := NewCA("ca", DefaultKeyAlgorithm, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", openssl+" x509 -pubkey -noout -in "+path+" | "+openssl+" pkey -pubin -outform der | "+openssl+" dgst -sha256 -hex")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "sha256:" + strings.TrimSpace(string(out[strings.LastIndex(string(out), " ")+1:]))
	if got := PublicKeyPin(ca.Cert); got != want {
		t.Errorf("pin %s, openssl says %s", got, want)
	}
}

func TestKubeconfigLoads(t *testing.T) {
	now := time.Now()
	ca, _ := NewCA("ca", DefaultKeyAlgorithm, now, time.Hour)
	admin, err := ca.Issue(Request{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}, Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	body, err := Kubeconfig("https://127.0.0.1:6443", "c1", "c1-admin", ca.CertPEM(), admin)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(body)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || len(cfg.CertData) == 0 || len(cfg.KeyData) == 0 || len(cfg.CAData) == 0 {
		t.Errorf("kubeconfig lost data: host %q cert %d key %d ca %d", cfg.Host, len(cfg.CertData), len(cfg.KeyData), len(cfg.CAData))
	}
}

func TestServiceAccountKey(t *testing.T) {
	keyPEM, pubPEM, err := NewServiceAccountKey(DefaultKeyAlgorithm)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(pubPEM), "PUBLIC KEY") || key == nil {
		t.Error("service account key pair not PEM")
	}
}
