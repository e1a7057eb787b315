package mgmt

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The lifetimes of the management plane's own credentials. The CA outlives
// every leaf; leaves are re-issued at start-up when they come within
// renewBefore of expiry, so a plane that is restarted now and then never
// presents an expired certificate.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 365 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
)

// pki is the set of files under <state>/pki that the plane's components use.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p pki) caCert() string            { return p.path("ca.crt") }
func (p pki) caKey() string             { return p.path("ca.key") }
func (p pki) serviceAccountKey() string { return p.path("sa.key") }
func (p pki) serviceAccountPub() string { return p.path("sa.pub") }

// leaf names a certificate/key pair signed by the plane's CA.
type leaf struct {
	name         string // file stem under pki/
	commonName   string
	organization []string
	server       bool // serving certificate for 127.0.0.1/localhost
	client       bool
}

var (
	apiServerServing = leaf{name: "apiserver", commonName: "capstan-apiserver", server: true}
	etcdServing      = leaf{name: "etcd-server", commonName: "capstan-etcd", server: true, client: true}
	etcdClient       = leaf{name: "apiserver-etcd-client", commonName: "capstan-apiserver-etcd-client", client: true}
	adminClient      = leaf{name: "admin", commonName: "capstan-admin", organization: []string{"system:masters"}, client: true}
	// The in-process controllers act with a name of their own, so the API
	// server's audit and metrics tell their requests apart from the user's.
	controllersClient = leaf{name: "controllers", commonName: "capstan-controllers", organization: []string{"system:masters"}, client: true}
)

func (p pki) certFile(l leaf) string { return p.path(l.name + ".crt") }
func (p pki) keyFile(l leaf) string  { return p.path(l.name + ".key") }

// ensure creates every missing or soon-to-expire credential and leaves valid
// ones untouched, so that clients holding the old kubeconfig keep working
// across restarts.
func (p pki) ensure(now time.Time) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	caCert, caKey, err := p.ensureCA(now)
	if err != nil {
		return err
	}
	for _, l := range []leaf{apiServerServing, etcdServing, etcdClient, adminClient, controllersClient} {
		if err := p.ensureLeaf(l, caCert, caKey, now); err != nil {
			return fmt.Errorf("certificate %s: %w", l.name, err)
		}
	}
	return p.ensureServiceAccountKey()
}

func (p pki) ensureCA(now time.Time) (*x509.Certificate, crypto.Signer, error) {
	cert, key, err := loadPair(p.caCert(), p.caKey())
	if err == nil {
		if now.Add(renewBefore).Before(cert.NotAfter) {
			return cert, key, nil
		}
		return nil, nil, fmt.Errorf("the management plane's CA %s expires on %s; move the state directory aside and start afresh", p.caCert(), cert.NotAfter.Format(time.DateOnly))
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("reading the CA: %w", err)
	}
	newKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: "capstan-management-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, newKey.Public(), newKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if err := writePair(p.caCert(), p.caKey(), der, newKey); err != nil {
		return nil, nil, err
	}
	return cert, newKey, nil
}

func (p pki) ensureLeaf(l leaf, ca *x509.Certificate, caKey crypto.Signer, now time.Time) error {
	if cert, _, err := loadPair(p.certFile(l), p.keyFile(l)); err == nil &&
		now.Add(renewBefore).Before(cert.NotAfter) && cert.CheckSignatureFrom(ca) == nil {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: newSerial(),
		Subject:      pkix.Name{CommonName: l.commonName, Organization: l.organization},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if l.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	if l.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	return writePair(p.certFile(l), p.keyFile(l), der, key)
}

func (p pki) ensureServiceAccountKey() error {
	if _, err := os.Stat(p.serviceAccountKey()); err == nil {
		if _, err := os.Stat(p.serviceAccountPub()); err == nil {
			return nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := writeFileAtomic(p.serviceAccountKey(), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(p.serviceAccountPub(), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}

func newSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	// Key first: a crash between the two writes leaves a pair that fails to
	// load and is made again, never a certificate without its key.
	if err := writeFileAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func loadPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%s or %s is not PEM", certPath, keyPath)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, fmt.Errorf("%s does not match %s", keyPath, certPath)
	}
	return cert, key, nil
}

// writeFileAtomic replaces path in one rename, so that a crash never leaves a
// half-written file behind.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
