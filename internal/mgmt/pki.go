package mgmt

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/certs"
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

// keyAlgorithm is the algorithm of the plane's own keys. The plane is not a
// Cluster API cluster: its keys are read only by its own API server and
// etcd and by kubeconfig clients, all of which take ECDSA, and no provider
// looks for them. P-256 keeps a fresh plane (the first "capstan up", and
// every test package's harness) from spending most of a second of CPU on
// seven RSA keys, and matches the keys of planes that already exist.
const keyAlgorithm = certs.ECDSAP256

// pki is the set of files under <state>/pki that the plane's components use.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p pki) caCert() string            { return p.path("ca.crt") }
func (p pki) caKey() string             { return p.path("ca.key") }
func (p pki) etcdCACert() string        { return p.path("etcd/ca.crt") }
func (p pki) etcdCAKey() string         { return p.path("etcd/ca.key") }
func (p pki) serviceAccountKey() string { return p.path("sa.key") }
func (p pki) serviceAccountPub() string { return p.path("sa.pub") }

// leaf names a certificate/key pair signed by the plane's CA, or, for
// etcd's own, by the etcd CA.
type leaf struct {
	name         string // file stem under pki/
	commonName   string
	organization []string
	server       bool // serving certificate for 127.0.0.1/localhost
	client       bool
}

var (
	apiServerServing = leaf{name: "apiserver", commonName: "capstan-apiserver", server: true}
	// etcd trusts its own CA only, as kubeadm lays it out (etcd/ca.crt,
	// etcd/server.crt, apiserver-etcd-client.crt): a client certificate
	// of the plane's CA (the admin's, the controllers') does not open etcd.
	etcdServing = leaf{name: "etcd/server", commonName: "capstan-etcd", server: true, client: true}
	etcdClient  = leaf{name: "apiserver-etcd-client", commonName: "capstan-apiserver-etcd-client", client: true}
	adminClient = leaf{name: "admin", commonName: "capstan-admin", organization: []string{"system:masters"}, client: true}
	// The API server's identity towards kubelets, for port-forward, logs
	// and exec to Pods of nodes that register with the plane (the plane
	// stands in for a workload cluster in tests).
	kubeletClient = leaf{name: "apiserver-kubelet-client", commonName: "capstan-apiserver-kubelet-client", organization: []string{"system:masters"}, client: true}
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
	ca, err := p.ensureCA(p.caCert(), p.caKey(), "capstan-management-ca", now)
	if err != nil {
		return err
	}
	for _, l := range []leaf{apiServerServing, adminClient, controllersClient, kubeletClient} {
		if err := p.ensureLeaf(l, ca, now); err != nil {
			return fmt.Errorf("certificate %s: %w", l.name, err)
		}
	}
	if err := p.ensureEtcd(now); err != nil {
		return err
	}
	if err := p.ensureServiceAccountKey(); err != nil {
		return err
	}
	return p.ensureEncryptionConfig()
}

// legacyEtcdServing is where planes before the etcd CA kept etcd's serving
// certificate, signed by the plane's CA.
const legacyEtcdServing = "etcd-server"

// ensureEtcd makes, or keeps, the etcd CA and the two certificates signed
// by it: etcd's serving one and the API server's client one. A state
// directory made before the etcd CA existed is migrated here, at start,
// before etcd runs: the etcd CA is made, both certificates are issued by
// it (the old ones do not verify against it), and the old serving pair is
// removed. etcd's data is not touched; only who may open it changes.
func (p pki) ensureEtcd(now time.Time) error {
	ca, err := p.ensureCA(p.etcdCACert(), p.etcdCAKey(), "capstan-etcd-ca", now)
	if err != nil {
		return err
	}
	for _, l := range []leaf{etcdServing, etcdClient} {
		if err := p.ensureLeaf(l, ca, now); err != nil {
			return fmt.Errorf("certificate %s: %w", l.name, err)
		}
	}
	for _, f := range []string{p.path(legacyEtcdServing + ".crt"), p.path(legacyEtcdServing + ".key")} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (p pki) ensureCA(certFile, keyFile, commonName string, now time.Time) (*certs.KeyPair, error) {
	ca, err := certs.Load(certFile, keyFile)
	if err == nil {
		if ca.ValidFor(now, renewBefore) {
			return ca, nil
		}
		return nil, fmt.Errorf("the management plane's CA %s expires on %s; move the state directory aside and start afresh", certFile, ca.Cert.NotAfter.Format(time.DateOnly))
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading the CA %s: %w", certFile, err)
	}
	if ca, err = certs.NewCA(commonName, keyAlgorithm, now, caLifetime); err != nil {
		return nil, err
	}
	return ca, ca.Write(certFile, keyFile)
}

func (p pki) ensureLeaf(l leaf, ca *certs.KeyPair, now time.Time) error {
	if kp, err := certs.Load(p.certFile(l), p.keyFile(l)); err == nil &&
		kp.ValidFor(now, renewBefore) && kp.Cert.CheckSignatureFrom(ca.Cert) == nil {
		return nil
	}
	req := certs.Request{CommonName: l.commonName, Organization: l.organization, Server: l.server, Client: l.client, Lifetime: leafLifetime, KeyAlgorithm: keyAlgorithm}
	if l.server {
		req.DNSNames = []string{"localhost"}
		req.IPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	kp, err := ca.Issue(req, now)
	if err != nil {
		return err
	}
	return kp.Write(p.certFile(l), p.keyFile(l))
}

func (p pki) ensureServiceAccountKey() error {
	if _, err := os.Stat(p.serviceAccountKey()); err == nil {
		if _, err := os.Stat(p.serviceAccountPub()); err == nil {
			return nil
		}
	}
	keyPEM, pubPEM, err := certs.NewServiceAccountKey(keyAlgorithm)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(p.serviceAccountKey(), keyPEM, 0o600); err != nil {
		return err
	}
	return atomicfile.WriteFile(p.serviceAccountPub(), pubPEM, 0o644)
}
