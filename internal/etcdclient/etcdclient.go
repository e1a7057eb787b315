// Package etcdclient connects to a workload cluster's etcd as its kubeadm
// tooling does: over TLS, with a short-lived client certificate issued on
// the spot by the cluster's etcd CA. The control plane's controller and a
// joining control-plane machine both talk to etcd this way.
package etcdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"capstan.dev/capstan/internal/certs"
)

// New connects to endpoints as commonName, with a one-hour certificate from
// ca. ctx bounds the connection's life (nil: none); a nil log is etcd's
// default logger.
func New(ctx context.Context, ca *certs.KeyPair, endpoints []string, commonName string, dialTimeout time.Duration, log *zap.Logger) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no etcd endpoint to connect to")
	}
	leaf, err := ca.Issue(certs.Request{CommonName: commonName, Client: true, Lifetime: time.Hour}, time.Now())
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
