// Package etcdclient connects to a workload cluster's etcd as its kubeadm
// tooling does: over TLS, with a short-lived client certificate issued on
// the spot by the cluster's etcd CA. The control plane's controller and a
// joining control-plane machine both talk to etcd this way.
package etcdclient

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"capstan.dev/capstan/internal/certs"
)

// New connects to endpoints as commonName, with a one-hour certificate from
// ca whose key is of algorithm alg (the cluster's). ctx bounds the
// connection's life (nil: none); a nil log is etcd's default logger.
func New(ctx context.Context, ca *certs.KeyPair, alg certs.KeyAlgorithm, endpoints []string, commonName string, dialTimeout time.Duration, log *zap.Logger) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no etcd endpoint to connect to")
	}
	leaf, err := clientCertificate(ca, alg, commonName, time.Now())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dialTimeout,
		TLS: &tls.Config{
			RootCAs:      pool,
			Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key, Leaf: leaf.Cert}},
			MinVersion:   tls.VersionTLS12,
		},
		Logger: log,
	}
	if ctx != nil {
		cfg.Context = ctx
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd at %s: %w", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}

// The client certificate's lifetime, and how long before its end a new one
// is issued instead of reusing it: a connection made with it has at least
// that long before etcd refuses a reconnect.
const (
	leafLifetime = time.Hour
	leafReuseFor = leafLifetime / 2
)

// leafKey identifies the client certificates that can stand for each
// other: same CA (by its certificate), same name, same key algorithm.
type leafKey struct {
	ca         [sha256.Size]byte
	commonName string
	alg        certs.KeyAlgorithm
}

// leaves caches issued client certificates. The control plane's controller
// connects to each cluster's etcd on nearly every reconcile, and an RSA
// key costs tens of milliseconds to generate (RSA-4096 about a second), so
// minting one per connection would make key generation the controller's
// main work; reusing one for half its life bounds it to a few per cluster
// an hour.
var leaves = struct {
	sync.Mutex
	m map[leafKey]*certs.KeyPair
}{m: map[leafKey]*certs.KeyPair{}}

// clientCertificate returns a cached client certificate that stays valid
// for more than leafReuseFor, or issues and caches a new one.
func clientCertificate(ca *certs.KeyPair, alg certs.KeyAlgorithm, commonName string, now time.Time) (*certs.KeyPair, error) {
	key := leafKey{ca: sha256.Sum256(ca.Cert.Raw), commonName: commonName, alg: alg}
	leaves.Lock()
	kp := leaves.m[key]
	leaves.Unlock()
	if kp != nil && kp.ValidFor(now, leafReuseFor) {
		return kp, nil
	}
	// Issued without the lock held, so that one cluster's key generation
	// does not hold up connections to the others; two callers racing for
	// the same key both issue one, and the later one stays.
	kp, err := ca.Issue(certs.Request{CommonName: commonName, Client: true, Lifetime: leafLifetime, KeyAlgorithm: alg}, now)
	if err != nil {
		return nil, err
	}
	leaves.Lock()
	defer leaves.Unlock()
	// Entries of deleted clusters, or of CAs that were replaced, go once
	// they are no longer usable, so the cache holds at most about one
	// entry per cluster and name.
	for k, old := range leaves.m {
		if !old.ValidFor(now, leafReuseFor) {
			delete(leaves.m, k)
		}
	}
	leaves.m[key] = kp
	return kp, nil
}
