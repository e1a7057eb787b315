package mgmt

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"testing"
	"time"

	"capstan.dev/capstan/internal/certs"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatalf("%s is not PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPKIIsCompleteAndVerifies(t *testing.T) {
	p := pki{dir: t.TempDir()}
	now := time.Now()
	if err := p.ensure(now); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, p.caCert()))

	serving := readCert(t, p.certFile(apiServerServing))
	if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("API server certificate does not verify for 127.0.0.1: %v", err)
	}
	admin := readCert(t, p.certFile(adminClient))
	if _, err := admin.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin certificate does not verify as a client: %v", err)
	}
	if !slices.Contains(admin.Subject.Organization, "system:masters") {
		t.Errorf("admin certificate groups %v lack system:masters", admin.Subject.Organization)
	}
	for _, f := range []string{p.caKey(), p.keyFile(adminClient), p.serviceAccountKey()} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is readable by others: %v", f, fi.Mode())
		}
	}
}

func TestPKIKeepsValidCredentialsAndRenewsExpiringOnes(t *testing.T) {
	p := pki{dir: t.TempDir()}
	now := time.Now()
	if err := p.ensure(now); err != nil {
		t.Fatal(err)
	}
	caBefore, _ := os.ReadFile(p.caCert())
	adminBefore, _ := os.ReadFile(p.certFile(adminClient))
	saBefore, _ := os.ReadFile(p.serviceAccountKey())

	if err := p.ensure(now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(p.certFile(adminClient)); !bytes.Equal(after, adminBefore) {
		t.Error("a valid admin certificate was replaced: kubeconfigs in use would break")
	}

	// Within the renewal window of the leaves, but far from the CA's end.
	if err := p.ensure(now.Add(leafLifetime - renewBefore/2)); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(p.certFile(adminClient)); bytes.Equal(after, adminBefore) {
		t.Error("an expiring admin certificate was kept")
	}
	if after, _ := os.ReadFile(p.caCert()); !bytes.Equal(after, caBefore) {
		t.Error("the CA was replaced: every issued credential would stop verifying")
	}
	if after, _ := os.ReadFile(p.serviceAccountKey()); !bytes.Equal(after, saBefore) {
		t.Error("the service account key was replaced: issued tokens would stop verifying")
	}
}

func TestPKIReplacesAHalfWrittenPair(t *testing.T) {
	p := pki{dir: t.TempDir()}
	if err := p.ensure(time.Now()); err != nil {
		t.Fatal(err)
	}
	// A key without its certificate, as a crash between the writes leaves.
	if err := os.Remove(p.certFile(adminClient)); err != nil {
		t.Fatal(err)
	}
	if err := p.ensure(time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.Load(p.certFile(adminClient), p.keyFile(adminClient)); err != nil {
		t.Errorf("pair not repaired: %v", err)
	}
}

// etcd has a CA of its own, as kubeadm lays it out: etcd's serving
// certificate and the API server's etcd client certificate are signed by
// it, and no certificate of the plane's CA (the admin's) verifies against
// it.
func TestEtcdHasACAOfItsOwn(t *testing.T) {
	p := pki{dir: t.TempDir()}
	if err := p.ensure(time.Now()); err != nil {
		t.Fatal(err)
	}
	plane, etcd := x509.NewCertPool(), x509.NewCertPool()
	plane.AddCert(readCert(t, p.caCert()))
	etcdCA := readCert(t, p.etcdCACert())
	etcd.AddCert(etcdCA)
	if bytes.Equal(etcdCA.Raw, readCert(t, p.caCert()).Raw) || etcdCA.Subject.CommonName == "capstan-management-ca" {
		t.Fatalf("etcd's CA is the plane's CA")
	}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	for _, l := range []leaf{etcdServing, etcdClient} {
		c := readCert(t, p.certFile(l))
		if _, err := c.Verify(x509.VerifyOptions{Roots: etcd, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("%s does not verify against the etcd CA: %v", l.name, err)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: plane, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
			t.Errorf("%s verifies against the plane's CA", l.name)
		}
	}
	for _, l := range []leaf{adminClient, controllersClient, kubeletClient} {
		if _, err := readCert(t, p.certFile(l)).Verify(x509.VerifyOptions{Roots: etcd, KeyUsages: client}); err == nil {
			t.Errorf("the %s certificate would open etcd", l.name)
		}
	}
	for _, f := range []string{p.etcdCAKey(), p.keyFile(etcdServing), p.keyFile(etcdClient)} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi)
		}
	}
	if fi, err := os.Stat(p.path("etcd")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("pki/etcd: %v, mode %v; want 0700", err, fi)
	}
}
