package etcdclient

import (
	"testing"
	"time"

	"capstan.dev/capstan/internal/certs"
)

// TestClientCertificateReused: connections of the same name to the same
// etcd share a certificate while it has more than leafReuseFor left, so
// that each reconcile does not generate an RSA key.
func TestClientCertificateReused(t *testing.T) {
	now := time.Now()
	ca, err := certs.NewCA("etcd-ca", certs.ECDSAP256, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA("etcd-ca", certs.ECDSAP256, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	first, err := clientCertificate(ca, certs.DefaultKeyAlgorithm, "c", now)
	if err != nil {
		t.Fatal(err)
	}
	if alg, err := certs.KeyAlgorithmOf(first.Cert.PublicKey); err != nil || alg != certs.RSA2048 {
		t.Errorf("client key %s, %v; want RSA-2048", alg, err)
	}
	if first.Cert.CheckSignatureFrom(ca.Cert) != nil || first.Cert.Subject.CommonName != "c" {
		t.Error("client certificate not issued by the CA for its name")
	}
	if again, _ := clientCertificate(ca, certs.DefaultKeyAlgorithm, "c", now.Add(leafLifetime-leafReuseFor-time.Minute)); again != first {
		t.Error("a certificate with time left was not reused")
	}
	for what, get := range map[string]func() (*certs.KeyPair, error){
		"another name":      func() (*certs.KeyPair, error) { return clientCertificate(ca, certs.DefaultKeyAlgorithm, "d", now) },
		"another algorithm": func() (*certs.KeyPair, error) { return clientCertificate(ca, certs.ECDSAP384, "c", now) },
		"another CA":        func() (*certs.KeyPair, error) { return clientCertificate(other, certs.DefaultKeyAlgorithm, "c", now) },
		"near its end": func() (*certs.KeyPair, error) {
			return clientCertificate(ca, certs.DefaultKeyAlgorithm, "c", now.Add(leafLifetime-leafReuseFor))
		},
	} {
		kp, err := get()
		if err != nil {
			t.Fatal(err)
		}
		if kp == first {
			t.Errorf("%s: the first certificate was reused", what)
		}
	}
	if kp, _ := clientCertificate(ca, certs.ECDSAP384, "c", now); kp == nil {
		t.Fatal("no certificate")
	} else if alg, _ := certs.KeyAlgorithmOf(kp.Cert.PublicKey); alg != certs.ECDSAP384 {
		t.Errorf("client key %s, want ECDSA-P384", alg)
	}
}
