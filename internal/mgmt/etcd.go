package mgmt

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// startEtcd runs a single-member etcd over TLS with client-certificate
// authentication, so that nothing on the host but the API server can read
// the objects (secrets included) it stores.
func startEtcd(ctx context.Context, dir StateDir, ports Ports, logLevel string) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "capstan"
	cfg.Dir = dir.etcdDir()
	p := dir.pki()
	tls := transport.TLSInfo{
		CertFile:       p.certFile(etcdServing),
		KeyFile:        p.keyFile(etcdServing),
		TrustedCAFile:  p.caCert(),
		ClientCertAuth: true,
	}
	cfg.ClientTLSInfo = tls
	cfg.PeerTLSInfo = tls
	clientURL := loopbackURL("https", ports.EtcdClient)
	peerURL := loopbackURL("https", ports.EtcdPeer)
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.Name + "=" + peerURL.String()
	cfg.LogLevel = logLevel
	cfg.LogOutputs = []string{"stderr"}
	// The API server compacts etcd itself; etcd's own periodic compaction
	// bounds history if the API server is down for a long while.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "1h"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting etcd in %s: %w", cfg.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd stopped during start-up: %w", err)
	case <-time.After(2 * time.Minute):
		e.Close()
		return nil, fmt.Errorf("etcd in %s was not ready after 2 minutes", cfg.Dir)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
}

func loopbackURL(scheme string, port int) url.URL {
	return url.URL{Scheme: scheme, Host: "127.0.0.1:" + strconv.Itoa(port)}
}
