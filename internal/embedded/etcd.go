package embedded

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// EtcdConfig describes one etcd member.
type EtcdConfig struct {
	// Name is the member name; it must be unique within the cluster.
	Name string
	// Dir holds the member's data.
	Dir string
	// ClientURL and PeerURL are both listened on and advertised.
	ClientURL, PeerURL url.URL
	// ClientTLS and PeerTLS secure the two endpoints; set ClientCertAuth in
	// both so that nothing without a certificate from the CA gets in.
	ClientTLS, PeerTLS transport.TLSInfo
	// InitialCluster is etcd's --initial-cluster. Empty means a new cluster
	// of this member alone.
	InitialCluster string
	// Join starts the member with --initial-cluster-state=existing: it was
	// added to a running cluster (as a learner, by a control-plane join)
	// beforehand.
	Join bool
	// LogLevel is etcd's log level (debug, info, warn, error); empty means
	// error.
	LogLevel string
	// ReadyTimeout bounds the wait for the member to serve; zero means two
	// minutes. A joining member is ready once it has caught up with the
	// leader.
	ReadyTimeout time.Duration
}

// StartEtcd starts an etcd member and returns once it serves clients.
func StartEtcd(ctx context.Context, c EtcdConfig) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.Dir
	cfg.ClientTLSInfo = c.ClientTLS
	cfg.PeerTLSInfo = c.PeerTLS
	cfg.ListenClientUrls = []url.URL{c.ClientURL}
	cfg.AdvertiseClientUrls = []url.URL{c.ClientURL}
	cfg.ListenPeerUrls = []url.URL{c.PeerURL}
	cfg.AdvertisePeerUrls = []url.URL{c.PeerURL}
	cfg.InitialCluster = c.InitialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = c.Name + "=" + c.PeerURL.String()
	}
	if c.Join {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.LogLevel = c.LogLevel
	if cfg.LogLevel == "" {
		cfg.LogLevel = "error"
	}
	cfg.LogOutputs = []string{"stderr"}
	// The API server compacts etcd itself; etcd's own periodic compaction
	// bounds history if the API server is down for a long while.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "1h"

	timeout := c.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
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
	case <-time.After(timeout):
		e.Close()
		return nil, fmt.Errorf("etcd in %s was not ready after %s", cfg.Dir, timeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
}
